package wire

import (
	"net"
	"strings"
	"testing"
	"time"

	"github.com/cairn-storage/cairn/appliance/internal/pki"
	"github.com/cairn-storage/cairn/appliance/internal/pki/pkitest"
)

func TestLogLimiter(t *testing.T) {
	l := LogLimiter{Interval: 100 * time.Millisecond}
	if ok, _ := l.Allow("a"); !ok {
		t.Fatal("first line of a key suppressed")
	}
	if ok, _ := l.Allow("b"); !ok {
		t.Fatal("first line of another key suppressed")
	}
	for i := 0; i < 5; i++ {
		if ok, _ := l.Allow("a"); ok {
			t.Fatal("repeat within the interval logged")
		}
	}
	time.Sleep(120 * time.Millisecond)
	if ok, n := l.Allow("a"); !ok || n != 5 {
		t.Fatalf("after the interval: ok=%v suppressed=%d; want true, 5", ok, n)
	}
}

// TestRefusedConnectionsAreRateLimited: a flood of connections that time
// out in the handshake logs one line, not one per connection (the ports
// differ on each: they are not part of the key).
func TestRefusedConnectionsAreRateLimited(t *testing.T) {
	s := sec(t, pkitest.New(t), ModeAuthenticated, pki.RoleSDS, "sds1")
	s.Timeout = 100 * time.Millisecond
	srv := startSecure(t, s)
	for i := 0; i < 5; i++ {
		nc, err := net.Dial("tcp", srv.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
	}
	waitLog(t, srv.log, "data-path connection refused", "i/o timeout")
	time.Sleep(300 * time.Millisecond)
	if n := strings.Count(srv.log.String(), "data-path connection refused"); n != 1 {
		t.Fatalf("%d lines for 5 connections from one host failing alike; want 1:\n%s", n, srv.log.String())
	}
}
