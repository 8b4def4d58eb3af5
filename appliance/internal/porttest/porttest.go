// Package porttest gives tests a loopback address to hand to a server that
// binds it later (an SDS, an etcd member, a restarted daemon).
//
// The usual trick, bind 127.0.0.1:0 and close, returns a port from the
// kernel's ephemeral range: between the close and the server's bind, any
// outgoing connection on the machine (an etcd client, a test in another
// package of `go test -p N`) may get that port as its local port, and the
// server fails with "address already in use". Addr picks from below the
// ephemeral range instead, which the kernel never hands out on its own, so
// only another caller of Addr could take it, and each picks at random.
package porttest

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
)

// lowest is the first port Addr picks (above the well-known and registered
// ports most daemons on a developer's machine use).
const lowest = 20000

// Addr returns "127.0.0.1:PORT" with a port that was free when it looked,
// outside the kernel's ephemeral range.
func Addr(t testing.TB) string {
	t.Helper()
	high := ephemeralLow() - 1
	for range 200 {
		p := lowest
		if high > lowest {
			p = lowest + rand.IntN(high-lowest+1)
		}
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(p))
		l, err := net.Listen("tcp", addr)
		if err != nil {
			continue
		}
		l.Close()
		return addr
	}
	t.Fatalf("porttest: no free port between %d and %d on 127.0.0.1", lowest, high)
	return ""
}

// ephemeralLow is the first port of the kernel's ephemeral range (Linux's
// default when the file is not there).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	var lo, hi int
	if _, err := fmt.Sscan(strings.TrimSpace(string(b)), &lo, &hi); err != nil || lo <= lowest {
		return 32768
	}
	return lo
}
