package server

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Certificate is the plugin server's TLS identity.
type Certificate struct {
	CertFile, KeyFile string
	TLS               tls.Certificate
	// Thumbprints of the leaf, colon-separated upper-case hex, as vCenter's
	// extension registration expects them (SHA-1 for older vCenters).
	SHA1, SHA256 string
	PEM          string // the leaf certificate, as vCenter 8.0.2+ registers it
}

func colonHex(b []byte) string {
	parts := make([]string, len(b))
	for i, x := range b {
		parts[i] = fmt.Sprintf("%02X", x)
	}
	return strings.Join(parts, ":")
}

// EnsureCertificate loads dir/plugin-cert.pem and dir/plugin-key.pem, or
// creates a self-signed ECDSA P-256 certificate for names (host names or
// IPs) valid 5 years on first start. The key file is mode 0600.
func EnsureCertificate(dir string, names []string) (*Certificate, error) {
	c := &Certificate{CertFile: filepath.Join(dir, "plugin-cert.pem"), KeyFile: filepath.Join(dir, "plugin-key.pem")}
	if _, err := os.Stat(c.CertFile); errors.Is(err, os.ErrNotExist) {
		if err := generate(c, names); err != nil {
			return nil, err
		}
	}
	pair, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("plugin certificate %s: %w (remove both files to generate a new one)", c.CertFile, err)
	}
	c.TLS = pair
	s1 := sha1.Sum(pair.Certificate[0])
	s256 := sha256.Sum256(pair.Certificate[0])
	c.SHA1, c.SHA256 = colonHex(s1[:]), colonHex(s256[:])
	c.PEM = string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: pair.Certificate[0]}))
	return c, nil
}

func generate(c *Certificate, names []string) error {
	if err := os.MkdirAll(filepath.Dir(c.CertFile), 0o700); err != nil {
		return err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: "Cairn vCenter plugin", Organization: []string{"Cairn"}},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().AddDate(5, 0, 0),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, n := range append(names, "localhost", "127.0.0.1") {
		if ip := net.ParseIP(n); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else if n != "" {
			tmpl.DNSNames = append(tmpl.DNSNames, n)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return err
	}
	kb, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	if err := os.WriteFile(c.KeyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		return err
	}
	return os.WriteFile(c.CertFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
}
