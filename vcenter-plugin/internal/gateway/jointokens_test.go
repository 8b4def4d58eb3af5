package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairn-storage/cairn/vcenter-plugin/internal/gateway"
)

// CreateJoinToken sends the request the gateway decodes (unknown fields
// refused, the lifetime in seconds) and reads its 201; a system without
// certificates is the gateway's 409.
func TestHTTPClientCreateJoinToken(t *testing.T) {
	ctx := context.Background()
	pki := &atomic.Bool{}
	pki.Store(true)
	var got struct {
		Roles      []string `json:"roles"`
		TTLSeconds int64    `json:"ttl_seconds"`
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/v1/login", func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"token":"tok"}`))
	})
	mux.HandleFunc("POST /api/v1/system/join-tokens", func(w http.ResponseWriter, r *http.Request) {
		dec := json.NewDecoder(r.Body)
		dec.DisallowUnknownFields() // as the gateway does
		if r.Header.Get("Authorization") != "Bearer tok" || dec.Decode(&got) != nil {
			w.WriteHeader(400)
			return
		}
		if !pki.Load() {
			w.WriteHeader(409)
			_, _ = w.Write([]byte(`{"code":"conflict","message":"this system runs without certificates (its daemons have no --pki): there is no CA to join"}`))
			return
		}
		w.WriteHeader(201)
		_, _ = w.Write([]byte(`{"id":"0123456789abcdef","token":"cj1.0123456789abcdef.c2VjcmV0.` + strings.Repeat("ab", 32) + `","roles":["sds","target"],"expires":"2030-01-01T00:00:00Z","expired":false,"created_by":"admin","created":"2029-12-31T23:00:00Z"}`))
	})
	ts := httptest.NewTLSServer(mux)
	t.Cleanup(ts.Close)
	c, err := gateway.NewHTTPClient(gateway.Config{URL: ts.URL, Username: "admin", Password: "pw", Thumbprint: gateway.Thumbprint(ts.Certificate().Raw)})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := c.CreateJoinToken(ctx, []string{"sds", "target"}, gateway.JoinTokenTTL)
	if err != nil {
		t.Fatal(err)
	}
	if tok.ID != "0123456789abcdef" || !strings.HasPrefix(tok.Token, "cj1.0123456789abcdef.") || !slices.Equal(tok.Roles, []string{"sds", "target"}) || tok.Expires.Year() != 2030 {
		t.Fatalf("token %+v", tok)
	}
	if !slices.Equal(got.Roles, []string{"sds", "target"}) || got.TTLSeconds != 3600 {
		t.Fatalf("request %+v", got)
	}
	pki.Store(false)
	_, err = c.CreateJoinToken(ctx, []string{"sds"}, time.Hour)
	var se *gateway.StatusError
	if !errors.As(err, &se) || se.Status != http.StatusConflict || !strings.Contains(se.Message, "without certificates") {
		t.Fatalf("system without PKI: %v", err)
	}
}

// CertRoles is the appliance's pki.Roles, which this module cannot import
// (internal): read from its source, in its order.
func TestCertRolesAreTheAppliancePKIRoles(t *testing.T) {
	src, err := os.ReadFile("../../../appliance/internal/pki/pki.go")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^var Roles = \[\]string\{([^}]*)\}`).FindSubmatch(src)
	if m == nil {
		t.Fatal("appliance/internal/pki/pki.go declares no `var Roles = []string{...}`: update this test and gateway.CertRoles")
	}
	var want []string
	for _, name := range strings.Split(string(m[1]), ",") {
		c := regexp.MustCompile(`(?m)^\s*` + regexp.QuoteMeta(strings.TrimSpace(name)) + `\s*=\s*"([a-z]+)"`).FindSubmatch(src)
		if c == nil {
			t.Fatalf("pki role constant %s not found", name)
		}
		want = append(want, string(c[1]))
	}
	if !slices.Equal(gateway.CertRoles, want) {
		t.Fatalf("gateway.CertRoles %v, appliance pki.Roles %v", gateway.CertRoles, want)
	}
}

// ListJoinTokens reads the gateway's list (its joinTokenView: no secret),
// RevokeJoinToken sends DELETE by id; a token not listed is ErrNotFound.
func TestHTTPClientListAndRevokeJoinTokens(t *testing.T) {
	ctx := context.Background()
	var revoked atomic.Bool
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/v1/login", func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"token":"tok"}`))
	})
	mux.HandleFunc("GET /api/v1/system/join-tokens", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tok" {
			w.WriteHeader(401)
			return
		}
		_, _ = w.Write([]byte(`[{"id":"0123456789abcdef","roles":["target"],"name":"cairn-esx-04","expires":"2030-01-01T00:00:00Z","expired":false,"created_by":"admin","created":"2029-12-31T23:00:00Z"},` +
			`{"id":"fedcba9876543210","roles":["sds"],"expires":"2020-01-01T00:00:00Z","expired":true,"created_by":"admin","created":"2019-12-31T23:00:00Z"}]`))
	})
	mux.HandleFunc("DELETE /api/v1/system/join-tokens/{id}", func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("id") != "fedcba9876543210" || revoked.Swap(true) {
			w.WriteHeader(404)
			_, _ = w.Write([]byte(`{"code":"not_found","message":"join token ` + r.PathValue("id") + ` not found: spent, revoked, or pruned after it expired"}`))
			return
		}
		w.WriteHeader(204)
	})
	ts := httptest.NewTLSServer(mux)
	t.Cleanup(ts.Close)
	c, err := gateway.NewHTTPClient(gateway.Config{URL: ts.URL, Username: "admin", Password: "pw", Thumbprint: gateway.Thumbprint(ts.Certificate().Raw)})
	if err != nil {
		t.Fatal(err)
	}
	l, err := c.ListJoinTokens(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(l) != 2 || l[0].ID != "0123456789abcdef" || l[0].Name != "cairn-esx-04" || !slices.Equal(l[0].Roles, []string{"target"}) || l[0].Expired ||
		l[0].Expires.Year() != 2030 || l[1].ID != "fedcba9876543210" || !l[1].Expired || l[1].Name != "" {
		t.Fatalf("list %+v", l)
	}
	if err := c.RevokeJoinToken(ctx, "fedcba9876543210"); err != nil {
		t.Fatal(err)
	}
	if err := c.RevokeJoinToken(ctx, "fedcba9876543210"); !errors.Is(err, gateway.ErrNotFound) {
		t.Fatalf("revoking a revoked token: %v, want ErrNotFound", err)
	}
}
