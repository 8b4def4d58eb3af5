package cli

import (
	"crypto/x509"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairn-storage/cairn/appliance/internal/gateway"
	"github.com/cairn-storage/cairn/appliance/internal/pki/pkitest"
)

// garbler is a listener whose connections flip the last byte of the first
// write the gateway makes after its handshake flight and a read (the answer to
// the first request on that connection) while armed: the client's TLS layer
// then finds a record whose MAC does not match, as on a path that corrupts data.
type garbler struct {
	net.Listener
	armed   atomic.Int32 // answers still to corrupt
	garbled atomic.Int32 // answers corrupted
}

func (g *garbler) Accept() (net.Conn, error) {
	c, err := g.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &garbledConn{Conn: c, g: g}, nil
}

type garbledConn struct {
	net.Conn
	g        *garbler
	mu       sync.Mutex
	writes   int  // writes so far
	readLate bool // a read returned data after the first write
}

func (c *garbledConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.mu.Lock()
	if c.writes > 0 && n > 0 {
		c.readLate = true
	}
	c.mu.Unlock()
	return n, err
}

func (c *garbledConn) Write(b []byte) (int, error) {
	c.mu.Lock()
	c.writes++
	late := c.writes == 2 && c.readLate
	c.mu.Unlock()
	if late && len(b) > 0 && c.g.armed.Add(-1) >= 0 {
		c.g.garbled.Add(1)
		bad := append([]byte(nil), b...)
		bad[len(bad)-1] ^= 0x5a
		return c.Conn.Write(bad)
	}
	return c.Conn.Write(b)
}

// TestRepeatAfterLostAnswer: a request whose answer is lost after it went out
// (here a corrupted TLS record: "bad record MAC", as a CI run saw through a
// TCG guest's network) is sent once more when the API makes it safe to repeat
// (a create, a PATCH, a read), and not when a repeat would do it twice (a join
// token: the user is told, and decides).
func TestRepeatAfterLostAnswer(t *testing.T) {
	var g *garbler
	kit := pkitest.New(t)
	h := newHarnessOn(t, func(ln net.Listener) net.Listener { g = &garbler{Listener: ln}; return g }, time.Hour,
		func(c *gateway.Config) { c.ClusterCA = func() *x509.Certificate { return kit.CA.Cert } })
	h.login()
	arm := func() {
		g.armed.Store(1)
		g.garbled.Store(0)
	}
	arm()
	h.ok("pd", "create", "pd1")
	if g.garbled.Load() != 1 {
		t.Fatalf("no answer was corrupted (%d): the test proves nothing", g.garbled.Load())
	}
	if out := h.ok("pd", "ls"); !strings.Contains(out, "pd1") {
		t.Fatalf("pd ls: %s", out)
	}
	arm()
	if out := h.ok("pd", "ls"); !strings.Contains(out, "pd1") || g.garbled.Load() != 1 {
		t.Fatalf("pd ls with a corrupted answer: %s (%d corrupted)", out, g.garbled.Load())
	}
	// Twice in a row: one repeat only, then the error says what happened.
	g.armed.Store(2)
	g.garbled.Store(0)
	h.fails(1, "bad record MAC", "pd", "create", "pd2")
	if g.garbled.Load() != 2 {
		t.Fatalf("%d answers corrupted, want 2 (one try and one repeat)", g.garbled.Load())
	}
	arm()
	h.fails(1, "bad record MAC", "join-token", "create", "--role", "sds", "--out", t.TempDir()+"/t1")
	if ls := h.ok("join-token", "ls"); len(strings.Split(strings.TrimSpace(ls), "\n")) != 2 || !strings.Contains(ls, "sds") {
		t.Fatalf("a join token create whose answer was lost was sent again:\n%s", ls)
	}
}
