package pki

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"time"
)

// Info describes a certificate for people: who it is, who issued it, when
// it ends. Daemons publish theirs (model.CertKey) so that the API and
// `cairnctl system certificates` list every expiry in the cluster.
type Info struct {
	Role        string    `json:"role"`
	Name        string    `json:"name"`
	Serial      string    `json:"serial"`
	Issuer      string    `json:"issuer"`
	NotBefore   time.Time `json:"not_before"`
	NotAfter    time.Time `json:"not_after"`
	Fingerprint string    `json:"sha256"` // of the DER certificate, hex
	// Version is the Cairn version (buildinfo) of the running daemon that
	// published this Info; empty for a certificate read from a file, and
	// in what daemons built before versions were published.
	Version string `json:"version,omitempty"`
}

// InfoOf describes c (a node or CA certificate).
func InfoOf(c *x509.Certificate) Info {
	sum := sha256.Sum256(c.Raw)
	i := Info{Serial: c.SerialNumber.Text(16), Issuer: c.Issuer.CommonName, NotBefore: c.NotBefore.UTC(),
		NotAfter: c.NotAfter.UTC(), Fingerprint: hex.EncodeToString(sum[:])}
	if p, err := PeerOf(c); err == nil {
		i.Role, i.Name = p.Role, p.Name
	} else if c.IsCA {
		i.Role, i.Name = "ca", c.Subject.CommonName
	}
	return i
}

// ExpiresWithin reports whether the certificate ends within d of now.
func (i Info) ExpiresWithin(now time.Time, d time.Duration) bool {
	return i.NotAfter.Before(now.Add(d))
}
