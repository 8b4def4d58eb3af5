package join

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/cairn-storage/cairn/appliance/internal/pki"
)

// maxAnswer bounds the service's reply (two PEM certificates, or the CA's
// certificate and key).
const maxAnswer = 64 << 10

// Join asks the join service at urls (https://MDM:PORT, tried in order) for
// a certificate for r with token, and writes the node's PKI directory dir
// (ca.crt, node.crt, node.key 0600). The key pair is made here and its
// private half never sent.
//
// token is a join token (cj1.…) or, at a new system's first boot, the
// bootstrap token (bootstrap.go). With a join token the service must prove
// it holds the CA the token names before anything is sent. With the
// bootstrap token no CA can be pinned: the service must present an MDM
// certificate issued by the CA after it, the token itself is never sent
// (only a proof bound to this request), and the answer must prove the
// service holds the token too, over that CA and the certificate. Either
// way the certificate must be for r and for this key, signed by that CA.
func Join(ctx context.Context, urls []string, token string, r pki.Request, dir string) (*x509.Certificate, error) {
	var t Token
	bootstrap := strings.TrimSpace(token)
	if !isBootstrapToken(bootstrap) {
		var err error
		if t, err = Parse(token); err != nil {
			return nil, err
		}
		bootstrap = ""
	}
	key, der, csr, err := newCSR(r.Role)
	if err != nil {
		return nil, err
	}
	req := Request{Role: r.Role, Name: r.Name, Hosts: r.Hosts, CSR: csr}
	if bootstrap != "" {
		req.Proof = requestProof(bootstrap, r.Role, r.Name, r.Hosts, der)
	} else {
		req.Token = t.String()
	}
	body, _ := json.Marshal(req)
	return exchange(ctx, urls, Path, body, t.CA, nil, key, r, bootstrap, dir)
}

// newCSR makes this node's new key pair (its private half never leaves
// the node) and a request for it: DER and PEM.
func newCSR(role string) (*ecdsa.PrivateKey, []byte, string, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, "", err
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: role}}, key)
	if err != nil {
		return nil, nil, "", err
	}
	return key, der, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})), nil
}

// exchange posts body to path at each of urls in turn until one answers,
// over TLS that accepts only an MDM certificate issued by the CA whose
// fingerprint is fp (with no fp, a bootstrap join, by a CA the chain holds,
// trusted once the answer's proof verifies), presenting cert if not nil.
// The answer must be a certificate for key and r (check); then dir is
// written. A refusal or an impostor stops at once (another MDM would do
// the same); a service that does not answer gives way to the next.
func exchange(ctx context.Context, urls []string, path string, body []byte, fp string, cert *tls.Certificate,
	key *ecdsa.PrivateKey, r pki.Request, bootstrap, dir string) (*x509.Certificate, error) {
	var ca *x509.Certificate
	hc := newClient(fp, cert, &ca)
	defer hc.CloseIdleConnections()
	var errs []error
	for _, u := range urls {
		a, err := ask(ctx, hc, strings.TrimRight(u, "/")+path, body)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", u, err))
			if errors.Is(err, errFinal) {
				break
			}
			continue
		}
		c, err := check(a, ca, key, r, bootstrap)
		if err != nil {
			return nil, fmt.Errorf("%s: %w: %w", u, errFinal, err)
		}
		keyPEM, err := pki.EncodeKey(key)
		if err != nil {
			return nil, err
		}
		if err := pki.WriteNode(dir, []byte(a.CA), []byte(a.Cert), keyPEM); err != nil {
			return nil, err
		}
		return c, nil
	}
	return nil, failed{"join: no service gave a certificate", errs}
}

// newClient is an HTTP client of the join service over TLS 1.3 that accepts
// only an MDM certificate issued by the CA whose fingerprint is fp (with no
// fp, a bootstrap join: by a CA the chain holds, trusted once the answer's
// proof verifies), and presents cert if not nil. Each handshake stores the
// server's CA in *ca.
func newClient(fp string, cert *tls.Certificate, ca **x509.Certificate) *http.Client {
	cfg := &tls.Config{
		MinVersion:         tls.VersionTLS13,
		InsecureSkipVerify: true, // verified here: against the pinned CA, or by the answer's proof
		VerifyConnection: func(cs tls.ConnectionState) error {
			c, err := serverCA(cs.PeerCertificates, fp)
			*ca = c
			return err
		},
	}
	if cert != nil {
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return cert, nil }
	}
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}
}

// failed is every service's refusal or silence; what says to what.
type failed struct {
	what string
	errs []error
}

func (f failed) Error() string {
	m := make([]string, len(f.errs))
	for i, e := range f.errs {
		m[i] = e.Error()
	}
	return f.what + " (" + strings.Join(m, "; ") + ")"
}

func (f failed) Unwrap() []error { return f.errs }

// errFinal marks an answer that another MDM would give too (the token was
// refused or spent): trying the next one would only spend time.
var errFinal = errors.New("refused")

// errImpostor: a server that cannot show the CA the token names.
var errImpostor = errors.New("the join service does not hold the CA the token names: wrong address, or an impostor; nothing was sent")

// errBootstrapImpostor: an answer to a bootstrap join without the proof
// that the service holds the bootstrap token.
var errBootstrapImpostor = errors.New("the join service's answer does not prove it holds this system's bootstrap token: an impostor, or another system's MDM; nothing was written")

func ask(ctx context.Context, hc *http.Client, url string, body []byte) (Answer, error) {
	b, err := post(ctx, hc, url, body)
	if err != nil {
		return Answer{}, err
	}
	var a Answer
	if err := json.Unmarshal(b, &a); err != nil {
		return Answer{}, fmt.Errorf("malformed answer: %v", err)
	}
	return a, nil
}

// post sends body to url and returns the body of a 200 answer (at most
// maxAnswer bytes); any other status is an error with the service's
// message, final (errFinal) for a refusal another MDM would repeat.
func post(ctx context.Context, hc *http.Client, url string, body []byte) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxAnswer {
		return nil, fmt.Errorf("answer larger than %d bytes", maxAnswer)
	}
	if resp.StatusCode != http.StatusOK {
		msg := strings.TrimSpace(string(b))
		if len(msg) > 300 {
			msg = msg[:300]
		}
		err := fmt.Errorf("%s: %s", resp.Status, msg)
		if resp.StatusCode == http.StatusForbidden || resp.StatusCode == http.StatusBadRequest {
			err = fmt.Errorf("%w: %v", errFinal, err)
		}
		return nil, err
	}
	return b, nil
}

// serverCA finds, in the chain a server sent, the CA certificate that issued
// its certificate, an MDM's: the one whose fingerprint is fp, the token's;
// with no fp (a bootstrap join), the first that issued it, trusted only once
// the answer's proof verifies.
func serverCA(chain []*x509.Certificate, fp string) (*x509.Certificate, error) {
	if len(chain) < 2 {
		return nil, errors.New("the join service sent no CA certificate: not a Cairn MDM")
	}
	for _, c := range chain[1:] {
		if !c.IsCA || (fp != "" && pki.InfoOf(c).Fingerprint != fp) {
			continue
		}
		if err := issuedBy(chain[0], c, x509.ExtKeyUsageServerAuth); err != nil {
			if fp == "" {
				continue
			}
			return nil, fmt.Errorf("the join service's certificate: %v", err)
		}
		p, err := pki.PeerOf(chain[0])
		if err != nil || p.Role != pki.RoleMDM {
			return nil, fmt.Errorf("the join service is not an MDM of the cluster (%v %v)", p, err)
		}
		return c, nil
	}
	if fp == "" {
		return nil, errors.New("the join service's certificate is not issued by a CA it sent: not a Cairn MDM")
	}
	return nil, errImpostor
}

// check accepts only a certificate for r and key, issued by ca, and ca
// itself; after a bootstrap join (bootstrap is the token), only with the
// proof that the service holds the token, over exactly that CA and
// certificate.
func check(a Answer, ca *x509.Certificate, key *ecdsa.PrivateKey, r pki.Request, bootstrap string) (*x509.Certificate, error) {
	blk, _ := pem.Decode([]byte(a.CA))
	if ca == nil || blk == nil || !bytes.Equal(blk.Bytes, ca.Raw) {
		return nil, errors.New("the answer's CA is not the one the join service presented")
	}
	blk, _ = pem.Decode([]byte(a.Cert))
	if blk == nil || blk.Type != "CERTIFICATE" {
		return nil, errors.New("the answer holds no certificate")
	}
	if bootstrap != "" && !proofOK(a.Proof, answerProof(bootstrap, ca.Raw, blk.Bytes)) {
		return nil, errBootstrapImpostor
	}
	cert, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		return nil, err
	}
	if err := issuedBy(cert, ca, x509.ExtKeyUsageClientAuth); err != nil {
		return nil, fmt.Errorf("the issued certificate: %v", err)
	}
	if !key.PublicKey.Equal(cert.PublicKey) {
		return nil, errors.New("the issued certificate is not for this node's key")
	}
	if p, err := pki.PeerOf(cert); err != nil || p.Role != r.Role || p.Name != r.Name {
		return nil, fmt.Errorf("the issued certificate is for %v, not %s/%s", p, r.Role, r.Name)
	}
	return cert, nil
}

// Final reports whether a Join error would recur however often it is tried
// (the token refused or spent, the service an impostor, the answer wrong),
// as opposed to no service answering yet.
func Final(err error) bool {
	return errors.Is(err, errFinal) || errors.Is(err, errImpostor)
}

// Unanswered reports whether err is only that no join service answered
// (none listening yet, or none reachable): worth trying again later, unlike
// a refusal or an error of this node's own files.
func Unanswered(err error) bool {
	var f failed
	return errors.As(err, &f) && !Final(err)
}

// issuedBy verifies that c chains to ca alone and may be used for usage.
func issuedBy(c, ca *x509.Certificate, usage x509.ExtKeyUsage) error {
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	_, err := c.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{usage}})
	return err
}
