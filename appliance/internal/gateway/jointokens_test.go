package gateway

import (
	"context"
	"crypto/x509"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cairn-storage/cairn/appliance/internal/join"
	"github.com/cairn-storage/cairn/appliance/internal/join/jointest"
	"github.com/cairn-storage/cairn/appliance/internal/model"
	"github.com/cairn-storage/cairn/appliance/internal/pki"
	"github.com/cairn-storage/cairn/appliance/internal/pki/pkitest"
)

// TestJoinTokens: an admin creates a token through the API, a node spends it
// at a join service for its certificate; the list never shows a secret;
// revoking works once; operators may not; without PKI there is no token.
func TestJoinTokens(t *testing.T) {
	kit := pkitest.New(t)
	e := newEnv(t, func(c *Config) { c.ClusterCA = func() *x509.Certificate { return kit.CA.Cert } })
	op := e.user("op", model.RoleOperator)
	e.refused(403, "needs role admin", "POST", "/api/v1/system/join-tokens", op, `{"roles":["sds"]}`)
	e.refused(400, `role "wizard"`, "POST", "/api/v1/system/join-tokens", e.admin, `{"roles":["wizard"]}`)
	e.refused(400, "lifetime", "POST", "/api/v1/system/join-tokens", e.admin, `{"roles":["sds"],"ttl_seconds":5}`)
	e.refused(400, "unknown field", "POST", "/api/v1/system/join-tokens", e.admin, `{"roles":["sds"],"secret":"x"}`)

	v := e.ok(201, "POST", "/api/v1/system/join-tokens", e.admin, `{"roles":["sds","target"],"ttl_seconds":600}`)
	tok, _ := v["token"].(string)
	exp, _ := time.Parse(time.RFC3339, v["expires"].(string))
	if !strings.HasPrefix(tok, "cj1."+v["id"].(string)+".") || !strings.HasSuffix(tok, pki.InfoOf(kit.CA.Cert).Fingerprint) ||
		time.Until(exp) < 9*time.Minute || time.Until(exp) > 11*time.Minute || v["created_by"] != "admin" {
		t.Fatalf("answer %v", v)
	}
	_, l := e.do("GET", "/api/v1/system/join-tokens", e.admin, "")
	if ls := l.([]any); len(ls) != 1 || ls[0].(map[string]any)["token"] != nil || strings.Contains(e.logs.String(), strings.Split(tok, ".")[2]) {
		t.Fatalf("list %v (or the secret logged)", l)
	}

	secret := strings.Split(tok, ".")[2]
	if _, ev := e.do("GET", "/api/v1/events", e.admin, ""); strings.Contains(fmt.Sprint(ev), secret) {
		t.Fatal("an event holds the token's secret")
	}
	// A node spends it at an MDM's join service (same etcd).
	url, _ := jointest.Start(t, kit, e.etcd)
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "pki")
	if _, err := join.Join(ctx, []string{url}, tok, pki.Request{Role: pki.RoleTarget, Name: "svm-7"}, dir); err != nil {
		t.Fatal(err)
	}
	if id, err := pki.LoadIdentity(dir); err != nil || id.Peer().String() != "target/svm-7" {
		t.Fatalf("joined: %v %v", id, err)
	}
	// Its other role is left, for that node only.
	if _, l = e.do("GET", "/api/v1/system/join-tokens", e.admin, ""); len(l.([]any)) != 1 ||
		fmt.Sprint(l.([]any)[0].(map[string]any)["roles"]) != "[sds]" || l.([]any)[0].(map[string]any)["name"] != "svm-7" {
		t.Fatalf("after spending target: %v", l)
	}
	if _, err := join.Join(ctx, []string{url}, tok, pki.Request{Role: pki.RoleSDS, Name: "svm-7"}, t.TempDir()); err != nil {
		t.Fatal(err)
	}
	if _, l = e.do("GET", "/api/v1/system/join-tokens", e.admin, ""); len(l.([]any)) != 0 {
		t.Fatalf("spent token still listed: %v", l)
	}

	// Revoke.
	v = e.ok(201, "POST", "/api/v1/system/join-tokens", e.admin, `{"roles":["host"]}`)
	id := v["id"].(string)
	e.ok(204, "DELETE", "/api/v1/system/join-tokens/"+id, e.admin, "")
	e.refused(404, "not found", "DELETE", "/api/v1/system/join-tokens/"+id, e.admin, "")
	e.refused(400, "16 hex digits", "DELETE", "/api/v1/system/join-tokens/nothex", e.admin, "")
	if _, err := join.Join(ctx, []string{url}, v["token"].(string), pki.Request{Role: pki.RoleHost, Name: "h"}, t.TempDir()); err == nil {
		t.Fatal("revoked token spent")
	}

	// Without PKI.
	plain := newEnv(t)
	plain.refused(409, "without certificates", "POST", "/api/v1/system/join-tokens", plain.admin, `{"roles":["sds"]}`)
}
