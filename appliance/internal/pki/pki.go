// Package pki is Cairn's cluster PKI: one certificate authority per cluster
// and one certificate per daemon, with the daemon's role in it. Every
// connection between Cairn's daemons (etcd client and peer, data path, NBD)
// is mutually authenticated with these certificates, and what a peer may do
// is decided by the role its certificate names.
//
// Layout of a PKI directory (the --pki flag of every daemon):
//
//	ca.crt     the cluster CA certificate (PEM), the only trusted root
//	node.crt   this daemon's certificate (PEM), signed by the CA
//	node.key   its private key (PEM, PKCS#8), mode 0600
//	ca.key     the CA's private key (PEM, PKCS#8), mode 0600: only in the
//	           CA directory every MDM member keeps; copied to nothing else
//	           (a member gets it from another over the join service,
//	           internal/join, presenting its mdm certificate)
//
// A node certificate names its role twice: as the subject's common name
// (etcd maps a client certificate's CN to its user, so the role is the
// etcd user) and, with the node's name, as the URI SAN
// "cairn://node/<role>/<name>". Server certificates also carry the IP
// addresses and DNS names the daemon is reached at (etcd's clients check
// them); the data path checks role and name instead (see VerifyPeer).
//
// Keys are ECDSA P-256: fast to sign and verify (the data path handshakes
// on every connection) and accepted by every TLS stack Cairn meets (Go,
// GnuTLS in qemu and nbd-client, OpenSSL).
package pki

import (
	"crypto/x509"
	"fmt"
	"net/url"
	"strings"
)

// Roles. A certificate has exactly one.
const (
	RoleMDM     = "mdm"     // metadata manager (etcd member, control loop); holds the CA
	RoleGateway = "gateway" // REST API; writes the model
	RoleSDS     = "sds"     // data server; pushes fills to other SDSs
	RoleTarget  = "target"  // iSCSI frontend; reads and writes volumes
	RoleNBD     = "nbd"     // NBD frontend; reads and writes volumes
	RoleClient  = "client"  // a tool that reads and writes volumes (cairn ats-torture, benchmarks)
	RoleHost    = "host"    // an NBD initiator (a host): opens the exports mapped to it
)

// Roles lists every role, for validation and help texts.
var Roles = []string{RoleMDM, RoleGateway, RoleSDS, RoleTarget, RoleNBD, RoleClient, RoleHost}

// File names inside a PKI directory.
const (
	CACertFile   = "ca.crt"
	CAKeyFile    = "ca.key"
	NodeCertFile = "node.crt"
	NodeKeyFile  = "node.key"
)

// ValidRole reports whether r is one of Roles.
func ValidRole(r string) bool {
	for _, x := range Roles {
		if r == x {
			return true
		}
	}
	return false
}

// nodeURI is the URI SAN of a node certificate.
func nodeURI(role, name string) *url.URL {
	return &url.URL{Scheme: "cairn", Host: "node", Path: "/" + role + "/" + name}
}

// Peer is who a verified certificate says its holder is.
type Peer struct {
	Role string
	Name string
}

func (p Peer) String() string { return p.Role + "/" + p.Name }

// PeerOf reads the role and name out of a node certificate (which must
// already be verified against the CA). It fails on a certificate that is
// not a Cairn node certificate.
func PeerOf(c *x509.Certificate) (Peer, error) {
	for _, u := range c.URIs {
		if u.Scheme != "cairn" || u.Host != "node" {
			continue
		}
		role, name, ok := strings.Cut(strings.TrimPrefix(u.Path, "/"), "/")
		if !ok || !ValidRole(role) || !validName(name) {
			return Peer{}, fmt.Errorf("certificate %q: malformed node URI %q", c.Subject.CommonName, u)
		}
		if c.Subject.CommonName != role {
			return Peer{}, fmt.Errorf("certificate of %s/%s: common name %q is not its role", role, name, c.Subject.CommonName)
		}
		return Peer{Role: role, Name: name}, nil
	}
	return Peer{}, fmt.Errorf("certificate %q is not a Cairn node certificate (no cairn://node/ URI)", c.Subject.CommonName)
}

// validName accepts the names Cairn gives its daemons: 1-128 characters
// from [A-Za-z0-9._-], not starting with a dot or a dash.
func validName(s string) bool {
	if len(s) == 0 || len(s) > 128 || s[0] == '.' || s[0] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}
