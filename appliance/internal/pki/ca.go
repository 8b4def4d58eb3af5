package pki

// The certificate authority: created once per cluster (InitCA), kept by the
// MDMs, signs node certificates (Issue).

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Default lifetimes. A node certificate is renewed (re-issued and reloaded,
// see Identity.Reload) well before it ends; `cairn pki show` and the API
// show every daemon's expiry.
const (
	DefaultCAValidity   = 10 * 365 * 24 * time.Hour
	DefaultNodeValidity = 365 * 24 * time.Hour
)

// Backdate is how far before its creation a certificate's NotBefore lies, so
// that a peer whose clock is a few minutes behind accepts it at once.
const Backdate = 5 * time.Minute

// CA is a loaded certificate authority.
type CA struct {
	Cert *x509.Certificate
	key  crypto.Signer
	pem  []byte // Cert, PEM-encoded
}

// InitCA creates a new cluster CA in dir (ca.crt, ca.key 0600). It refuses
// to overwrite an existing one: a new CA invalidates every certificate of
// the cluster.
func InitCA(dir, cluster string, validity time.Duration) (*CA, error) {
	if !validName(cluster) {
		return nil, fmt.Errorf("cluster name %q: use 1-128 characters from A-Z a-z 0-9 . _ -", cluster)
	}
	if validity <= 0 {
		validity = DefaultCAValidity
	}
	if _, err := os.Stat(filepath.Join(dir, CAKeyFile)); err == nil {
		return nil, fmt.Errorf("%s already holds a CA (%s): a new CA would invalidate every certificate of the cluster; use it, or choose another directory", dir, CAKeyFile)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "Cairn cluster CA " + cluster, Organization: []string{"Cairn"}},
		NotBefore:             now.Add(-Backdate),
		NotAfter:              now.Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("create the CA certificate: %w", err)
	}
	keyPEM, err := encodeKey(key)
	if err != nil {
		return nil, err
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("CA directory: %w", err)
	}
	// The key first: a directory with ca.crt but no ca.key is not a CA.
	if err := writeFile(filepath.Join(dir, CAKeyFile), keyPEM, 0o600); err != nil {
		return nil, err
	}
	if err := writeFile(filepath.Join(dir, CACertFile), certPEM, 0o644); err != nil {
		return nil, err
	}
	cert, _ := x509.ParseCertificate(der)
	return &CA{Cert: cert, key: key, pem: certPEM}, nil
}

// Created is when the CA was created (InitCA), read from its certificate:
// unlike the file's mtime, a copied or restored ca.crt does not move it.
func (ca *CA) Created() time.Time { return ca.Cert.NotBefore.Add(Backdate) }

// LoadCA loads the CA of dir.
func LoadCA(dir string) (*CA, error) {
	certPEM, err := os.ReadFile(filepath.Join(dir, CACertFile))
	if err != nil {
		return nil, fmt.Errorf("load the CA: %w (create one with 'cairn pki init --dir %s')", err, dir)
	}
	keyPEM, err := os.ReadFile(filepath.Join(dir, CAKeyFile))
	if err != nil {
		return nil, fmt.Errorf("load the CA key: %w (only the CA directory the MDMs keep has it)", err)
	}
	ca, err := ParseCA(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("CA directory %s: %w", dir, err)
	}
	return ca, nil
}

// CertPEM is the CA certificate, PEM-encoded.
func (ca *CA) CertPEM() []byte { return ca.pem }

// KeyPEM is the CA's private key, PEM (PKCS#8), as ca.key holds it: only
// for handing the CA to another MDM member (internal/join, CAPath). It is
// the cluster's master secret: never log it, never store it anywhere but a
// CA directory (0600).
func (ca *CA) KeyPEM() ([]byte, error) { return encodeKey(ca.key) }

// ParseCA is the CA of a CA certificate and its key (PEM, as a CA
// directory holds them), the key checked against the certificate. Its
// errors never quote the key.
func ParseCA(certPEM, keyPEM []byte) (*CA, error) {
	cert, err := parseCert(certPEM)
	if err != nil {
		return nil, fmt.Errorf("the CA certificate: %w", err)
	}
	if !cert.IsCA {
		return nil, errors.New("the CA certificate is not a CA's")
	}
	key, err := parseKey(keyPEM)
	if err != nil {
		return nil, fmt.Errorf("the CA key: %w", err)
	}
	if !publicEqual(key.Public(), cert.PublicKey) {
		return nil, errors.New("the CA key does not belong to the CA certificate")
	}
	return &CA{Cert: cert, key: key, pem: certPEM}, nil
}

// Request is what a node certificate is issued for.
type Request struct {
	Role     string
	Name     string
	Hosts    []string // IP addresses and DNS names the node serves at (server certificates)
	Validity time.Duration
}

// Issue creates a key pair and a certificate for r, signed by the CA.
func (ca *CA) Issue(r Request) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	certPEM, err = ca.Sign(r, key.Public())
	if err != nil {
		return nil, nil, err
	}
	keyPEM, err = encodeKey(key)
	return certPEM, keyPEM, err
}

// Sign certifies pub for r (the key pair stays with whoever made it).
func (ca *CA) Sign(r Request, pub crypto.PublicKey) ([]byte, error) {
	if !ValidRole(r.Role) {
		return nil, fmt.Errorf("role %q: use one of %v", r.Role, Roles)
	}
	if !validName(r.Name) {
		return nil, fmt.Errorf("name %q: use 1-128 characters from A-Z a-z 0-9 . _ -", r.Name)
	}
	if r.Validity <= 0 {
		r.Validity = DefaultNodeValidity
	}
	now := time.Now()
	notAfter := now.Add(r.Validity)
	if notAfter.After(ca.Cert.NotAfter) {
		notAfter = ca.Cert.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: r.Role, Organization: []string{"Cairn"}, OrganizationalUnit: []string{r.Name}},
		NotBefore:    now.Add(-Backdate),
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		// Every daemon is both: it serves and it connects to others.
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	tmpl.URIs = []*url.URL{nodeURI(r.Role, r.Name)}
	for _, h := range r.Hosts {
		if h == "" {
			continue
		}
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			// DNS names compare without case; certificates carry them in
			// lower case, the form the appliance contract takes host names
			// in, so that "SVM-4.Lab" and "svm-4.lab" are one name.
			tmpl.DNSNames = append(tmpl.DNSNames, strings.ToLower(h))
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, pub, ca.key)
	if err != nil {
		return nil, fmt.Errorf("sign the certificate of %s/%s: %w", r.Role, r.Name, err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), nil
}

// IssueTo issues a certificate for r and writes a node PKI directory: the
// CA certificate, node.crt and node.key (0600). Existing files are replaced
// atomically, so a running daemon reloading them never reads half a file.
func (ca *CA) IssueTo(dir string, r Request) error {
	certPEM, keyPEM, err := ca.Issue(r)
	if err != nil {
		return err
	}
	return WriteNode(dir, ca.pem, certPEM, keyPEM)
}

// WriteNode writes a node PKI directory: the CA certificate, node.crt and
// node.key (0600), each replaced atomically.
func WriteNode(dir string, caPEM, certPEM, keyPEM []byte) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("PKI directory: %w", err)
	}
	if err := writeFile(filepath.Join(dir, CACertFile), caPEM, 0o644); err != nil {
		return err
	}
	// The key before the certificate: a reload between the two writes sees
	// a mismatched pair and keeps the old one (LoadIdentity checks the pair).
	if err := writeFile(filepath.Join(dir, NodeKeyFile), keyPEM, 0o600); err != nil {
		return err
	}
	return writeFile(filepath.Join(dir, NodeCertFile), certPEM, 0o644)
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic("pki: no randomness: " + err.Error())
	}
	return n.Add(n, big.NewInt(1))
}

// encodeKey is k as a PEM "PRIVATE KEY" (PKCS#8).
func encodeKey(k crypto.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// parseKey reads a PEM "PRIVATE KEY" (PKCS#8). Its errors never quote the
// input: it is a secret.
func parseKey(b []byte) (crypto.Signer, error) {
	blk, _ := pem.Decode(b)
	if blk == nil || blk.Type != "PRIVATE KEY" {
		return nil, errors.New("not a PEM \"PRIVATE KEY\"")
	}
	k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
	if err != nil {
		return nil, errors.New("the key does not parse as PKCS#8")
	}
	s, ok := k.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("unsupported key type %T", k)
	}
	return s, nil
}

func parseCert(b []byte) (*x509.Certificate, error) {
	blk, _ := pem.Decode(b)
	if blk == nil || blk.Type != "CERTIFICATE" {
		return nil, errors.New("not a PEM certificate")
	}
	return x509.ParseCertificate(blk.Bytes)
}

func publicEqual(a, b crypto.PublicKey) bool {
	e, ok := a.(interface{ Equal(crypto.PublicKey) bool })
	return ok && e.Equal(b)
}

// writeFile replaces path atomically with data at mode perm.
func writeFile(path string, data []byte, perm os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	err = tmp.Chmod(perm)
	if err == nil {
		_, err = tmp.Write(data)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// EncodeKey is k as PEM (PKCS#8), the form of node.key: for a node that
// makes its own key pair and asks for a certificate (internal/join).
func EncodeKey(k crypto.PrivateKey) ([]byte, error) { return encodeKey(k) }
