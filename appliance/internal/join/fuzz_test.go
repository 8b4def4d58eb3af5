package join

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"strings"
	"testing"
	"time"

	"github.com/cairn-storage/cairn/appliance/internal/pki"
)

// FuzzDecode: any body from the network is refused or accepted without
// panicking, and an accepted one is whole (a role, a verified CSR, and
// either a token or a proof of the right form, never both).
func FuzzDecode(f *testing.F) {
	tok, _, _ := New(strings.Repeat("ab", 32), []string{"sds"}, DefaultTTL, "admin", time.Now())
	f.Add([]byte(`{"token":"` + tok.String() + `","role":"sds","name":"x","csr":""}`))
	f.Add([]byte(`{"token":"cj1.x","role":"sds"}`))
	f.Add([]byte(`{} {}`))
	f.Add([]byte(`{"hosts":["1.2.3.4","a..b"]}`))
	// Whole requests, as Join sends them: with a token, with a proof, with both.
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	der, _ := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{}, key)
	csr := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}))
	proof := requestProof("bootstrap-token-0123456789", "mdm", "svm-2", []string{"10.0.0.2"}, der)
	for _, r := range []Request{
		{Token: tok.String(), Role: "sds", Name: "svm-4", Hosts: []string{"10.0.0.4"}, CSR: csr},
		{Proof: proof, Role: "mdm", Name: "svm-2", Hosts: []string{"10.0.0.2"}, CSR: csr},
		{Token: tok.String(), Proof: proof, Role: "mdm", Name: "svm-2", CSR: csr},
		{Proof: proof[:10], Role: "mdm", Name: "svm-2", CSR: csr},
	} {
		b, _ := json.Marshal(r)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := decode(b)
		if err == nil && (p.csr == nil || p.req.Role == "" || (p.token.ID != "") == p.bootstrap ||
			(p.bootstrap && (p.req.Token != "" || len(p.req.Proof) != 64))) {
			t.Fatalf("accepted an incomplete request: %+v", p.req)
		}
	})
}

// FuzzParse: tokens from files and OVF properties.
func FuzzParse(f *testing.F) {
	tok, _, _ := New(strings.Repeat("ab", 32), []string{"sds"}, DefaultTTL, "admin", time.Now())
	f.Add(tok.String())
	f.Add("cj1...")
	f.Fuzz(func(t *testing.T, s string) {
		if tk, err := Parse(s); err == nil {
			if back, err := Parse(tk.String()); err != nil || back != tk {
				t.Fatalf("%q parsed but does not round-trip", s)
			}
		}
	})
}

// FuzzDecodeCA: any answer to a CA request is refused or is exactly the CA
// trusted, with its key, without panicking.
func FuzzDecodeCA(f *testing.F) {
	ca, err := pki.InitCA(f.TempDir()+"/ca", "fuzz", 0)
	if err != nil {
		f.Fatal(err)
	}
	key, _ := ca.KeyPEM()
	good, _ := json.Marshal(CAAnswer{Format: caFormat, Cert: string(ca.CertPEM()), Key: string(key)})
	f.Add(good)
	f.Add([]byte(`{"format":2}`))
	f.Add([]byte(`{"format":1,"ca_cert":"","ca_key":""} {}`))
	other, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	otherPEM, _ := pki.EncodeKey(other)
	mismatched, _ := json.Marshal(CAAnswer{Format: caFormat, Cert: string(ca.CertPEM()), Key: string(otherPEM)})
	f.Add(mismatched)
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := decodeCA(b, ca.Cert)
		if err == nil && !got.Cert.Equal(ca.Cert) {
			t.Fatal("accepted another CA")
		}
		if err != nil && quotesKey(err.Error(), b) {
			t.Fatalf("an error quotes the key: %v", err)
		}
	})
}

// quotesKey: msg holds PEM armour or any line of 16 or more characters of the
// answer's ca_key (where the answer has one), i.e. key material. Naming the
// PEM type ("not a PEM \"PRIVATE KEY\"") is not quoting the key.
func quotesKey(msg string, answer []byte) bool {
	if strings.Contains(msg, "-----BEGIN") {
		return true
	}
	var a struct {
		Key string `json:"ca_key"`
	}
	if json.Unmarshal(answer, &a) != nil {
		return false
	}
	for _, line := range strings.Split(a.Key, "\n") {
		if line = strings.TrimSpace(line); len(line) >= 16 && !strings.HasPrefix(line, "-----") && strings.Contains(msg, line) {
			return true
		}
	}
	return false
}
