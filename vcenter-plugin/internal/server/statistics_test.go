package server_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/cairn-storage/cairn/vcenter-plugin/internal/gateway"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/gatewayfake"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/server"
)

// checkStatistics drives the dashboards' read side against the deployed
// system cairn1 (volume ds1 mapped to every host) of TestServer.
func checkStatistics(t *testing.T, c *client, srv *server.Server, array *gatewayfake.Array) {
	t.Helper()
	clock := time.Now()
	array.SetClock(func() time.Time { return clock })
	server.SetProgressClock(srv, func() time.Time { return clock })
	var st server.StatisticsView
	if code := c.do("GET", "/api/v1/systems/cairn1/statistics", nil, &st); code != 200 || st.Kind != "system" || st.Timestamp != nil || st.IntervalSeconds != 5 {
		t.Fatalf("system statistics before a sample: %d %+v", code, st)
	}
	clock = clock.Add(15 * time.Second)
	vol, _ := array.GetVolume(context.Background(), "ds1")
	pool, _ := array.GetPool(context.Background(), vol.PoolID)
	sdss, _ := array.ListSDS(context.Background())
	for _, q := range []string{"kind=system", "kind=volume&name=ds1", "kind=pool&name=" + pool.Name, "kind=sds&name=" + sdss[0].Name} {
		st = server.StatisticsView{}
		if code := c.do("GET", "/api/v1/systems/cairn1/statistics?"+q, nil, &st); code != 200 || st.Timestamp == nil || len(st.History) != 3 || st.Read.IOPS <= 0 {
			t.Fatalf("%s: %d %+v", q, code, st)
		}
	}
	// The volume's figures are the gateway's (the array's) own.
	want, _ := array.Statistics(context.Background(), gateway.KindVolumes, "ds1")
	st = server.StatisticsView{}
	if code := c.do("GET", "/api/v1/systems/cairn1/statistics?kind=volume&name=ds1", nil, &st); code != 200 || st.Name != "ds1" ||
		st.Read != want.Read || st.Write != want.Write || st.Read.IOPS <= 0 || st.Write.LatencyP99Us <= 0 {
		t.Fatalf("ds1: %d %+v, gateway %+v", code, st, want)
	}
	var e map[string]string
	for _, bad := range []struct {
		path string
		code int
		msg  string
	}{
		{"/api/v1/systems/cairn1/statistics?kind=lun&name=x", 400, "give system, pool, volume"},
		{"/api/v1/systems/cairn1/statistics?kind=volume", 400, "needs name="},
		{"/api/v1/systems/cairn1/statistics?kind=system&name=x", 400, "takes no name"},
		{"/api/v1/systems/cairn1/statistics?kind=volume&name=nope", 404, `volumes "nope" not found`},
		{"/api/v1/systems/other/statistics", 404, "deploy it first"},
		{"/api/v1/systems/other/rebuild", 404, "deploy it first"},
	} {
		e = nil
		if code := c.do("GET", bad.path, nil, &e); code != bad.code || !strings.Contains(e["error"], bad.msg) {
			t.Fatalf("GET %s: %d %q, want %d %q", bad.path, code, e["error"], bad.code, bad.msg)
		}
	}

	// Rebuild progress: an SDS away for a minute misses writes, resyncs
	// them when back; the ETA is "estimating" until a rate was observed.
	var rb server.RebuildProgress
	if code := c.do("GET", "/api/v1/systems/cairn1/rebuild", nil, &rb); code != 200 || rb.ETAState != server.ETAIdle || rb.PendingBytes != 0 {
		t.Fatalf("idle rebuild: %d %+v", code, rb)
	}
	array.ResyncTime = 40 * time.Second
	ctx := context.Background()
	if err := array.EnterSDSMaintenance(ctx, sdss[0].Name, gateway.MaintenanceInstant); err != nil {
		t.Fatal(err)
	}
	clock = clock.Add(time.Minute)
	if err := array.ExitSDSMaintenance(ctx, sdss[0].Name); err != nil {
		t.Fatal(err)
	}
	if code := c.do("GET", "/api/v1/systems/cairn1/rebuild", nil, &rb); code != 200 || rb.ETAState != server.ETAEstimating ||
		rb.PendingBytes <= 0 || rb.ObservedETASeconds != nil || rb.ResyncingGroups != 1 {
		t.Fatalf("resync started: %d %+v", code, rb)
	}
	// The systems list carries the same progress, from the same gateway
	// answer as the health beside it: the dashboard draws both from it.
	var systems []server.SystemView
	if code := c.do("GET", "/api/v1/systems", nil, &systems); code != 200 {
		t.Fatalf("systems: %d", code)
	}
	for _, v := range systems {
		if v.Name != "cairn1" {
			continue
		}
		if v.Health == nil || v.Rebuild == nil || !sameJSON(v.Rebuild.Rebuild, v.Health.Rebuild) || v.Rebuild.ResyncingGroups != 1 ||
			v.Rebuild.ETAState != server.ETAEstimating || v.Health.Health.Status == gateway.HealthOK {
			t.Fatalf("cairn1 while resyncing: %+v, rebuild %+v", v.Health, v.Rebuild)
		}
	}
	clock = clock.Add(10 * time.Second)
	c.do("GET", "/api/v1/systems/cairn1/rebuild", nil, &rb)
	if rb.ETAState != server.ETAKnown || rb.ObservedETASeconds == nil || *rb.ObservedETASeconds != 30 || rb.Percent != 25 || rb.WindowSeconds != 10 {
		t.Fatalf("a quarter in: %+v (eta %v)", rb, rb.ObservedETASeconds)
	}
	clock = clock.Add(30 * time.Second)
	c.do("GET", "/api/v1/systems/cairn1/rebuild", nil, &rb)
	if rb.ETAState != server.ETAIdle || rb.PendingBytes != 0 || rb.Percent != 100 {
		t.Fatalf("resync done: %+v", rb)
	}
}

// sameJSON: a and b encode alike (pointers compared by what they point at).
func sameJSON(a, b any) bool {
	x, errX := json.Marshal(a)
	y, errY := json.Marshal(b)
	return errX == nil && errY == nil && string(x) == string(y)
}
