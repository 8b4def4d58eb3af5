package nbd

import (
	"crypto/tls"
	"fmt"
	"net"
	"strings"

	"github.com/cairn-storage/cairn/appliance/internal/pki"
)

// HostTLS is the TLS configuration (Server.TLS) of an NBD server that
// exports the volumes mapped to one host: the client must present a
// certificate of this cluster with role host naming that host
// (cairn pki issue --role host --name HOST). Any other certificate, or
// none, fails the handshake: a host sees and opens only its own mappings,
// because the server it can reach serves no one else's.
//
// TLS 1.2 is accepted besides 1.3 (the pki default) because the NBD
// protocol says implementations MUST support it; Go offers only AEAD
// suites with forward secrecy in either.
func HostTLS(id *pki.Identity, host string) *tls.Config {
	cfg := id.ServerTLS(pki.RoleHost)
	cfg.MinVersion = tls.VersionTLS12
	verify := cfg.VerifyConnection
	cfg.VerifyConnection = func(cs tls.ConnectionState) error {
		if err := verify(cs); err != nil {
			return err
		}
		p, err := pki.PeerFromState(cs)
		if err != nil {
			return err
		}
		if p.Name != host {
			return fmt.Errorf("certificate of %s: this NBD server exports the volumes of host %s only (connect to host %s's NBD server)", p, host, p.Name)
		}
		return nil
	}
	return cfg
}

// TLS modes of `cairn nbd --tls`.
const (
	TLSRequire = "require" // TLS only (FORCEDTLS), with HostTLS
	TLSOff     = "off"     // plain NBD: loopback only, explicitly allowed
)

// CheckPlainListen decides whether plain NBD (no TLS) may be served on
// addr: only when allowed says the operator asked for it, and only on a
// loopback IP address ("localhost" included) or a unix socket ("unix:/path"),
// which no other machine can reach. The error says what to do instead.
func CheckPlainListen(addr string, allowed bool) error {
	if !isLocalListen(addr) {
		return fmt.Errorf("plain NBD (--tls off) refused on %s: it is not a loopback address, so other machines could open the exports without a certificate; serve TLS (--tls require with --pki DIR), or listen on 127.0.0.1, ::1 or unix:/path", addr)
	}
	if !allowed {
		return fmt.Errorf("plain NBD (--tls off) on %s needs --allow-plain-loopback as well: every local process can then open the exports without a certificate; or serve TLS (--tls require with --pki DIR)", addr)
	}
	return nil
}

func isLocalListen(addr string) bool {
	if p, ok := strings.CutPrefix(addr, "unix:"); ok {
		return p != ""
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
