package gateway

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cairn-storage/cairn/appliance/internal/etcdtest"
	"github.com/cairn-storage/cairn/appliance/internal/testlog"
)

// runGateway serves cfg (etcd and state directory filled in when missing)
// with Serve on a loopback port until the test ends; it returns the address
// and the gateway's log.
func runGateway(t *testing.T, cfg Config) (string, *testlog.Buffer) {
	t.Helper()
	if cfg.Etcd == nil {
		cfg.Etcd = etcdtest.Start(t)
	}
	if cfg.StateDir == "" {
		cfg.StateDir = t.TempDir()
	}
	logs := &testlog.Buffer{}
	cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, cfg, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	for i := 0; i < 200 && !strings.Contains(logs.String(), "gateway listening"); i++ {
		time.Sleep(50 * time.Millisecond)
	}
	if !strings.Contains(logs.String(), "gateway listening") {
		t.Fatalf("the gateway did not start listening in 10 s:\n%s", logs)
	}
	return ln.Addr().String(), logs
}

func checkSecurityHeaders(t *testing.T, what string, h http.Header, tls bool) {
	t.Helper()
	for _, kv := range securityHeaders {
		if got := h.Get(kv[0]); got != kv[1] {
			t.Errorf("%s: %s = %q, want %q", what, kv[0], got, kv[1])
		}
	}
	if hsts := h.Get("Strict-Transport-Security"); (hsts == hstsValue) != tls {
		t.Errorf("%s: Strict-Transport-Security %q over TLS=%v", what, hsts, tls)
	}
}

// TestSecurityHeaders: every kind of response carries the headers; HSTS
// only over HTTPS.
func TestSecurityHeaders(t *testing.T) {
	e := newEnv(t)
	for _, r := range []struct{ method, path, token string }{
		{"GET", "/api/v1/system", e.admin},
		{"GET", "/api/v1/system", ""},               // 401
		{"GET", "/api/v1/nothing-here", e.admin},    // 404
		{"PUT", "/api/v1/system", e.admin},          // 405
		{"POST", "/api/v1/login", ""},               // 400
		{"GET", "/api/v1/openapi.json", ""},         // raw body
		{"GET", "/metrics", ""},                     // raw body
		{"DELETE", "/api/v1/users/nobody", e.admin}, // 404 of a handler
	} {
		_, _, h := e.doH(r.method, r.path, r.token, "", nil)
		checkSecurityHeaders(t, r.method+" "+r.path, h, false)
	}
	// The event stream: headers come before the first event.
	req, _ := http.NewRequest("GET", e.url+"/api/v1/events/stream", nil)
	req.Header.Set("Authorization", "Bearer "+e.admin)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	checkSecurityHeaders(t, "event stream", resp.Header, false)
	resp.Body.Close()

	addr, _ := runGateway(t, Config{TLS: true})
	cli := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	resp, err = cli.Get("https://" + addr + "/api/v1/nothing-here")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	checkSecurityHeaders(t, "HTTPS 404", resp.Header, true)
}

// TestSlowAndLargeHeaders: a client that sends its headers too slowly is
// cut off; headers over the limit get 431.
func TestSlowAndLargeHeaders(t *testing.T) {
	saved := headerTimeout
	headerTimeout = time.Second
	t.Cleanup(func() { headerTimeout = saved })
	addr, _ := runGateway(t, Config{})

	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET /api/v1/system HTTP/1.1\r\nHost: x\r\n") // and never the blank line
	start := time.Now()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 512)
	for {
		if _, err := c.Read(buf); err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Fatal("a client sending headers slowly was not cut off within 10 s")
			}
			break // closed by the gateway
		}
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("slow client cut off after %s, want about 1 s", d)
	}

	c2, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	fmt.Fprintf(c2, "GET /api/v1/system HTTP/1.1\r\nHost: x\r\nX-Big: %s\r\n\r\n", strings.Repeat("a", 2*maxHeaderBytes))
	resp, err := http.ReadResponse(bufio.NewReader(c2), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("headers of %d bytes: status %d, want 431", 2*maxHeaderBytes, resp.StatusCode)
	}
}

// TestBodyLimitEverywhere: every route that takes a body refuses one over
// maxBody and changes nothing, except the routes of bodyLimits, which take
// more (an update bundle) and are bounded by their own limit instead (the
// bundle reader's test sends one over it).
func TestBodyLimitEverywhere(t *testing.T) {
	e := newEnv(t)
	big := `{"name":"` + strings.Repeat("a", maxBody) + `"}`
	n := 0
	for _, rt := range e.srv.routes {
		if (rt.method != "POST" && rt.method != "PATCH") || rt.path == APIPrefix+"/logout" { // logout reads no body
			continue
		}
		if limit, ok := bodyLimits[rt.method+" "+rt.path]; ok {
			if limit <= maxBody || limit > 256<<20 {
				t.Errorf("%s %s: own body limit %d; want more than %d and at most 256 MiB", rt.method, rt.path, limit, maxBody)
			}
			// Over maxBody but within its limit: read whole and judged on its
			// content (not a bundle), not refused for its size.
			before := e.state()
			st, v, _ := e.doH(rt.method, rt.path, e.admin, big, map[string]string{"Content-Type": "application/gzip"})
			if m, _ := v.(map[string]any); st != 400 || strings.Contains(fmt.Sprint(m["message"]), "larger than") {
				t.Errorf("%s %s with %d bytes that are no bundle: %d %v; want 400 for the content, not the size", rt.method, rt.path, len(big), st, v)
			}
			if after := e.state(); len(diffKeys(before, after)) > 0 {
				t.Errorf("%s %s with a body that is no bundle changed etcd: %s", rt.method, rt.path, diffKeys(before, after))
			}
			continue
		}
		path := strings.NewReplacer("{ref}", "x", "{name}", "x", "{id}", "x", "{kind}", "x").Replace(rt.path)
		before := e.state()
		st, v := e.do(rt.method, path, e.admin, big)
		n++
		if m, _ := v.(map[string]any); st != 400 || !strings.Contains(fmt.Sprint(m["message"]), "larger than") {
			t.Errorf("%s %s with a body of %d bytes: %d %v; want 400 saying the body is too large", rt.method, path, len(big), st, v)
		}
		if after := e.state(); len(diffKeys(before, after)) > 0 {
			t.Errorf("%s %s with an oversized body changed etcd: %s", rt.method, path, diffKeys(before, after))
		}
	}
	if n < 20 {
		t.Fatalf("only %d routes with a body found", n)
	}
}
