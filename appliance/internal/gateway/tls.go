package gateway

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// TLS material in the state directory. At first start the gateway generates
// a self-signed ECDSA P-256 certificate (10 years) for localhost, the host
// name, the listen address and every interface address. An admin replaces
// it by writing their own PEM files over cert.pem and key.pem (key first);
// the gateway reloads them on the next handshake after a change.
const (
	CertFile = "cert.pem"
	KeyFile  = "key.pem"
)

// certSource hands out the current certificate and reloads the files when
// their modification time changes.
type certSource struct {
	certFile, keyFile string

	mu      sync.Mutex
	cert    *tls.Certificate
	modTime time.Time
}

func loadOrCreateCert(dir, listen string) (*certSource, error) {
	c := &certSource{certFile: filepath.Join(dir, CertFile), keyFile: filepath.Join(dir, KeyFile)}
	_, cerr := os.Stat(c.certFile)
	_, kerr := os.Stat(c.keyFile)
	switch {
	case errors.Is(cerr, os.ErrNotExist) && errors.Is(kerr, os.ErrNotExist):
		if err := generateCert(c.certFile, c.keyFile, listen); err != nil {
			return nil, fmt.Errorf("generate self-signed certificate in %s: %w", dir, err)
		}
	case errors.Is(cerr, os.ErrNotExist) || errors.Is(kerr, os.ErrNotExist):
		return nil, fmt.Errorf("only one of %s and %s exists: restore the other, or remove both to generate a new self-signed pair", c.certFile, c.keyFile)
	}
	if _, err := c.load(); err != nil {
		return nil, err
	}
	return c, nil
}

// load (re)reads the pair if cert.pem changed since the last load.
func (c *certSource) load() (*tls.Certificate, error) {
	st, err := os.Stat(c.certFile)
	if err != nil {
		return nil, fmt.Errorf("TLS certificate: %w", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cert != nil && st.ModTime().Equal(c.modTime) {
		return c.cert, nil
	}
	kp, err := tls.LoadX509KeyPair(c.certFile, c.keyFile)
	if err != nil {
		if c.cert != nil {
			// Half-replaced pair: keep serving the old one until both
			// files match again.
			return c.cert, nil
		}
		return nil, fmt.Errorf("load TLS certificate %s / %s: %w (fix or remove both files to generate new ones)", c.certFile, c.keyFile, err)
	}
	c.cert, c.modTime = &kp, st.ModTime()
	return c.cert, nil
}

func (c *certSource) get(*tls.ClientHelloInfo) (*tls.Certificate, error) { return c.load() }

// fingerprint is the SHA-256 of the leaf certificate, as browsers show it.
func (c *certSource) fingerprint() string {
	kp, err := c.load()
	if err != nil || len(kp.Certificate) == 0 {
		return ""
	}
	sum := sha256.Sum256(kp.Certificate[0])
	h := strings.ToUpper(hex.EncodeToString(sum[:]))
	var parts []string
	for i := 0; i < len(h); i += 2 {
		parts = append(parts, h[i:i+2])
	}
	return strings.Join(parts, ":")
}

func generateCert(certFile, keyFile, listen string) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return err
	}
	host, _ := os.Hostname()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "cairn-gateway " + host, Organization: []string{"Cairn"}},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().AddDate(10, 0, 0),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true, // self-signed: clients trust it as its own CA (--ca-file)
		DNSNames:              []string{"localhost"},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	if host != "" && host != "localhost" {
		tmpl.DNSNames = append(tmpl.DNSNames, host)
	}
	if h, _, err := net.SplitHostPort(listen); err == nil && h != "" {
		if ip := net.ParseIP(h); ip != nil && !ip.IsUnspecified() {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else if ip == nil && h != "localhost" {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && !n.IP.IsLinkLocalUnicast() {
				tmpl.IPAddresses = append(tmpl.IPAddresses, n.IP)
			}
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return err
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	if err := writeFileAtomic(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		return err
	}
	return writeFileAtomic(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
}
