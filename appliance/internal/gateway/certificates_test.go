package gateway

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"strings"
	"testing"
	"time"

	"github.com/cairn-storage/cairn/appliance/internal/model"
	"github.com/cairn-storage/cairn/appliance/internal/pki"
	"github.com/cairn-storage/cairn/appliance/internal/pki/pkitest"
)

// certsByName lists GET /system/certificates as token, by role/name.
func (e *env) certsByName(token string) map[string]map[string]any {
	e.t.Helper()
	st, v := e.do("GET", "/api/v1/system/certificates", token, "")
	if st != 200 {
		e.t.Fatalf("GET /system/certificates: %d %v", st, v)
	}
	out := map[string]map[string]any{}
	for _, x := range v.([]any) {
		m := x.(map[string]any)
		out[m["role"].(string)+"/"+m["name"].(string)] = m
	}
	return out
}

// waitCerts waits until n certificates are listed.
func (e *env) waitCerts(token string, n int, cond func(map[string]map[string]any) bool) map[string]map[string]any {
	e.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		got := e.certsByName(token)
		if len(got) == n && (cond == nil || cond(got)) {
			return got
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("certificates listed: %v; want %d", got, n)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestCertificatesListedAndAlerted(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.ok(201, "POST", "/api/v1/users", e.admin, `{"name":"watcher","role":"monitor","password":"watcher-pass-1"}`)
	mon := e.login("watcher", "watcher-pass-1")
	kit := pkitest.New(t)

	sds := kit.Identity(pki.RoleSDS, "sds1")
	pkitest.Publish(t, e.etcd, sds)
	short := kit.IdentityFor(pki.Request{Role: pki.RoleGateway, Name: "gw-short", Validity: 10 * 24 * time.Hour})
	pkitest.Publish(t, e.etcd, short)
	// An expired certificate, as a daemon that published it before its end
	// would have left it.
	certPEM, _, err := kit.CA.Issue(pki.Request{Role: pki.RoleNBD, Name: "nbd-old", Validity: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := pem.Decode(certPEM)
	old, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Millisecond)
	b, _ := json.Marshal(pki.InfoOf(old))
	must(e.etcd.Put(ctx, model.CertKey(pki.RoleNBD, "nbd-old"), string(b)))

	got := e.waitCerts(mon, 3, nil)
	for key, want := range map[string]struct {
		status  string
		minDays float64
		maxDays float64
		serial  string
	}{
		"sds/sds1":         {CertOK, float64(pki.DefaultNodeValidity/(24*time.Hour)) - 1, float64(pki.DefaultNodeValidity / (24 * time.Hour)), sds.Leaf().SerialNumber.Text(16)},
		"gateway/gw-short": {CertExpiring, 9, 10, short.Leaf().SerialNumber.Text(16)},
		"nbd/nbd-old":      {CertExpired, -1, -1, old.SerialNumber.Text(16)},
	} {
		c := got[key]
		if c == nil || c["status"] != want.status || c["serial"] != want.serial ||
			num(c["days_left"]) < want.minDays || num(c["days_left"]) > want.maxDays || c["not_after"] == "" {
			t.Errorf("%s: %v; want status %s, serial %s, days_left %v..%v", key, c, want.status, want.serial, want.minDays, want.maxDays)
		}
	}

	// The alert: one per certificate that ends within 30 days, none for the others.
	if err := e.srv.observe(ctx); err != nil {
		t.Fatal(err)
	}
	active := func() map[string]map[string]any {
		_, v := e.do("GET", "/api/v1/alerts?active=true", mon, "")
		out := map[string]map[string]any{}
		for _, x := range v.([]any) {
			a := x.(map[string]any)
			if k, _ := a["kind"].(string); strings.HasPrefix(k, "certificate-") {
				out[a["object"].(map[string]any)["id"].(string)] = a
			}
		}
		return out
	}
	al := active()
	if len(al) != 2 || al["gateway/gw-short"]["kind"] != AlertCertificateExpiring || al["gateway/gw-short"]["severity"] != SeverityWarning ||
		al["nbd/nbd-old"]["kind"] != AlertCertificateExpired || al["nbd/nbd-old"]["severity"] != SeverityError {
		t.Fatalf("certificate alerts: %v; want expiring (warning) for gateway/gw-short and expired (error) for nbd/nbd-old", al)
	}
	if msg := al["gateway/gw-short"]["message"].(string); !strings.Contains(msg, "cairn pki issue") || !strings.Contains(msg, "gw-short") {
		t.Errorf("the alert does not say how to renew: %q", msg)
	}

	// Renewed in place: the daemon reloads, republishes, the alert clears.
	if err := kit.CA.IssueTo(short.Dir(), pki.Request{Role: pki.RoleGateway, Name: "gw-short"}); err != nil {
		t.Fatal(err)
	}
	if err := short.Reload(); err != nil {
		t.Fatal(err)
	}
	e.waitCerts(mon, 3, func(m map[string]map[string]any) bool { return m["gateway/gw-short"]["status"] == CertOK })
	if err := e.srv.observe(ctx); err != nil {
		t.Fatal(err)
	}
	if al := active(); len(al) != 1 || al["nbd/nbd-old"] == nil {
		t.Fatalf("after the renewal the active certificate alerts are %v; want only nbd/nbd-old", al)
	}

	// A gateway serving HTTPS lists its own certificate (a 10-year self-signed one).
	addr, _ := runGateway(t, Config{Etcd: e.etcd, TLS: true})
	_, port, _ := strings.Cut(addr, ":")
	got = e.waitCerts(mon, 4, nil)
	found := false
	for k, c := range got {
		if strings.HasPrefix(k, httpsCertRole+"/") && strings.HasSuffix(k, ":"+port) {
			found = c["status"] == CertOK && num(c["days_left"]) > 3600
		}
	}
	if !found {
		t.Fatalf("the HTTPS certificate of the gateway on port %s is not listed as ok: %v", port, got)
	}
	// Monitors may read it; nobody without a login.
	e.fails(401, "missing bearer token", "GET", "/api/v1/system/certificates", "", "")
}

func num(v any) float64 { f, _ := v.(float64); return f }
