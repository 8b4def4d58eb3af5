package pki_test

import (
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-storage/cairn/appliance/internal/pki"
)

// TestCAKeyBackup: sealed under a recovery key, the CA key opens only with
// that key and only beside its own certificate; restored into an empty
// directory it issues certificates the original CA's peers accept.
func TestCAKeyBackup(t *testing.T) {
	dir := t.TempDir()
	ca, err := pki.InitCA(dir, "lab", 0)
	if err != nil {
		t.Fatal(err)
	}
	rk := pki.NewRecoveryKey()
	if !strings.HasPrefix(rk, "cairn-rk1-") || len(rk) != len("cairn-rk1-")+52+12 {
		t.Fatalf("recovery key %q", rk)
	}
	sealed, err := ca.SealBackup(rk)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM, _ := os.ReadFile(filepath.Join(dir, pki.CAKeyFile))
	if strings.Contains(string(sealed), string(keyPEM[30:60])) {
		t.Fatal("the sealed backup holds the key in clear")
	}

	// Typed back by a person: lower case, spaces, a newline.
	typed := strings.ToLower(strings.ReplaceAll(rk, "-", " ")) + "\n"
	typed = "cairn-rk1-" + typed[len("cairn rk1 "):]
	restored, err := pki.OpenBackup(sealed, typed)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "ca")
	if err := restored.WriteTo(out); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(filepath.Join(out, pki.CAKeyFile)); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("restored key file: %v %v", st, err)
	}
	if err := restored.WriteTo(out); err == nil || !strings.Contains(err.Error(), "already holds a CA key") {
		t.Fatalf("restoring over a CA: %v", err)
	}
	again, err := pki.LoadCA(out)
	if err != nil {
		t.Fatal(err)
	}
	certPEM, _, err := again.Issue(pki.Request{Role: pki.RoleSDS, Name: "sds9"})
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	leaf := mustCert(t, certPEM)
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		t.Fatalf("a certificate of the restored CA does not verify against the original: %v", err)
	}

	// Refusals: another recovery key; an altered seal; another CA's
	// certificate swapped in; a mistyped key; garbage.
	if _, err := pki.OpenBackup(sealed, pki.NewRecoveryKey()); !errors.Is(err, pki.ErrBackupKey) {
		t.Errorf("another recovery key: %v", err)
	}
	var doc map[string]any
	_ = json.Unmarshal(sealed, &doc)
	other, _ := pki.InitCA(t.TempDir(), "other", 0)
	swapped := clone(doc)
	swapped["ca_cert"] = string(other.CertPEM())
	if _, err := pki.OpenBackup(mustJSON(t, swapped), rk); !errors.Is(err, pki.ErrBackupKey) {
		t.Errorf("another CA's certificate beside the seal: %v", err)
	}
	altered := clone(doc)
	b, _ := base64.StdEncoding.DecodeString(altered["sealed"].(string))
	b[5] ^= 1
	altered["sealed"] = base64.StdEncoding.EncodeToString(b)
	if _, err := pki.OpenBackup(mustJSON(t, altered), rk); !errors.Is(err, pki.ErrBackupKey) {
		t.Errorf("an altered seal: %v", err)
	}
	if _, err := pki.OpenBackup(sealed, rk[:len(rk)-1]); err == nil || !strings.Contains(err.Error(), "mistyped") {
		t.Errorf("a mistyped key: %v", err)
	}
	if _, err := pki.OpenBackup([]byte(strings.Repeat("x", 20<<10)), rk); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("an oversized backup: %v", err)
	}
}

// FuzzOpenBackup: whatever etcd hands back, opening it fails cleanly or
// yields a CA whose key matches its certificate.
func FuzzOpenBackup(f *testing.F) {
	ca, err := pki.InitCA(f.TempDir(), "fuzz", 0)
	if err != nil {
		f.Fatal(err)
	}
	rk := pki.NewRecoveryKey()
	sealed, err := ca.SealBackup(rk)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(sealed, rk)
	f.Add([]byte(`{"format":1,"aead":"AES-256-GCM","ca_cert":"","nonce":"","sealed":""}`), rk)
	f.Add([]byte(`{}`), "cairn-rk1-")
	f.Fuzz(func(t *testing.T, b []byte, key string) {
		got, err := pki.OpenBackup(b, key)
		if err == nil && (got == nil || got.Cert == nil || !got.Cert.IsCA) {
			t.Fatalf("opened without a CA certificate: %+v", got)
		}
	})
}

func clone(m map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range m {
		out[k] = v
	}
	return out
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustCert(t *testing.T, certPEM []byte) *x509.Certificate {
	t.Helper()
	blk, _ := pem.Decode(certPEM)
	if blk == nil {
		t.Fatal("no PEM certificate")
	}
	c, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
