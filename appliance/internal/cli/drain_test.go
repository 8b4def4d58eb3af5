package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/cairn-storage/cairn/appliance/internal/testcluster"
)

// TestDrainAndNewVerbs: `sds rm --drain` follows the job to its end over a
// real cluster; rename, job, event, alert and mdm commands.
func TestDrainAndNewVerbs(t *testing.T) {
	jobPoll = 100 * time.Millisecond
	c := testcluster.Start(t, testcluster.Options{SDSs: 4, DevicesPerSDS: 1, PGCount: 16})
	c.CreateVolume("v1", 8<<20, true)
	h := newClusterHarness(t, c)

	out := h.ok("sds", "rm", "--drain", "sds4")
	if !strings.Contains(out, "succeeded 100.0%") || !strings.Contains(out, "drained and removed") {
		t.Errorf("sds rm --drain output:\n%s", out)
	}
	h.fails(1, `SDS "sds4" not found`, "sds", "info", "sds4")
	if out := h.ok("job", "ls", "--state", "succeeded"); !strings.Contains(out, "sds-remove") || !strings.Contains(out, "sds4") {
		t.Errorf("job ls:\n%s", out)
	}
	h.ok("pool", "rename", "pool1", "gold")
	if out := h.ok("volume", "ls"); !strings.Contains(out, "gold") {
		t.Errorf("volume ls after the pool rename:\n%s", out)
	}
	if out := h.ok("event", "ls", "--kind", "audit", "--object", "gold"); !strings.Contains(out, "PATCH /api/v1/pools/pool1 -> 200") {
		t.Errorf("event ls:\n%s", out)
	}
	h.ok("alert", "ls")
	if out := h.ok("mdm", "ls"); !strings.Contains(out, "RAFT LEADER") {
		t.Errorf("mdm ls:\n%s", out)
	}
}
