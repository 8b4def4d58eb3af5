package wire

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairn-storage/cairn/appliance/internal/pki"
	"github.com/cairn-storage/cairn/appliance/internal/pki/pkitest"
	"github.com/cairn-storage/cairn/appliance/internal/testlog"
)

// secureServer serves an echo handler with sec on loopback; it records the
// peers it served and the bytes each request carried. Returns the address
// and the server's log.
type secureServer struct {
	addr  string
	log   *testlog.Buffer
	mu    sync.Mutex
	peers map[pki.Peer]int
	calls atomic.Int64
}

func startSecure(t *testing.T, sec *Security) *secureServer {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &secureServer{addr: l.Addr().String(), log: &testlog.Buffer{}, peers: map[pki.Peer]int{}}
	h := func(ctx context.Context, r *Request) (Response, func()) {
		s.calls.Add(1)
		p, ok := PeerFrom(ctx)
		if !ok && sec.mode() != ModeNone {
			return Errorf(StatusInternal, "no peer on an authenticated connection"), nil
		}
		s.mu.Lock()
		s.peers[p]++
		s.mu.Unlock()
		switch r.Op {
		case OpRead:
			return Response{Payload: bytes.Repeat([]byte{byte(r.Offset)}, int(r.Length))}, nil
		case OpWrite:
			// Echo a checksum of what arrived: the client checks every
			// byte crossed the hand-off intact.
			sum := uint64(0)
			for _, b := range r.Payload {
				sum = sum*31 + uint64(b)
			}
			return Response{Aux: sum}, nil
		case OpPing:
			return Response{}, nil
		}
		return Errorf(StatusUnsupported, "op %d", r.Op), nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	log := slog.New(slog.NewTextHandler(s.log, nil))
	go func() {
		defer close(done)
		ServeSecure(ctx, l, sec, h, func(r *Request) bool { return r.Op == OpRead }, log)
	}()
	t.Cleanup(func() { cancel(); <-done })
	return s
}

func sec(t testing.TB, k *pkitest.Kit, mode Mode, role, name string) *Security {
	t.Helper()
	s, err := NewSecurity(mode, k.Identity(role, name))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// burst sends many writes and reads at once right after connecting (the
// hand-off: no frame byte may be lost in or taken from crypto/tls's
// buffers) on fresh connections and checks every answer.
func burst(t *testing.T, c *Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 256)
	for i := 0; i < 128; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			if i%2 == 0 {
				payload := bytes.Repeat([]byte{byte(i), byte(i >> 3), 7}, 1000+i*37)
				sum := uint64(0)
				for _, b := range payload {
					sum = sum*31 + uint64(b)
				}
				r, err := c.Do(ctx, &Request{Op: OpWrite, Payload: payload, Length: uint32(len(payload))}, nil)
				if err == nil && r.Aux != sum {
					err = fmt.Errorf("write %d: server saw other bytes", i)
				}
				errs <- err
				return
			}
			dst := make([]byte, 8192)
			r, err := c.Do(ctx, &Request{Op: OpRead, Offset: uint64(i), Length: 8192}, dst)
			if err == nil && !bytes.Equal(r.Payload, bytes.Repeat([]byte{byte(i)}, 8192)) {
				err = fmt.Errorf("read %d: wrong data", i)
			}
			errs <- err
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

// recorder is a TCP proxy that keeps a copy of what the client sent.
type recorder struct {
	addr string
	sent testlog.Buffer
}

func (r *recorder) saw(b []byte) bool { return strings.Contains(r.sent.String(), string(b)) }

func startRecorder(t *testing.T, to string) *recorder {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &recorder{addr: l.Addr().String()}
	var wg sync.WaitGroup
	t.Cleanup(func() { l.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", to)
			if err != nil {
				c.Close()
				continue
			}
			wg.Add(2)
			go func() { defer wg.Done(); io.Copy(io.MultiWriter(s, &r.sent), c); s.Close() }()
			go func() { defer wg.Done(); io.Copy(c, s); c.Close() }()
		}
	}()
	return r
}

func TestModesPairwise(t *testing.T) {
	k := pkitest.New(t)
	magic := []byte("CRQ1")
	for _, tc := range []struct {
		server, client Mode
		inTLS          bool // frames travel inside TLS
	}{
		{ModeAuthenticated, ModeAuthenticated, false},
		{ModeSecure, ModeSecure, true},
		{ModeAuthenticated, ModeSecure, true}, // the client's choice, above the floor
	} {
		t.Run(tc.server.String()+"-server/"+tc.client.String()+"-client", func(t *testing.T) {
			srv := startSecure(t, sec(t, k, tc.server, pki.RoleSDS, "sds1"))
			rec := startRecorder(t, srv.addr)
			c := NewClient(rec.addr, 3)
			c.Security = sec(t, k, tc.client, pki.RoleTarget, "svm1")
			defer c.Close()
			burst(t, c)
			if got := rec.saw(magic); got == tc.inTLS {
				t.Fatalf("request magic visible on the wire: %v; want %v (frames inside TLS: %v)", got, !tc.inTLS, tc.inTLS)
			}
			srv.mu.Lock()
			defer srv.mu.Unlock()
			if len(srv.peers) != 1 || srv.peers[pki.Peer{Role: pki.RoleTarget, Name: "svm1"}] != 128 {
				t.Fatalf("server saw peers %v; want target/svm1 for all 128 requests", srv.peers)
			}
		})
	}
}

func TestModeFloorRefusesWeakerClient(t *testing.T) {
	k := pkitest.New(t)
	srv := startSecure(t, sec(t, k, ModeSecure, pki.RoleSDS, "sds1"))
	c := NewClient(srv.addr, 1)
	c.Security = sec(t, k, ModeAuthenticated, pki.RoleNBD, "svm1")
	defer c.Close()
	_, err := c.Do(context.Background(), &Request{Op: OpPing}, nil)
	if !errors.Is(err, ErrForbidden) || !strings.Contains(err.Error(), "--data-security secure") {
		t.Fatalf("authenticated client against a secure SDS: %v; want ErrForbidden naming --data-security secure", err)
	}
	if srv.calls.Load() != 0 {
		t.Fatal("a refused client's request was served")
	}
	waitLog(t, srv.log, "data-path connection refused", "asked for authenticated")
}

func TestUnauthenticatedClientGetsForbidden(t *testing.T) {
	k := pkitest.New(t)
	srv := startSecure(t, sec(t, k, ModeAuthenticated, pki.RoleSDS, "sds1"))
	c := NewClient(srv.addr, 1) // no Security: mode none
	defer c.Close()
	_, err := c.Do(context.Background(), &Request{Op: OpWrite, Payload: []byte("rogue")}, nil)
	if !IsStatus(err, StatusForbidden) || !strings.Contains(err.Error(), "--pki") {
		t.Fatalf("client without TLS: %v; want StatusForbidden saying to give --pki", err)
	}
	if srv.calls.Load() != 0 {
		t.Fatal("an unauthenticated request was served")
	}
	waitLog(t, srv.log, "data-path connection refused", "without TLS")
}

func TestAuthenticatedClientAgainstPlainServerFails(t *testing.T) {
	k := pkitest.New(t)
	srv := startSecure(t, nil)
	c := NewClient(srv.addr, 1)
	c.Security = sec(t, k, ModeAuthenticated, pki.RoleClient, "bench")
	defer c.Close()
	if _, err := c.Do(context.Background(), &Request{Op: OpPing}, nil); err == nil {
		t.Fatal("an authenticating client accepted a server that runs no handshake")
	}
}

// TestRogueCertificatesFailHandshake: no certificate, another cluster's,
// and a host certificate are refused before any frame; the client that
// expected an SDS refuses a server holding another role.
func TestRogueCertificatesFailHandshake(t *testing.T) {
	k := pkitest.New(t)
	other := pkitest.New(t)
	srv := startSecure(t, sec(t, k, ModeAuthenticated, pki.RoleSDS, "sds1"))
	// Rogue clients skip checking the server: only the server's checks
	// stand between them and the data.
	for _, tc := range []struct {
		name    string
		id      *pki.Identity // nil: no certificate
		logWant string
	}{
		{"other CA", other.Identity(pki.RoleSDS, "sds9"), "not issued by this cluster's CA"},
		{"host certificate", k.Identity(pki.RoleHost, "esx1"), "host/esx1"},
		{"no certificate", nil, "didn't provide a certificate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conf := &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS13, NextProtos: []string{alpnAuthenticated}}
			if tc.id != nil {
				conf = tc.id.ClientTLS("")
				conf.VerifyConnection, conf.NextProtos = nil, []string{alpnAuthenticated}
			}
			nc, err := net.Dial("tcp", srv.addr)
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			tc2 := tls.Client(nc, conf)
			_ = tc2.SetDeadline(time.Now().Add(5 * time.Second))
			_ = tc2.Handshake()
			var b [1]byte
			if _, err := tc2.Read(b[:]); err == nil {
				t.Fatalf("the SDS answered the handshake: %x", b)
			}
			// Frames sent anyway, raw, are not served either.
			var h [ReqHeader]byte
			PutRequestHeader(h[:], &Request{Op: OpPing, ID: 1})
			_, _ = nc.Write(h[:])
			waitLog(t, srv.log, "data-path connection refused", tc.logWant)
		})
	}
	t.Run("server of another role", func(t *testing.T) {
		fake := startSecure(t, sec(t, k, ModeAuthenticated, pki.RoleTarget, "svm1"))
		c := NewClient(fake.addr, 1)
		c.Security = sec(t, k, ModeAuthenticated, pki.RoleNBD, "svm2")
		defer c.Close()
		if _, err := c.Do(context.Background(), &Request{Op: OpPing}, nil); err == nil || !strings.Contains(err.Error(), `role "target"`) {
			t.Fatalf("client reached a target posing as an SDS: %v", err)
		}
	})
	if srv.calls.Load() != 0 {
		t.Fatalf("%d rogue requests served", srv.calls.Load())
	}
}

func TestHandshakeDeadline(t *testing.T) {
	k := pkitest.New(t)
	s := sec(t, k, ModeAuthenticated, pki.RoleSDS, "sds1")
	s.Timeout = 300 * time.Millisecond
	srv := startSecure(t, s)
	for _, garbage := range [][]byte{nil, []byte("\x16\x03\x01\x00\x10partial"), bytes.Repeat([]byte{0x16, 3, 3, 0xff, 0xff}, 10)} {
		nc, err := net.Dial("tcp", srv.addr)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if _, err := nc.Write(garbage); err != nil {
			t.Fatal(err)
		}
		_ = nc.SetReadDeadline(time.Now().Add(10 * time.Second))
		_, err = io.Copy(io.Discard, nc) // until the server closes
		nc.Close()
		if err != nil || time.Since(start) > 5*time.Second {
			t.Fatalf("garbage %q: server held the connection %s (err %v); want closed after its 300 ms handshake deadline", garbage, time.Since(start), err)
		}
	}
}

func waitLog(t *testing.T, log *testlog.Buffer, want ...string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		s := log.String()
		found := false
		for _, line := range strings.Split(s, "\n") {
			all := true
			for _, w := range want {
				all = all && strings.Contains(line, w)
			}
			found = found || all
		}
		if found {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no log line with %q; log:\n%s", want, s)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func FuzzParseReply(f *testing.F) {
	f.Add([]byte{replyGoAhead})
	f.Add(append([]byte{replyRefused, 5}, "no go"...))
	f.Add([]byte{replyRefused, 200, 'x'})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		err := parseReply(b)
		if (err == nil) != (len(b) == 1 && b[0] == replyGoAhead) {
			t.Fatalf("parseReply(% x) = %v", b, err)
		}
		if err != nil && len(err.Error()) > 400 {
			t.Fatalf("unbounded message: %d bytes", len(err.Error()))
		}
	})
}

// FuzzAccept feeds arbitrary bytes to the server side of the handshake:
// it must fail (no certificate can be forged), without panicking, within
// its deadline.
func FuzzAccept(f *testing.F) {
	k := pkitest.New(f)
	s := sec(f, k, ModeAuthenticated, pki.RoleSDS, "sds1")
	s.Timeout = 200 * time.Millisecond
	f.Add([]byte("CRQ1" + strings.Repeat("\x00", 60)))
	f.Add([]byte{0x16, 3, 1, 0, 5, 1, 0, 0, 1, 0})
	f.Add([]byte("GET / HTTP/1.1\r\n\r\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		a, z := net.Pipe()
		defer a.Close()
		go func() { _, _ = io.Copy(io.Discard, z) }()
		go func() {
			_, _ = z.Write(b)
			z.Close() // end of input: the handshake fails at once, not at its deadline
		}()
		start := time.Now()
		if _, _, err := s.accept(context.Background(), a); err == nil {
			t.Fatal("garbage passed the handshake")
		}
		z.Close()
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("handshake took %s past its 200 ms deadline", d)
		}
	})
}

// BenchmarkHandshake: connect, handshake and one ping, per mode: the cost
// of a (re)connection, not of an I/O.
func BenchmarkHandshake(b *testing.B) {
	k := pkitest.New(b)
	for _, mode := range []Mode{ModeNone, ModeAuthenticated, ModeSecure} {
		b.Run(mode.String(), func(b *testing.B) {
			var srvSec, cliSec *Security
			if mode != ModeNone {
				srvSec, cliSec = sec(b, k, mode, pki.RoleSDS, "sds1"), sec(b, k, mode, pki.RoleClient, "bench")
			}
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() {
				defer close(done)
				ServeSecure(ctx, l, srvSec, func(context.Context, *Request) (Response, func()) { return Response{}, nil }, nil, slog.New(slog.DiscardHandler))
			}()
			defer func() { cancel(); <-done }()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				c := NewClient(l.Addr().String(), 1)
				c.Security = cliSec
				if _, err := c.Do(ctx, &Request{Op: OpPing}, nil); err != nil {
					b.Fatal(err)
				}
				c.Close()
			}
		})
	}
}
