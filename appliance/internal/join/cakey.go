package join

// The CA for MDM members. Every MDM member (role mdm or tiebreaker) keeps
// the cluster CA in its CA directory (ca.crt, ca.key 0600) and runs the join
// service, so that nodes join and renew while any one member is down. The
// first member creates the CA at first boot (`cairn pki init`); every other
// member, once it holds its mdm certificate (got as any node gets one: a
// bootstrap join or a join token for role mdm), fetches a copy from a
// member that has it (FetchCA, `cairn pki fetch-ca`).
//
// Wire format, version 1:
//
//	POST /v1/ca   TLS client certificate: the caller's mdm certificate; body "" or "{}"
//	200           {"format": 1, "ca_cert": "<PEM CERTIFICATE>", "ca_key": "<PEM PRIVATE KEY, PKCS#8>"}
//	403           any other caller: another role, another cluster's CA, an
//	              expired certificate, none; the message says what to do
//
// The key travels under TLS alone, on purpose. The connection is TLS 1.3
// only (ephemeral ECDHE: forward secret, so a recording opens with no key
// stolen later); the service hands the key only to a certificate that
// chains to this very CA, is valid now and names role mdm; the caller pins
// the service to the CA its own certificate was issued by (fingerprint) and
// requires an MDM certificate. The two ends are then the only parties that
// hold, or may hold, the key, and nothing sits between them (no proxy, no
// TLS terminator): a further seal, the key encrypted to a key the caller
// sends, would keep out nobody that TLS does not. Whoever holds an mdm
// certificate may take the CA, which is what being an MDM means: give a
// join token for role mdm only to a new MDM member.

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/cairn-storage/cairn/appliance/internal/pki"
)

// CAPath is the join service's route where an MDM member gets the CA.
const CAPath = "/v1/ca"

// caFormat is the version of CAAnswer.
const caFormat = 1

// maxCARequest bounds the CA request's body, which carries nothing ("{}").
const maxCARequest = 64

// CAAnswer is the CA, certificate and key, as CAPath hands it to an MDM
// member. It holds the cluster's master secret: it prints redacted.
type CAAnswer struct {
	Format int    `json:"format"`
	Cert   string `json:"ca_cert"`
	Key    string `json:"ca_key"`
}

// String never shows the key.
func (a CAAnswer) String() string { return fmt.Sprintf("CA answer format %d (key redacted)", a.Format) }

// handToMDM answers POST CAPath: the CA to a caller that presents a valid
// mdm certificate of this CA; a refusal, paused and reported, to anyone else.
func (s *Server) handToMDM(w http.ResponseWriter, r *http.Request) {
	const label = "ca"
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxCARequest))
	if err != nil {
		s.refuse(w, r, http.StatusRequestEntityTooLarge, label, fmt.Errorf("CA request larger than %d bytes: send {}", maxCARequest))
		return
	}
	if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
		s.refuse(w, r, http.StatusForbidden, label, errors.New("the CA is handed only to an MDM member presenting its mdm certificate (TLS client certificate: `cairn pki fetch-ca --pki DIR`); other nodes get a certificate of their own with a join token, never the CA"))
		return
	}
	peer, err := s.Identity.Verify(r.TLS.PeerCertificates, pki.RoleMDM)
	if err != nil {
		claimed := ""
		if p, perr := pki.PeerOf(r.TLS.PeerCertificates[0]); perr == nil {
			claimed = p.String()
		}
		s.refusePeer(w, r, http.StatusForbidden, label, claimed, fmt.Errorf("CA refused: %v: only a valid mdm certificate of this cluster gets the CA (an MDM whose certificate expired joins again with a join token for role mdm; other roles never get the CA)", err))
		return
	}
	if body := strings.TrimSpace(string(b)); body != "" && body != "{}" {
		s.refuse(w, r, http.StatusBadRequest, label, errors.New("CA request: send an empty body or {}"))
		return
	}
	key, err := s.CA.KeyPEM()
	if err != nil {
		s.Log.Error("join: the CA key does not encode", "err", err)
		http.Error(w, "the CA key does not encode here: fetch the CA from another MDM member", http.StatusInternalServerError)
		return
	}
	s.Log.Info("join: CA handed to an MDM member", "peer", peer.String(), "serial", r.TLS.PeerCertificates[0].SerialNumber.Text(16),
		"from", r.RemoteAddr, "ca_sha256", pki.InfoOf(s.CA.Cert).Fingerprint)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	json.NewEncoder(w).Encode(CAAnswer{Format: caFormat, Cert: string(s.CA.CertPEM()), Key: string(key)})
}

// FetchCA makes caDir a copy of the cluster CA: the CA that issued the mdm
// certificate in pkiDir, got from the join service at urls (tried in order)
// by presenting that certificate. When caDir holds that CA already nothing
// is fetched (fetched is false); when it holds another or a broken one,
// nothing is changed and the error says what to do. The answer is checked
// before anything is written: it must be the very CA pkiDir trusts, with
// its own key.
func FetchCA(ctx context.Context, urls []string, pkiDir, caDir string) (ca *pki.CA, fetched bool, err error) {
	id, err := pki.LoadIdentity(pkiDir)
	if err != nil {
		return nil, false, err
	}
	if p := id.Peer(); p.Role != pki.RoleMDM {
		return nil, false, fmt.Errorf("%s holds the certificate of %s: only an MDM member keeps the CA; give the directory of its mdm certificate", pkiDir, p)
	}
	if _, err := os.Stat(filepath.Join(caDir, pki.CAKeyFile)); err == nil {
		have, err := pki.LoadCA(caDir)
		if err != nil {
			return nil, false, fmt.Errorf("%w; move %s away and fetch the CA again", err, caDir)
		}
		if !have.Cert.Equal(id.CA()) {
			return nil, false, fmt.Errorf("%s holds another CA (%s) than the one %s trusts: move it away and fetch this cluster's", caDir, pki.InfoOf(have.Cert).Fingerprint[:16], pkiDir)
		}
		return have, false, nil
	}
	var served *x509.Certificate // set by each handshake, which checked it against the pin
	hc := newClient(pki.InfoOf(id.CA()).Fingerprint, id.Certificate(), &served)
	defer hc.CloseIdleConnections()
	var errs []error
	for _, u := range urls {
		b, err := post(ctx, hc, strings.TrimRight(u, "/")+CAPath, []byte("{}"))
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", u, err))
			if errors.Is(err, errFinal) {
				break
			}
			continue
		}
		got, err := decodeCA(b, id.CA())
		if err != nil {
			return nil, false, fmt.Errorf("%s: %w: %w", u, errFinal, err)
		}
		if err := got.WriteTo(caDir); err != nil {
			return nil, false, err
		}
		return got, true, nil
	}
	return nil, false, failed{"fetch the CA: no join service handed it", errs}
}

// decodeCA checks an answer of CAPath: format 1, the CA trusted (the one
// the caller's certificate was issued by) and its key. Its errors never
// quote the answer.
func decodeCA(b []byte, trusted *x509.Certificate) (*pki.CA, error) {
	var a CAAnswer
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil || dec.More() {
		return nil, errors.New("malformed CA answer: not one JSON object {format, ca_cert, ca_key}")
	}
	if a.Format != caFormat {
		return nil, fmt.Errorf("CA answer of format %d: this Cairn reads format %d (update this node)", a.Format, caFormat)
	}
	ca, err := pki.ParseCA([]byte(a.Cert), []byte(a.Key))
	if err != nil {
		return nil, fmt.Errorf("CA answer: %w", err)
	}
	if !ca.Cert.Equal(trusted) {
		return nil, errors.New("CA answer: another CA than the one this node's certificate was issued by")
	}
	return ca, nil
}
