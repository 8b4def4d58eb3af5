package cli

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestRebuildSettings(t *testing.T) {
	h := newHarness(t, 0)
	h.login()
	h.ok("system", "bootstrap", "--name", "lab")
	h.ok("pd", "create", "pd1")
	h.ok("sds", "create", "sds1", "--pd", "pd1", "--address", "127.0.0.1:7201")
	h.ok("pool", "create", "p1", "--pd", "pd1")
	info := func(args ...string) map[string]any {
		t.Helper()
		var o map[string]any
		if err := json.Unmarshal([]byte(h.ok(append(args, "--json")...)), &o); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		return o
	}
	if o := info("pool", "info", "p1"); o["rebuild_policy"] != "unlimited" || o["rebuild_max_io"] != 0.0 {
		t.Errorf("new pool: %v %v", o["rebuild_policy"], o["rebuild_max_io"])
	}
	if o := info("sds", "info", "sds1"); o["rebuild_mbps"] != 0.0 {
		t.Errorf("new SDS: rebuild_mbps %v", o["rebuild_mbps"])
	}

	h.fails(2, "pool set: give --rebuild-policy", "pool", "set", "p1")
	h.fails(2, "expected the pool's name or id", "pool", "set", "--rebuild-policy", "unlimited")
	h.fails(1, `rebuild_policy "fast": use one of unlimited, limit-concurrent-io, favor-app-io`, "pool", "set", "p1", "--rebuild-policy", "fast")
	h.fails(1, "needs rebuild_max_io", "pool", "set", "p1", "--rebuild-policy", "limit-concurrent-io")
	h.fails(1, "rebuild_max_io 0 must be between 1 and 64", "pool", "set", "p1", "--rebuild-policy", "limit-concurrent-io", "--rebuild-max-io", "0")
	h.fails(1, `pool "p9" not found`, "pool", "set", "p9", "--rebuild-policy", "unlimited")
	out := h.ok("pool", "set", "p1", "--rebuild-policy", "limit-concurrent-io", "--rebuild-max-io", "2")
	if !strings.Contains(out, "limit-concurrent-io") {
		t.Errorf("pool set output:\n%s", out)
	}
	if o := info("pool", "info", "p1"); o["rebuild_policy"] != "limit-concurrent-io" || o["rebuild_max_io"] != 2.0 {
		t.Errorf("after pool set: %v %v", o["rebuild_policy"], o["rebuild_max_io"])
	}
	h.ok("pool", "set", "p1", "--rebuild-policy", "favor-app-io")
	if o := info("pool", "info", "p1"); o["rebuild_policy"] != "favor-app-io" || o["rebuild_max_io"] != 0.0 {
		t.Errorf("after favor-app-io: %v %v", o["rebuild_policy"], o["rebuild_max_io"])
	}

	h.fails(2, "sds set: give --rebuild-mbps", "sds", "set", "sds1")
	h.fails(1, "rebuild_mbps -5 must be between 0 (no cap) and 100000", "sds", "set", "sds1", "--rebuild-mbps", "-5")
	h.fails(2, "invalid value", "sds", "set", "sds1", "--rebuild-mbps", "lots")
	out = h.ok("sds", "set", "sds1", "--rebuild-mbps", "50")
	if !strings.Contains(out, "50") {
		t.Errorf("sds set output:\n%s", out)
	}
	if o := info("sds", "info", "sds1"); o["rebuild_mbps"] != 50.0 || o["state"] != "normal" {
		t.Errorf("after sds set: %v %v", o["rebuild_mbps"], o["state"])
	}
	h.ok("sds", "set", "sds1", "--rebuild-mbps", "0")
	if o := info("sds", "info", "sds1"); o["rebuild_mbps"] != 0.0 {
		t.Errorf("cap not removed: %v", o["rebuild_mbps"])
	}
}
