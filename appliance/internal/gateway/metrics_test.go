// Tests of the system view and the Prometheus exposition (/metrics).

package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cairn-storage/cairn/appliance/internal/model"
)

func TestSystemAndMetrics(t *testing.T) {
	e := newEnv(t)
	st := e.ok(200, "GET", "/api/v1/system", e.admin, "")
	if st["health"].(map[string]any)["status"] != HealthNotBootstrapped {
		t.Errorf("system %v", st)
	}
	e.cluster()
	e.device(e.admin, `{"name":"b1","sds":"b","pool":"p","path":"/var/lib/cairn/b1.img"}`)
	e.ok(201, "POST", "/api/v1/volumes", e.admin, `{"name":"v1","pool":"p","size":8589934592}`)
	e.ok(200, "POST", "/api/v1/system/bootstrap", e.admin, `{"name":"lab"}`)
	e.fails(409, "already bootstrapped", "POST", "/api/v1/system/bootstrap", e.admin, `{"name":"other"}`)
	vol := e.ok(200, "GET", "/api/v1/volumes/v1", e.admin, "")
	ids := map[string]string{}
	for _, kind := range []string{"sds", "devices"} {
		_, l := e.do("GET", "/api/v1/"+kind, e.admin, "")
		for _, o := range l.([]any) {
			m := o.(map[string]any)
			ids[m["name"].(string)] = m["id"].(string)
		}
	}
	// SDS a is alive and publishes statistics; b and c are down.
	ctx := context.Background()
	live, _ := json.Marshal(model.SDSLive{Address: "127.0.0.1:7101", PID: 1})
	must(e.etcd.Put(ctx, model.LiveKey(ids["a"]), string(live)))
	stats, _ := json.Marshal(model.SDSStats{SDSID: ids["a"], Time: time.Now(),
		Total:   model.IOCounters{ReadOps: 10, WriteOps: 5, ReadBytes: 40960, WriteBytes: 20480, ReadLatencyNs: 2e6, WriteLatencyNs: 3e6},
		Volumes: map[string]model.IOCounters{vol["id"].(string): {ReadOps: 7, WriteOps: 3, ReadLatencyNs: 1500000000}},
		Devices: map[string]model.DeviceUsage{ids["a1"]: {Capacity: 100 * GiB, Used: 3 << 20, State: "normal"}}})
	must(e.etcd.Put(ctx, model.StatsKey(ids["a"]), string(stats)))

	st = e.ok(200, "GET", "/api/v1/system", e.admin, "")
	h := st["health"].(map[string]any)
	if h["status"] != HealthDegraded || h["sds_up_count"] != float64(1) || fmt.Sprint(h["sds_down_names"]) != "[b c]" {
		t.Errorf("health %v", h)
	}
	if c := st["capacity"].(map[string]any); c["raw"] != float64(200*GiB) || c["raw_allocated"] != float64(3<<20) {
		t.Errorf("capacity %v", c)
	}

	status, body := e.do("GET", "/metrics", "", "")
	text, _ := body.(string)
	if status != 200 {
		t.Fatalf("metrics %d %v", status, body)
	}
	for _, want := range []string{
		"# TYPE cairn_sds_up gauge",
		fmt.Sprintf(`cairn_sds_up{sds_id="%s",sds="a"} 1`, ids["a"]),
		fmt.Sprintf(`cairn_sds_up{sds_id="%s",sds="b"} 0`, ids["b"]),
		fmt.Sprintf(`cairn_sds_read_ops_total{sds_id="%s",sds="a"} 10`, ids["a"]),
		fmt.Sprintf(`cairn_volume_read_ops_total{volume_id="%s",volume="v1",pool="p"} 7`, vol["id"]),
		fmt.Sprintf(`cairn_volume_read_latency_seconds_total{volume_id="%s",volume="v1",pool="p"} 1.5`, vol["id"]),
		fmt.Sprintf(`cairn_device_used_bytes{device_id="%s",device="a1",sds="a",pool="p"} 3145728`, ids["a1"]),
		fmt.Sprintf(`cairn_pool_capacity_bytes{pool_id="`),
		"# TYPE cairn_volume_write_bytes_total counter",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	checkExposition(t, text)
}

// checkExposition parses the text format strictly enough to catch
// malformed lines: every sample belongs to the family declared before it.
func checkExposition(t *testing.T, text string) {
	t.Helper()
	family := ""
	for i, line := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		switch {
		case strings.HasPrefix(line, "# HELP "):
		case strings.HasPrefix(line, "# TYPE "):
			f := strings.Fields(line)
			if len(f) != 4 || (f[3] != "counter" && f[3] != "gauge") {
				t.Errorf("line %d: bad TYPE %q", i+1, line)
			}
			family = f[2]
		default:
			name := line
			if j := strings.IndexAny(line, "{ "); j >= 0 {
				name = line[:j]
			}
			if name != family {
				t.Errorf("line %d: sample %q outside its family %q", i+1, line, family)
			}
			if strings.Count(line, `"`)%2 != 0 || !strings.Contains(line, " ") {
				t.Errorf("line %d: malformed sample %q", i+1, line)
			}
		}
	}
}
