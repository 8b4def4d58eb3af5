package nbd

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cairn-storage/cairn/appliance/internal/blockdev"
)

// Resolver decides which volumes a client may attach. The `cairn nbd`
// daemon implements it so that only volumes mapped to the connecting host
// are visible. The server never closes a volume it got from Lookup: the
// Resolver owns their lifetime.
type Resolver interface {
	// Lookup returns the volume exported under name to the client at
	// remote and whether the client may only read it. An unknown export,
	// or one not mapped to this client, must return ErrUnknownExport (any
	// other error is reported to the client the same way, and logged).
	Lookup(ctx context.Context, name string, remote net.Addr) (blockdev.Volume, bool, error)
	// List returns the export names the client at remote may attach.
	List(ctx context.Context, remote net.Addr) ([]string, error)
}

// ErrUnknownExport is what a Resolver returns for a name the client may not
// attach (absent or not mapped to it).
var ErrUnknownExport = errors.New("nbd: unknown export")

// Default timeouts; override the Server fields before calling Serve.
const (
	DefaultHandshakeTimeout = 30 * time.Second
	DefaultShutdownGrace    = 10 * time.Second
)

// Server serves NBD connections. Create it with NewServer; one Server may
// Serve several listeners at once.
type Server struct {
	resolver Resolver
	log      *slog.Logger

	// HandshakeTimeout bounds option haggling, from accept to the start of
	// transmission (including Resolver calls). Zero means the default.
	HandshakeTimeout time.Duration
	// ShutdownGrace is how long requests in flight may still complete once
	// Serve's context is cancelled before they are cancelled and the
	// connection dropped. Zero means the default.
	ShutdownGrace time.Duration
	// TLS, when set, makes the server TLS-only (the protocol's FORCEDTLS
	// mode, see protocol.go): clients must send NBD_OPT_STARTTLS before
	// anything else, and this configuration decides whom the handshake
	// accepts (HostTLS: a host certificate of this cluster naming the
	// served host). Nil serves plain NBD.
	TLS *tls.Config
	// OnRefused, if set, is told of each refused client (a failed TLS
	// handshake, plain NBD on a TLS-only server): its address, the role/name
	// its certificate claims (empty if none) and why. It must not block (the
	// refusals package's Reporter.Refused does not).
	OnRefused func(remote, peer, reason string)

	stats serverStats
}

type serverStats struct {
	active, handshaking     atomic.Int64
	accepted, refused       atomic.Uint64
	requests                [numCommands]atomic.Uint64
	bytesRead, bytesWritten atomic.Uint64
	errors                  atomic.Uint64
}

// Stats is a snapshot of the server's counters, for metrics.
type Stats struct {
	// ActiveConnections are in the transmission phase; Handshaking are
	// still negotiating. AcceptedConnections counts every accept.
	ActiveConnections, Handshaking int64
	AcceptedConnections            uint64
	// RefusedClients failed the TLS handshake or tried plain NBD on a
	// TLS-only server.
	RefusedClients uint64
	// Requests by command, and error replies sent.
	Reads, Writes, Flushes, Trims, WriteZeroes, Caches uint64
	ErrorReplies                                       uint64
	// BytesRead were read from volumes and sent; BytesWritten received and
	// written to volumes.
	BytesRead, BytesWritten uint64
}

// NewServer returns a server that exports what r resolves. A nil logger
// discards logs.
func NewServer(r Resolver, logger *slog.Logger) *Server {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Server{resolver: r, log: logger}
}

// Stats returns the current counters.
func (s *Server) Stats() Stats {
	st := &s.stats
	return Stats{
		ActiveConnections:   st.active.Load(),
		Handshaking:         st.handshaking.Load(),
		AcceptedConnections: st.accepted.Load(),
		RefusedClients:      st.refused.Load(),
		Reads:               st.requests[cmdRead].Load(),
		Writes:              st.requests[cmdWrite].Load(),
		Flushes:             st.requests[cmdFlush].Load(),
		Trims:               st.requests[cmdTrim].Load(),
		WriteZeroes:         st.requests[cmdWriteZeroes].Load(),
		Caches:              st.requests[cmdCache].Load(),
		ErrorReplies:        st.errors.Load(),
		BytesRead:           st.bytesRead.Load(),
		BytesWritten:        st.bytesWritten.Load(),
	}
}

func (s *Server) handshakeTimeout() time.Duration {
	if s.HandshakeTimeout > 0 {
		return s.HandshakeTimeout
	}
	return DefaultHandshakeTimeout
}

func (s *Server) shutdownGrace() time.Duration {
	if s.ShutdownGrace > 0 {
		return s.ShutdownGrace
	}
	return DefaultShutdownGrace
}

// Serve accepts connections on l (TCP or unix socket) until ctx is
// cancelled, then stops accepting, lets requests in flight finish (up to
// ShutdownGrace), closes every connection and returns nil. It closes l. If
// accepting fails for good it shuts down the same way and returns the error.
func (s *Server) Serve(ctx context.Context, l net.Listener) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(ctx, func() { l.Close() })
	defer stop()

	var conns sync.WaitGroup
	defer conns.Wait()
	backoff := time.Duration(0)
	for {
		nc, err := l.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if errors.Is(err, net.ErrClosed) {
				cancel()
				return fmt.Errorf("nbd: listener %s closed: %w", l.Addr(), err)
			}
			// Transient (out of file descriptors, aborted handshake):
			// back off and keep serving.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			s.log.Warn("nbd: accept failed; retrying", "listener", l.Addr().String(), "err", err, "backoff", backoff)
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(backoff):
			}
			continue
		}
		backoff = 0
		s.stats.accepted.Add(1)
		conns.Add(1)
		go func() {
			defer conns.Done()
			s.ServeConn(ctx, nc)
		}()
	}
}

// ServeConn runs the NBD protocol on one accepted connection until the
// client disconnects or ctx is cancelled, and closes it. Serve calls it; it
// is exported for embedding the server behind other transports.
func (s *Server) ServeConn(ctx context.Context, nc net.Conn) {
	c := newConn(s, nc)
	// c.nc, not nc: once TLS is up, closing it sends close_notify first.
	defer func() { c.nc.Close() }()
	stop := context.AfterFunc(ctx, c.interrupt)
	defer stop()

	s.stats.handshaking.Add(1)
	ok := c.negotiate(ctx)
	s.stats.handshaking.Add(-1)
	if !ok {
		return
	}
	s.stats.active.Add(1)
	defer s.stats.active.Add(-1)
	c.transmit(ctx)
}
