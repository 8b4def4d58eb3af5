package cli

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/cairn-storage/cairn/appliance/internal/pki"
	"github.com/cairn-storage/cairn/appliance/internal/pki/pkitest"
)

// TestSystemCertificates: a daemon certificate published with a short
// validity shows as expiring, beside the gateway's own HTTPS certificate.
func TestSystemCertificates(t *testing.T) {
	h := newHarness(t, time.Hour)
	h.login()
	kit := pkitest.New(t)
	id := kit.IdentityFor(pki.Request{Role: pki.RoleSDS, Name: "sds-short", Validity: 5 * 24 * time.Hour})
	pkitest.Publish(t, h.etcd, id)

	var rows []map[string]any
	deadline := time.Now().Add(20 * time.Second)
	for {
		if err := json.Unmarshal([]byte(h.ok("system", "certificates", "--json")), &rows); err != nil {
			t.Fatal(err)
		}
		if len(rows) == 2 || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	roles := map[string]map[string]any{}
	for _, r := range rows {
		roles[r["role"].(string)] = r
	}
	if len(rows) != 2 || roles["sds"]["name"] != "sds-short" || roles["sds"]["status"] != "expiring" || roles["https"]["status"] != "ok" {
		t.Fatalf("--json: %v; want sds/sds-short expiring and the gateway's https certificate ok", rows)
	}

	out := h.ok("system", "certificates")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "ROLE") || !strings.Contains(lines[0], "DAYS LEFT") {
		t.Fatalf("table:\n%s", out)
	}
	var sdsLine string
	for _, l := range lines {
		if strings.HasPrefix(l, "sds ") {
			sdsLine = l
		}
	}
	if f := strings.Fields(sdsLine); len(f) != 6 || f[1] != "sds-short" || f[2] != id.Leaf().SerialNumber.Text(16) || f[4] != "4" || f[5] != "expiring" {
		t.Fatalf("sds row %q; want name, serial, not after, 4 days left, expiring", sdsLine)
	}
	if !strings.Contains(lines[3], "1 certificate expired or expire within 30 days") {
		t.Fatalf("no renewal note under the table:\n%s", out)
	}
	h.fails(2, "no arguments", "system", "certificates", "extra")
}
