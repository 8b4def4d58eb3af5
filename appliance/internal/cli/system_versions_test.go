package cli

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/cairn-storage/cairn/appliance/internal/buildinfo"
	"github.com/cairn-storage/cairn/appliance/internal/model"
	"github.com/cairn-storage/cairn/appliance/internal/pki"
	"github.com/cairn-storage/cairn/appliance/internal/pki/pkitest"
)

// TestSystemVersions: the versions the running daemons publish, as a table
// with a one-line verdict; an older daemon makes it say the roll is unfinished.
func TestSystemVersions(t *testing.T) {
	h := newHarness(t, time.Hour)
	h.login()
	kit := pkitest.New(t)
	pkitest.Publish(t, h.etcd, kit.Identity(pki.RoleSDS, "sds1"))
	now := buildinfo.Version()
	deadline := time.Now().Add(20 * time.Second)
	var v struct{ Daemons []map[string]any }
	for len(v.Daemons) != 1 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		if err := json.Unmarshal([]byte(h.ok("system", "versions", "--json")), &v); err != nil {
			t.Fatal(err)
		}
	}
	out := h.ok("system", "versions")
	if f := strings.Fields(strings.Split(out, "\n")[1]); len(f) != 3 || f[0] != "sds" || f[1] != "sds1" || f[2] != now ||
		!strings.Contains(out, "one version runs: "+now+" on 1 daemon") {
		t.Fatalf("one version:\n%s", out)
	}
	old := pki.InfoOf(kit.Identity(pki.RoleSDS, "sds2").Leaf())
	old.Version = "0.0.9"
	b, _ := json.Marshal(old)
	if _, err := h.etcd.Put(t.Context(), model.CertKey(pki.RoleSDS, "sds2"), string(b)); err != nil {
		t.Fatal(err)
	}
	out = h.ok("system", "versions")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "ROLE") || !strings.Contains(lines[2], "sds2") || !strings.Contains(lines[2], "0.0.9") ||
		!strings.Contains(lines[3], "! more than one version runs (0.0.9 on 1 daemon, "+now+" on 1 daemon)") {
		t.Fatalf("mixed:\n%s", out)
	}
	if got := h.ok("version"); !strings.Contains(got, "cairnctl "+now) {
		t.Fatalf("cairnctl version: %q", got)
	}
	h.fails(2, "no arguments", "system", "versions", "extra")
}
