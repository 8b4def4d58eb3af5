// Tests of the gateway's TLS: the certificate made at first start, reloading a replaced one.

package gateway

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestTLS(t *testing.T) {
	dir := t.TempDir()
	addr, logs := runGateway(t, Config{StateDir: dir, TLS: true})
	pem, err := os.ReadFile(filepath.Join(dir, CertFile))
	if err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(filepath.Join(dir, KeyFile)); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key.pem: %v %v", st, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		t.Fatal("cert.pem holds no certificate")
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	resp, err := client.Get("https://" + addr + "/api/v1/openapi.json")
	if err != nil {
		t.Fatalf("TLS with the generated certificate as CA: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("openapi.json: %d", resp.StatusCode)
	}
	fp := resp.TLS.PeerCertificates[0]
	if !strings.Contains(logs.String(), "sha256_fingerprint=") || fp.PublicKeyAlgorithm != x509.ECDSA {
		t.Errorf("fingerprint not logged or key not ECDSA: %v", fp.PublicKeyAlgorithm)
	}
	// Plain HTTP on the TLS port gets no API.
	if resp, err := http.Get("http://" + addr + "/api/v1/openapi.json"); err == nil {
		if resp.StatusCode == 200 {
			t.Error("plain HTTP served the API on the TLS port")
		}
		resp.Body.Close()
	}
}

// TestCertificateReplacement: an admin's new cert.pem/key.pem are served
// from the next handshake on.
func TestCertificateReplacement(t *testing.T) {
	dir := t.TempDir()
	c, err := loadOrCreateCert(dir, "127.0.0.1:8443")
	if err != nil {
		t.Fatal(err)
	}
	first := c.fingerprint()
	other := t.TempDir()
	if err := generateCert(filepath.Join(other, CertFile), filepath.Join(other, KeyFile), "127.0.0.1:8443"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond) // a distinct modification time
	for _, f := range []string{KeyFile, CertFile} {
		if err := os.WriteFile(filepath.Join(dir, f), must(os.ReadFile(filepath.Join(other, f))), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if second := c.fingerprint(); second == first || second == "" {
		t.Errorf("certificate not reloaded: %s", second)
	}
	// Half-written replacement: keep serving the last good pair.
	good := c.fingerprint()
	os.WriteFile(filepath.Join(dir, CertFile), []byte("garbage"), 0o644)
	if got := c.fingerprint(); got != good {
		t.Errorf("a broken cert.pem replaced the served certificate: %s", got)
	}
	// Only one of the two files: refuse to start.
	os.Remove(filepath.Join(dir, KeyFile))
	if _, err := loadOrCreateCert(dir, ""); err == nil || !strings.Contains(err.Error(), "only one of") {
		t.Errorf("start with cert.pem but no key.pem: %v", err)
	}
}
