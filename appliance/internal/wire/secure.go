package wire

// secure.go: the data path's handshake. Before the first frame, client and
// server run mutual TLS 1.3 with the cluster's certificates (package pki);
// what follows depends on the mode, as with Ceph's msgr2:
//
//	authenticated  the frames travel on the raw TCP stream, as without TLS:
//	               the peers know who they talk to, the CRC-32C of every
//	               frame guards against corruption, and no byte pays for
//	               encryption (the default)
//	secure         every frame travels inside the TLS session (encrypted
//	               and integrity-protected)
//	none           no handshake: today's unauthenticated path, only when
//	               chosen explicitly (--data-security none)
//
// The exchange, after TCP connect:
//
//	client -> server  TLS 1.3 handshake; the client's certificate must be of
//	                  this cluster's CA and of a role that may use the data
//	                  path (host certificates fail here); the client offers
//	                  one ALPN protocol naming its mode (alpnAuthenticated
//	                  or alpnSecure); the server accepts both, so that it can
//	                  answer a mode it refuses with a message, not an alert
//	server -> client  one TLS record (always inside TLS: a forged reply is
//	                  impossible): replyGoAhead (1 byte), or replyRefused,
//	                  a length byte and a UTF-8 reason (at most 255 bytes)
//	then              frames, on the raw stream (authenticated) or inside
//	                  TLS (secure)
//
// The hand-off to the raw stream in authenticated mode must leave no frame
// byte inside crypto/tls's buffers, on either side. It holds because each
// side sends nothing the other's TLS layer could read ahead:
//   - The server: TLS 1.3 ends with the client's Finished, which the
//     server's Handshake reads last; the client sends no frame before it has
//     read the go-ahead, which the server writes only after Handshake has
//     returned. So when the server switches to the raw stream, nothing
//     beyond the client's Finished has been sent, and crypto/tls cannot have
//     buffered any of it.
//   - The client: the server sends nothing after its handshake flight but
//     the go-ahead record (session tickets are off in pki.ServerTLS: in TLS
//     1.3 they would follow the handshake), and it sends no frame before the
//     client's first request, which the client sends after it has read the
//     go-ahead. So the go-ahead is the last thing in crypto/tls's buffers
//     when the client switches.
//
// A client that speaks no TLS (mode none) against an authenticating server
// sends a request header first; the server recognises its magic and
// answers that request StatusForbidden with what to do, then closes, so the
// client's operator reads a reason, not a dropped connection.

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/cairn-storage/cairn/appliance/internal/pki"
)

// Mode is a data-path security mode.
type Mode uint8

// Modes, in increasing strength: a server's mode is the floor it accepts.
const (
	ModeNone          Mode = iota // no handshake (explicit only)
	ModeAuthenticated             // mutual TLS, then frames on the raw stream
	ModeSecure                    // mutual TLS, frames inside TLS
)

func (m Mode) String() string {
	switch m {
	case ModeNone:
		return "none"
	case ModeAuthenticated:
		return "authenticated"
	case ModeSecure:
		return "secure"
	}
	return fmt.Sprintf("mode(%d)", uint8(m))
}

// ParseMode reads a --data-security value.
func ParseMode(s string) (Mode, error) {
	for _, m := range []Mode{ModeNone, ModeAuthenticated, ModeSecure} {
		if s == m.String() {
			return m, nil
		}
	}
	return 0, fmt.Errorf("data-path security %q: use authenticated (the default), secure or none", s)
}

// ALPN protocols: the client's mode, offered in its ClientHello.
const (
	alpnAuthenticated = "cairn-data/1+auth"
	alpnSecure        = "cairn-data/1+secure"
)

// Handshake replies (the first byte of the server's record).
const (
	replyGoAhead = 0x06
	replyRefused = 0x15
)

// HandshakeTimeout bounds a handshake (TCP connected to go-ahead): a peer
// that sends garbage or nothing holds a connection no longer than this.
const HandshakeTimeout = 10 * time.Second

// DataRoles may open a data-path connection to an SDS; what each may do is
// decided per request (the SDS's role check). Host certificates (NBD
// initiators) are not among them.
var DataRoles = []string{pki.RoleSDS, pki.RoleTarget, pki.RoleNBD, pki.RoleClient, pki.RoleGateway, pki.RoleMDM}

// Security is one endpoint's data-path security: its mode and, unless the
// mode is none, its identity. A nil *Security is mode none.
type Security struct {
	Mode Mode
	ID   *pki.Identity
	// Timeout bounds the handshake (default HandshakeTimeout).
	Timeout time.Duration
	// OnRefused, if set, hears of every connection a server refused (its
	// address, the role/name its certificate claimed if any, why), unlike
	// the log, which is rate-limited. It must not block.
	OnRefused func(remote, peer, reason string)
}

// NewSecurity checks that mode and identity go together: every mode but
// none needs an identity (--pki). Mode none with an identity is allowed (an
// explicit choice) but the caller should say so in its log.
func NewSecurity(mode Mode, id *pki.Identity) (*Security, error) {
	if mode != ModeNone && id == nil {
		return nil, fmt.Errorf("--data-security %s needs this daemon's certificate: give --pki DIR (cairn pki issue), or choose --data-security none", mode)
	}
	return &Security{Mode: mode, ID: id}, nil
}

func (s *Security) mode() Mode {
	if s == nil {
		return ModeNone
	}
	return s.Mode
}

// String is the mode's name (none for nil).
func (s *Security) String() string { return s.mode().String() }

func (s *Security) timeout() time.Duration {
	if s.Timeout > 0 {
		return s.Timeout
	}
	return HandshakeTimeout
}

type peerKey struct{}

// PeerFrom is who sent a request, from the context a Handler gets: the
// peer a handshake verified. ok is false on a connection of mode none.
func PeerFrom(ctx context.Context) (p pki.Peer, ok bool) {
	p, ok = ctx.Value(peerKey{}).(pki.Peer)
	return p, ok
}

// ErrForbidden: the server refused the connection or the request for who
// the client is or the mode it asked for (see the error's message).
var ErrForbidden = errors.New("wire: forbidden")

// accept runs the server side of the handshake on a new connection and
// returns the connection frames travel on and the verified peer.
func (s *Security) accept(ctx context.Context, c net.Conn) (net.Conn, pki.Peer, error) {
	if err := c.SetDeadline(time.Now().Add(s.timeout())); err != nil {
		return nil, pki.Peer{}, err
	}
	var first [4]byte
	if _, err := io.ReadFull(c, first[:]); err != nil {
		return nil, pki.Peer{}, fmt.Errorf("handshake: %w", err)
	}
	if binary.BigEndian.Uint32(first[:]) == ReqMagic {
		return nil, pki.Peer{}, refusePlain(c, first, s.Mode)
	}
	conf := s.ID.ServerTLS(DataRoles...)
	conf.NextProtos = []string{alpnSecure, alpnAuthenticated}
	tc := tls.Server(&prefixConn{Conn: c, pre: first[:]}, conf)
	hctx, cancel := context.WithTimeout(ctx, s.timeout())
	defer cancel()
	if err := tc.HandshakeContext(hctx); err != nil {
		return nil, pki.Peer{}, fmt.Errorf("TLS handshake: %w", err)
	}
	cs := tc.ConnectionState()
	peer, err := pki.PeerFromState(cs)
	if err != nil {
		return nil, pki.Peer{}, err
	}
	var asked Mode
	switch cs.NegotiatedProtocol {
	case alpnAuthenticated:
		asked = ModeAuthenticated
	case alpnSecure:
		asked = ModeSecure
	default:
		return nil, peer, refuse(tc, fmt.Sprintf("no data-path mode offered (ALPN %q): this is not a Cairn data client", cs.NegotiatedProtocol))
	}
	if asked < s.Mode {
		return nil, peer, refuse(tc, fmt.Sprintf("this SDS requires --data-security %s; %s asked for %s: start it with --data-security %s", s.Mode, peer, asked, s.Mode))
	}
	if _, err := tc.Write([]byte{replyGoAhead}); err != nil {
		return nil, peer, fmt.Errorf("handshake: go-ahead: %w", err)
	}
	if err := c.SetDeadline(time.Time{}); err != nil {
		return nil, peer, err
	}
	if asked == ModeSecure {
		return tc, peer, nil
	}
	return c, peer, nil
}

// refuse answers a handshake with a reason and returns it as the error.
func refuse(tc *tls.Conn, reason string) error {
	if len(reason) > 255 {
		reason = reason[:255]
	}
	_, _ = tc.Write(append([]byte{replyRefused, byte(len(reason))}, reason...))
	return fmt.Errorf("%w: %s", ErrForbidden, reason)
}

// refusePlain answers a client that sent a frame without a handshake: the
// request (whose header it reads, not its payload) gets StatusForbidden.
func refusePlain(c net.Conn, first [4]byte, floor Mode) error {
	var h [ReqHeader]byte
	copy(h[:], first[:])
	if _, err := io.ReadFull(c, h[4:]); err != nil {
		return fmt.Errorf("unauthenticated client: %w", err)
	}
	msg := fmt.Sprintf("this SDS requires an authenticated data path (--data-security %s): give the client --pki DIR with a certificate of this cluster and drop --data-security none", floor)
	resp := Response{Status: StatusForbidden, ID: binary.BigEndian.Uint64(h[8:]), Payload: []byte(msg)}
	var rh [RespHeader]byte
	PutResponseHeader(rh[:], &resp)
	_, _ = c.Write(append(rh[:], resp.Payload...))
	return fmt.Errorf("%w: a client without TLS (mode none)", ErrForbidden)
}

// dial runs the client side of the handshake on a connected c and returns
// the connection frames travel on and the server's verified identity.
func (s *Security) dial(ctx context.Context, c net.Conn) (net.Conn, pki.Peer, error) {
	if err := c.SetDeadline(time.Now().Add(s.timeout())); err != nil {
		return nil, pki.Peer{}, err
	}
	conf := s.ID.ClientTLS("", pki.RoleSDS)
	proto := alpnAuthenticated
	if s.Mode == ModeSecure {
		proto = alpnSecure
	}
	conf.NextProtos = []string{proto}
	tc := tls.Client(c, conf)
	hctx, cancel := context.WithTimeout(ctx, s.timeout())
	defer cancel()
	if err := tc.HandshakeContext(hctx); err != nil {
		return nil, pki.Peer{}, fmt.Errorf("TLS handshake: %w", err)
	}
	peer, err := pki.PeerFromState(tc.ConnectionState())
	if err != nil {
		return nil, pki.Peer{}, err
	}
	// The reply is one record: one Read returns all of it. In TLS 1.3 the
	// server checks the client's certificate after the client's Handshake
	// has returned: a refused certificate surfaces here, as an alert.
	var buf [2 + 255]byte
	n, err := tc.Read(buf[:])
	if err != nil {
		return nil, peer, fmt.Errorf("handshake with %s: %w (is this node's certificate of this cluster and of a data-path role?)", peer, err)
	}
	if err := parseReply(buf[:n]); err != nil {
		return nil, peer, fmt.Errorf("%s: %w", peer, err)
	}
	if err := c.SetDeadline(time.Time{}); err != nil {
		return nil, peer, err
	}
	if s.Mode == ModeSecure {
		return tc, peer, nil
	}
	return c, peer, nil
}

// parseReply reads the server's handshake reply.
func parseReply(b []byte) error {
	switch {
	case len(b) == 1 && b[0] == replyGoAhead:
		return nil
	case len(b) >= 2 && b[0] == replyRefused && int(b[1]) == len(b)-2:
		return fmt.Errorf("%w: %s", ErrForbidden, bytes.ToValidUTF8(b[2:], []byte("?")))
	}
	return fmt.Errorf("handshake: malformed reply (% x): not a Cairn SDS, or another version", b[:min(len(b), 16)])
}

// prefixConn gives back bytes already read from a connection before the
// rest of it; only the handshake reads through it.
type prefixConn struct {
	net.Conn
	pre []byte
}

func (p *prefixConn) Read(b []byte) (int, error) {
	if len(p.pre) > 0 {
		n := copy(b, p.pre)
		p.pre = p.pre[n:]
		return n, nil
	}
	return p.Conn.Read(b)
}
