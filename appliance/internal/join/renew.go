package join

// Renewal: a node whose certificate is still valid gets a new one for a new
// key pair, for the same role, name and hosts, by presenting the current
// certificate (TLS client authentication) — no token, since holding a valid
// certificate of the cluster is what a token would have bought. An expired
// or foreign certificate gets nothing: that node joins again with a join
// token. The daemons reload their PKI directory when its files change
// (pki.Identity.Watch), so renewal needs no restart.

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"time"

	"github.com/cairn-storage/cairn/appliance/internal/pki"
)

// RenewPath is the renewal route of the join service.
const RenewPath = "/v1/renew"

// RenewRequest is what a renewing node sends: a CSR for its new key.
type RenewRequest struct {
	CSR string `json:"csr"`
}

// RenewDue reports whether c should be renewed at now: in the last third of
// its lifetime (a year's certificate: its last four months), so a node
// whose renewal fails keeps months to be fixed, and the expiry alert (30
// days) fires only after many failed attempts.
func RenewDue(c *x509.Certificate, now time.Time) bool {
	life := c.NotAfter.Sub(c.NotBefore)
	return now.After(c.NotAfter.Add(-life / 3))
}

func (s *Server) renew(w http.ResponseWriter, r *http.Request) {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRequest))
	if err != nil {
		s.refuse(w, r, http.StatusRequestEntityTooLarge, "renewal", fmt.Errorf("request larger than %d bytes", maxRequest))
		return
	}
	if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
		s.refuse(w, r, http.StatusForbidden, "renewal", errors.New("renewal: present the certificate to renew (TLS client certificate); without one, join with a join token"))
		return
	}
	peer, err := s.Identity.Verify(r.TLS.PeerCertificates)
	if err != nil {
		s.refuse(w, r, http.StatusForbidden, "renewal", fmt.Errorf("renewal: %v: an expired or foreign certificate cannot be renewed; join again with a join token (cairnctl join-token create)", err))
		return
	}
	var req RenewRequest
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil || dec.More() {
		s.refuse(w, r, http.StatusBadRequest, "renewal", errors.New("renewal: send one JSON object {csr}"))
		return
	}
	csr, err := parseCSR(req.CSR)
	if err != nil {
		s.refuse(w, r, http.StatusBadRequest, "renewal", err)
		return
	}
	// The same role, name and hosts as the certificate presented: renewal
	// never widens what a node may claim.
	leaf := r.TLS.PeerCertificates[0]
	certPEM, err := s.CA.Sign(pki.Request{Role: peer.Role, Name: peer.Name, Hosts: hostsOf(leaf)}, csr.PublicKey)
	if err != nil {
		s.refuse(w, r, http.StatusBadRequest, "renewal", err)
		return
	}
	s.Log.Info("join: certificate renewed", "peer", peer.String(), "old_serial", leaf.SerialNumber.Text(16),
		"old_not_after", leaf.NotAfter.UTC().Format(time.RFC3339), "from", r.RemoteAddr)
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(Answer{Cert: string(certPEM), CA: string(s.CA.CertPEM())})
}

// hostsOf is the addresses and names a certificate is valid for.
func hostsOf(c *x509.Certificate) []string {
	var out []string
	for _, ip := range c.IPAddresses {
		out = append(out, ip.String())
	}
	return append(out, c.DNSNames...)
}

// Renew replaces the certificate in the PKI directory dir with a new one,
// for a new key pair made here, from the join service at urls (tried in
// order), which must hold the CA of dir (pinned: its fingerprint). The
// directory's files are replaced only once the answer checked out: the same
// role and name, the new key, issued by that CA.
func Renew(ctx context.Context, urls []string, dir string) (*x509.Certificate, error) {
	id, err := pki.LoadIdentity(dir)
	if err != nil {
		return nil, err
	}
	me := id.Peer()
	key, _, csr, err := newCSR(me.Role)
	if err != nil {
		return nil, err
	}
	body, _ := json.Marshal(RenewRequest{CSR: csr})
	return exchange(ctx, urls, RenewPath, body, pki.InfoOf(id.CA()).Fingerprint, id.Certificate(), key, pki.Request{Role: me.Role, Name: me.Name}, "", dir)
}

// RenewIfDue renews the certificate in dir when RenewDue (or force): from
// ca when this node keeps the CA (every MDM member signs its own), else
// from the join service at urls. It returns the new certificate, or nil
// when none was due.
func RenewIfDue(ctx context.Context, dir string, urls []string, ca *pki.CA, now time.Time, force bool) (*x509.Certificate, error) {
	id, err := pki.LoadIdentity(dir)
	if err != nil {
		return nil, err
	}
	if !force && !RenewDue(id.Leaf(), now) {
		return nil, nil
	}
	if ca == nil {
		return Renew(ctx, urls, dir)
	}
	if !ca.Cert.Equal(id.CA()) {
		return nil, fmt.Errorf("%s trusts another CA than the one kept here: renew it at that cluster's join service", dir)
	}
	p := id.Peer()
	if err := ca.IssueTo(dir, pki.Request{Role: p.Role, Name: p.Name, Hosts: hostsOf(id.Leaf())}); err != nil {
		return nil, err
	}
	id, err = pki.LoadIdentity(dir)
	if err != nil {
		return nil, err
	}
	return id.Leaf(), nil
}

// Keep renews, every interval (first at once), each certificate under base
// (one PKI directory per role, as the appliance keeps them) that is due:
// a node's certificates then never expire while it runs and a join service
// answers. Failures are logged with what to do and tried again next time.
func Keep(ctx context.Context, base string, urls []string, ca *pki.CA, every time.Duration, log *slog.Logger) {
	for {
		dirs, _ := filepath.Glob(filepath.Join(base, "*", pki.NodeCertFile))
		for _, f := range dirs {
			dir := filepath.Dir(f)
			cert, err := RenewIfDue(ctx, dir, urls, ca, time.Now(), false)
			switch {
			case err != nil:
				log.Warn("certificate renewal failed; trying again later", "dir", dir, "err", err,
					"next", every.String(), "fix", "check that an MDM member's join service (cairn-join) answers")
			case cert != nil:
				log.Info("certificate renewed", "dir", dir, "not_after", cert.NotAfter.UTC().Format(time.RFC3339))
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(every):
		}
	}
}
