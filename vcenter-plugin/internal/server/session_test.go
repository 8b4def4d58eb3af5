package server_test

import (
	"context"
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/cairn-storage/cairn/vcenter-plugin/internal/server"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/vcsimkit"
)

// startPlugin serves a plugin server against kit on a TLS test server.
func startPlugin(t *testing.T, kit *vcsimkit.Kit, origins ...string) (*httptest.Server, *client) {
	t.Helper()
	dir := t.TempDir()
	cert, err := server.EnsureCertificate(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewUnstartedServer(nil)
	ts.TLS = &tls.Config{Certificates: []tls.Certificate{cert.TLS}}
	ts.StartTLS()
	t.Cleanup(ts.Close)
	srv, err := server.New(server.Config{VCenter: kit.URL, VCenterThumbprint: kit.Thumbprint, PublicURL: ts.URL, StateDir: dir,
		Certificate: cert, VCenterOrigins: origins})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	ts.Config.Handler = srv
	return ts, &client{t: t, base: ts.URL, http: ts.Client()}
}

// The UI inside the vSphere Client sends the client's session token; the
// plugin exchanges it at vCenter for a clone ticket and clones the
// session. The kit's endpoint is as strict as vCenter's.
func TestSessionToken(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	kit, _ := vcsimkit.StartTest(t, vcsimkit.Options{})
	ts, c := startPlugin(t, kit)

	// The kit's endpoint: POST with a live session only.
	post := func(token string) int {
		req, _ := http.NewRequestWithContext(ctx, "POST", kit.URL.Scheme+"://"+kit.URL.Host+vcsimkit.CloneTicketPath, nil)
		if token != "" {
			req.Header.Set("vmware-api-session-id", token)
		}
		resp, err := (&http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := post(""); code != 401 {
		t.Fatalf("clone ticket without a token: %d", code)
	}
	if code := post("forged-token"); code != 401 {
		t.Fatalf("clone ticket for a forged token: %d", code)
	}
	token, err := kit.SessionToken(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if code := post(token); code != 200 {
		t.Fatalf("clone ticket for a live session: %d", code)
	}

	call := func(method, path, token string, hdr map[string]string) (int, string) {
		req, _ := http.NewRequestWithContext(ctx, method, ts.URL+path, strings.NewReader("{}"))
		if token != "" {
			req.Header.Set(server.TokenHeader, token)
		}
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := c.http.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b strings.Builder
		buf := make([]byte, 4096)
		n, _ := resp.Body.Read(buf)
		b.Write(buf[:n])
		return resp.StatusCode, b.String()
	}
	if code, body := call("GET", "/api/v1/inventory", "forged-token", nil); code != 401 || !strings.Contains(body, "sign in again") {
		t.Fatalf("forged token: %d %s", code, body)
	}
	if code, body := call("GET", "/api/v1/inventory", token, nil); code != 200 || !strings.Contains(body, "esx-01") {
		t.Fatalf("inventory with the client's token: %d %s", code, body)
	}
	// Reused: a second call does not need a new ticket (tickets are single-use).
	if code, _ := call("GET", "/api/v1/systems", token, nil); code != 200 {
		t.Fatalf("second call with the token: %d", code)
	}

}

// Through vCenter's reverse proxy the Origin is vCenter's: allowed with
// the X-Cairn-Request header, refused without it; other origins never.
func TestProxiedOrigin(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	kit, _ := vcsimkit.StartTest(t, vcsimkit.Options{})
	ts, c := startPlugin(t, kit, "https://vc.example.test")
	token, err := kit.SessionToken(ctx)
	if err != nil {
		t.Fatal(err)
	}
	vcOrigin := kit.URL.Scheme + "://" + kit.URL.Host
	for _, tc := range []struct {
		origin string
		header bool
		want   int
	}{
		{vcOrigin, true, 200},                  // through (the empty plan is validated: valid=false)
		{"https://vc.example.test", true, 200}, // a configured vCenter origin
		{vcOrigin, false, 403},                 // a form posted from a page on vCenter: no custom header
		{"https://evil.example", true, 403},
		{ts.URL, false, 200}, // our own origin (standalone UI)
	} {
		req, _ := http.NewRequestWithContext(ctx, "POST", ts.URL+"/api/v1/plan/validate", strings.NewReader("{}"))
		req.Header.Set("Origin", tc.origin)
		req.Header.Set(server.TokenHeader, token)
		if tc.header {
			req.Header.Set(server.RequestHeader, "1")
		}
		resp, err := c.http.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("origin %s header %v: %d, want %d", tc.origin, tc.header, resp.StatusCode, tc.want)
		}
	}
}
