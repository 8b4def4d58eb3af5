package porttest

import (
	"net"
	"strconv"
	"testing"
)

// The address is on loopback, below the ephemeral range, and can be bound.
func TestAddr(t *testing.T) {
	seen := map[string]bool{}
	for range 50 {
		a := Addr(t)
		host, port, err := net.SplitHostPort(a)
		if err != nil || host != "127.0.0.1" {
			t.Fatalf("Addr() = %q, want 127.0.0.1:PORT (%v)", a, err)
		}
		p, _ := strconv.Atoi(port)
		if p < lowest || p >= ephemeralLow() {
			t.Fatalf("port %d not in [%d, %d)", p, lowest, ephemeralLow())
		}
		l, err := net.Listen("tcp", a)
		if err != nil {
			t.Fatalf("the address Addr gave cannot be bound: %v", err)
		}
		l.Close()
		seen[a] = true
	}
	if len(seen) < 40 {
		t.Fatalf("50 picks gave only %d different ports: not spread", len(seen))
	}
}

// A port taken by a listener is never returned.
func TestAddrSkipsTaken(t *testing.T) {
	var held []net.Listener
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	taken := map[string]bool{}
	for range 20 {
		a := Addr(t)
		l, err := net.Listen("tcp", a)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, l)
		taken[a] = true
	}
	for range 200 {
		if a := Addr(t); taken[a] {
			t.Fatalf("Addr gave %s, which a listener holds", a)
		}
	}
}
