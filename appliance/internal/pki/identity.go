package pki

// A daemon's identity: its certificate and key, and the CA it trusts, loaded
// from a PKI directory, reloadable without a restart (rotation), and the
// TLS configurations built on them.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"time"
)

// Identity is a daemon's loaded PKI directory. It is safe for concurrent
// use; Reload swaps certificate, key and CA at once, and every TLS
// configuration made by it uses the current ones from the next handshake on
// (connections already open keep theirs).
type Identity struct {
	dir string
	cur atomic.Pointer[loaded]
}

type loaded struct {
	cert   tls.Certificate // Leaf set
	roots  *x509.CertPool
	ca     *x509.Certificate
	peer   Peer
	mtimes [3]time.Time // ca.crt, node.crt, node.key when read
}

// LoadIdentity loads dir (see the package doc for its files).
func LoadIdentity(dir string) (*Identity, error) {
	l, err := load(dir)
	if err != nil {
		return nil, err
	}
	id := &Identity{dir: dir}
	id.cur.Store(l)
	return id, nil
}

func load(dir string) (*loaded, error) {
	var l loaded
	for i, f := range []string{CACertFile, NodeCertFile, NodeKeyFile} {
		st, err := os.Stat(filepath.Join(dir, f))
		if err != nil {
			return nil, fmt.Errorf("PKI directory %s: %w (issue a certificate with 'cairn pki issue --out %s')", dir, err, dir)
		}
		l.mtimes[i] = st.ModTime()
	}
	if st, _ := os.Stat(filepath.Join(dir, NodeKeyFile)); st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("%s is readable by others (mode %o): chmod 600 it", filepath.Join(dir, NodeKeyFile), st.Mode().Perm())
	}
	caPEM, err := os.ReadFile(filepath.Join(dir, CACertFile))
	if err != nil {
		return nil, err
	}
	ca, err := parseCert(caPEM)
	if err != nil || !ca.IsCA {
		return nil, fmt.Errorf("%s: not a CA certificate", filepath.Join(dir, CACertFile))
	}
	cert, err := loadPair(dir)
	if err != nil {
		return nil, fmt.Errorf("PKI directory %s: %w", dir, err)
	}
	l.ca, l.cert = ca, cert
	l.roots = x509.NewCertPool()
	l.roots.AddCert(ca)
	if _, err := cert.Leaf.Verify(x509.VerifyOptions{Roots: l.roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		return nil, fmt.Errorf("%s: not valid under %s: %w", filepath.Join(dir, NodeCertFile), CACertFile, err)
	}
	if l.peer, err = PeerOf(cert.Leaf); err != nil {
		return nil, err
	}
	return &l, nil
}

// loadPair reads node.crt and node.key as a TLS pair. WriteNode replaces
// the key first, then the certificate, each by a rename: a read between the
// two finds a new key beside the old certificate. So a pair that does not
// go together is read again a few times, 25 ms apart (a renewal's second
// rename follows its first within microseconds), before it is an error: a
// daemon starting or a command run during a renewal gets the new pair, not
// "private key does not match public key".
func loadPair(dir string) (tls.Certificate, error) {
	for attempt := 1; ; attempt++ {
		certPEM, err := os.ReadFile(filepath.Join(dir, NodeCertFile))
		if err != nil {
			return tls.Certificate{}, err
		}
		keyPEM, err := os.ReadFile(filepath.Join(dir, NodeKeyFile))
		if err != nil {
			return tls.Certificate{}, err
		}
		cert, err := tls.X509KeyPair(certPEM, keyPEM)
		if err == nil || attempt == pairReads {
			return cert, err
		}
		time.Sleep(25 * time.Millisecond)
	}
}

const pairReads = 4

// Dir is the PKI directory.
func (id *Identity) Dir() string { return id.dir }

// Peer is this daemon's own role and name.
func (id *Identity) Peer() Peer { return id.cur.Load().peer }

// Leaf is this daemon's certificate.
func (id *Identity) Leaf() *x509.Certificate { return id.cur.Load().cert.Leaf }

// CA is the trusted CA certificate.
func (id *Identity) CA() *x509.Certificate { return id.cur.Load().ca }

// Reload reads the directory again. On any error (half-written files, a
// certificate of another role or name) it keeps what it had.
func (id *Identity) Reload() error {
	l, err := load(id.dir)
	if err != nil {
		return err
	}
	if old := id.cur.Load(); l.peer != old.peer {
		return fmt.Errorf("%s now holds the certificate of %s, not %s: refused (a daemon keeps its identity)", id.dir, l.peer, old.peer)
	}
	id.cur.Store(l)
	return nil
}

// Watch reloads the identity when its files change (checked every
// interval) until ctx ends: renewing a certificate is writing the new files
// (cairn pki issue --out DIR), no restart.
func (id *Identity) Watch(ctx context.Context, interval time.Duration, log *slog.Logger) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		changed := false
		for i, f := range []string{CACertFile, NodeCertFile, NodeKeyFile} {
			if st, err := os.Stat(filepath.Join(id.dir, f)); err == nil && !st.ModTime().Equal(id.cur.Load().mtimes[i]) {
				changed = true
			}
		}
		if !changed {
			continue
		}
		if err := id.Reload(); err != nil {
			log.Warn("certificate files changed but were not loaded; the old certificate stays in use", "dir", id.dir, "err", err)
			continue
		}
		log.Info("certificate reloaded", "peer", id.Peer(), "expires", id.Leaf().NotAfter.UTC().Format(time.RFC3339))
	}
}

// Verify checks a peer's certificate chain (leaf first, as TLS presents
// it) against the current CA and returns who it is. With roles given, the
// peer must hold one of them.
func (id *Identity) Verify(chain []*x509.Certificate, roles ...string) (Peer, error) {
	if len(chain) == 0 {
		return Peer{}, errors.New("the peer presented no certificate")
	}
	inter := x509.NewCertPool()
	for _, c := range chain[1:] {
		inter.AddCert(c)
	}
	if _, err := chain[0].Verify(x509.VerifyOptions{Roots: id.cur.Load().roots, Intermediates: inter,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		return Peer{}, fmt.Errorf("peer certificate not issued by this cluster's CA: %w", err)
	}
	p, err := PeerOf(chain[0])
	if err != nil {
		return Peer{}, err
	}
	if len(roles) > 0 && !slices.Contains(roles, p.Role) {
		return p, fmt.Errorf("peer %s has role %q; only %v may connect here", p, p.Role, roles)
	}
	return p, nil
}

// Certificate is the current certificate and key, for a TLS configuration
// this package does not make (a client that must pin a CA by fingerprint).
func (id *Identity) Certificate() *tls.Certificate {
	c, _ := id.getCert()
	return c
}

func (id *Identity) getCert() (*tls.Certificate, error) {
	c := id.cur.Load().cert
	return &c, nil
}

// ServerTLS is the configuration of a server that requires a client
// certificate of this cluster and, with roles given, one of those roles.
// After the handshake, PeerFromState tells who connected.
func (id *Identity) ServerTLS(roles ...string) *tls.Config {
	return &tls.Config{
		MinVersion:     tls.VersionTLS13,
		ClientAuth:     tls.RequireAnyClientCert, // verified by VerifyConnection, against the current CA
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return id.getCert() },
		VerifyConnection: func(cs tls.ConnectionState) error {
			_, err := id.Verify(cs.PeerCertificates, roles...)
			return err
		},
		// No tickets: nothing is sent after the handshake unless the
		// application sends it (the data path's authenticated mode relies
		// on this), and no resumption outlives a certificate's revocation
		// by rotation.
		SessionTicketsDisabled: true,
	}
}

// ClientTLS is the configuration of a client that presents its certificate
// and accepts a server of this cluster holding one of roles (any role if
// none) and, if name is not empty, that name. Host names are not checked:
// the role and name in the certificate are the server's identity, which
// holds however the server was reached (addresses change; names do not).
func (id *Identity) ClientTLS(name string, roles ...string) *tls.Config {
	return &tls.Config{
		MinVersion:           tls.VersionTLS13,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return id.getCert() },
		InsecureSkipVerify:   true, // the chain is verified by VerifyConnection, with role and name
		VerifyConnection: func(cs tls.ConnectionState) error {
			p, err := id.Verify(cs.PeerCertificates, roles...)
			if err == nil && name != "" && p.Name != name {
				err = fmt.Errorf("connected to %s, expected %s", p, name)
			}
			return err
		},
	}
}

// HostTLS is the configuration of a client of a standard TLS server (etcd's
// gRPC): the server's certificate must name the host it is reached at, and
// be issued by this cluster's CA.
func (id *Identity) HostTLS() *tls.Config {
	return &tls.Config{
		MinVersion:           tls.VersionTLS12, // etcd's listeners accept 1.2 and 1.3
		RootCAs:              id.cur.Load().roots,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return id.getCert() },
	}
}

// PeerFromState is who connected, after a handshake with ServerTLS or
// ClientTLS (which verified the chain).
func PeerFromState(cs tls.ConnectionState) (Peer, error) {
	if len(cs.PeerCertificates) == 0 {
		return Peer{}, errors.New("no peer certificate")
	}
	return PeerOf(cs.PeerCertificates[0])
}

// OpenServerTLS is the configuration of a server that any client may reach
// without a certificate: the join service, whose clients have none yet. It
// sends the CA certificate after its own, so that a client which pins the
// CA's fingerprint (Fingerprint) can verify the server without trusting
// anything else. Who the client is, the application decides (a join token).
func (id *Identity) OpenServerTLS() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		// A certificate is asked for, not required, and not verified here:
		// a renewing node presents its current one (the application checks
		// it against the CA, expiry included); a joining node has none.
		ClientAuth: tls.RequestClientCert,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			l := id.cur.Load()
			c := l.cert
			c.Certificate = append(c.Certificate[:len(c.Certificate):len(c.Certificate)], l.ca.Raw)
			return &c, nil
		},
		SessionTicketsDisabled: true,
	}
}
