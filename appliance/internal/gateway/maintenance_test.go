package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cairn-storage/cairn/appliance/internal/model"
	"github.com/cairn-storage/cairn/appliance/internal/placement"
	"github.com/cairn-storage/cairn/appliance/internal/testcluster"
	"github.com/cairn-storage/cairn/appliance/internal/testlog"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

const MiB = 1 << 20

// newClusterEnv serves a gateway on a running test cluster's etcd.
func newClusterEnv(t *testing.T, c *testcluster.Cluster) *env {
	t.Helper()
	e := &env{t: t, etcd: c.Etcd, dir: t.TempDir(), logs: &testlog.Buffer{}}
	e.serve(Config{Etcd: c.Etcd, StateDir: e.dir, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	return e
}

// get decodes a GET answer into v.
func (e *env) get(path, token string, v any) {
	e.t.Helper()
	m := e.ok(200, "GET", path, token, "")
	b, _ := json.Marshal(m)
	if err := json.Unmarshal(b, v); err != nil {
		e.t.Fatal(err)
	}
}

type sdsInfo struct {
	Name        string          `json:"name"`
	State       string          `json:"state"`
	Up          bool            `json:"up"`
	Used        int64           `json:"raw_allocated"`
	ResyncBytes int64           `json:"resync_bytes"`
	Maintenance maintenanceView `json:"maintenance"`
}

type sysInfo struct {
	Health  systemHealth `json:"health"`
	Rebuild rebuildView  `json:"rebuild"`
	Leader  string       `json:"leader"`
}

// waitFor polls cond every 100 ms up to within.
func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not reached after %s", what, within)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// refused asserts an error status and message; unlike fails it cannot
// check that etcd is unchanged (the running SDSs publish statistics), so the
// callers check the SDS states instead.
func (e *env) refused(want int, msg, method, path, token, body string) {
	e.t.Helper()
	st, v := e.do(method, path, token, body)
	m, _ := v.(map[string]any)
	if text, _ := m["message"].(string); st != want || !strings.Contains(text, msg) {
		e.t.Errorf("%s %s %s: got %d %v; want %d with error containing %q", method, path, body, st, v, want, msg)
	}
}

// totalResync sums resync_bytes over every SDS.
func (e *env) totalResync(token string) int64 {
	var n int64
	_, v := e.do("GET", "/api/v1/sds", token, "")
	for _, x := range v.([]any) {
		n += int64(x.(map[string]any)["resync_bytes"].(float64))
	}
	return n
}

// TestMaintenanceOnCluster drives instant and protected maintenance, the
// refusals, and the rebuild figures of GET /system over a real cluster.
func TestMaintenanceOnCluster(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{SDSs: 4, DevicesPerSDS: 1, PGCount: 16})
	e := newClusterEnv(t, c)
	op := e.user("op", model.RoleOperator)
	mon := e.user("mon", model.RoleMonitor)
	ctx := context.Background()

	vol := c.CreateVolume("v1", 32*MiB, true)
	data := make([]byte, 32*MiB)
	rand.New(rand.NewSource(1)).Read(data)
	if err := vol.WriteAt(ctx, data, 0, 0); err != nil {
		t.Fatal(err)
	}
	healthy := func() bool {
		var s sysInfo
		e.get("/api/v1/system", mon, &s)
		r := s.Rebuild
		return r.DegradedGroups == 0 && r.RebuildingGroups == 0 && r.ResyncingGroups == 0 && r.RebalancingGroups == 0
	}
	waitFor(t, 20*time.Second, "initially healthy", healthy)
	sds := func(name string) sdsInfo {
		var v sdsInfo
		e.get("/api/v1/sds/"+name, mon, &v)
		return v
	}

	// Refusals.
	e.refused(403, "needs role operator", "POST", "/api/v1/sds/sds1/maintenance", mon, `{"mode":"instant"}`)
	e.refused(400, "not in maintenance", "DELETE", "/api/v1/sds/sds1/maintenance", op, "")
	e.refused(400, `maintenance mode "nap"`, "POST", "/api/v1/sds/sds1/maintenance", op, `{"mode":"nap"}`)
	e.refused(404, "not found", "POST", "/api/v1/sds/nosuch/maintenance", op, `{"mode":"instant"}`)
	// Two SDSs that hold copies of one group (placement is random: with 4
	// SDSs and 16 groups a given pair may share none, but some pair does).
	m, _ := c.Cat.Map(c.PoolID)
	var partners []string
	for i := range c.SDSs {
		for j := i + 1; j < len(c.SDSs) && partners == nil; j++ {
			if sharesGroup(m, c.SDSs[i].ID, c.SDSs[j].ID) {
				partners = []string{c.SDSs[i].Name, c.SDSs[j].Name}
			}
		}
	}
	if partners == nil {
		t.Fatal("test premise: no two SDSs share a group")
	}
	if _, err := c.Store.EnterMaintenance(ctx, partners, model.MaintenanceProtected); err == nil || !strings.Contains(err.Error(), "no complete copy") {
		t.Fatalf("two partner SDSs at once (%v): %v", partners, err)
	}
	for _, x := range c.SDSs {
		if st := sds(x.Name).State; st != model.SDSNormal {
			t.Fatalf("after refusals %s is %s", x.Name, st)
		}
	}

	// Instant maintenance of sds1: its copies go away at once.
	waitFor(t, 5*time.Second, "usage published (2 copies of 32 MiB)", func() bool {
		var n int64
		for _, x := range c.SDSs {
			n += sds(x.Name).Used
		}
		return n == 2*int64(len(data))
	})
	usedBefore := sds("sds1").Used
	resyncBefore := e.totalResync(mon)
	v := e.ok(200, "POST", "/api/v1/sds/sds1/maintenance", op, `{"mode":"instant"}`)
	if mt := v["maintenance"].(map[string]any); v["state"] != model.SDSMaintenance || mt["mode"] != "instant" {
		t.Fatalf("answer %v", v)
	}
	waitFor(t, 10*time.Second, "sds1 in-maintenance", func() bool { return sds("sds1").Maintenance.State == MaintIn })
	// The request's job follows it to the same end.
	jobState := func(kind string) string {
		_, l := e.do("GET", "/api/v1/jobs?object=sds1&kind="+kind, op, "")
		if jobs, _ := l.([]any); len(jobs) > 0 {
			return jobs[0].(map[string]any)["state"].(string)
		}
		return "none"
	}
	if st := jobState(JobMaintenanceEnter); st != JobSucceeded {
		t.Errorf("maintenance-enter job of sds1: %s", st)
	}
	var s sysInfo
	e.get("/api/v1/system", mon, &s)
	if s.Rebuild.DegradedGroups == 0 || s.Health.Status != HealthDegraded {
		t.Fatalf("instant maintenance: %+v", s)
	}
	e.refused(400, "already in maintenance", "POST", "/api/v1/sds/sds1/maintenance", op, `{"mode":"protected"}`)
	if _, mt := e.do("GET", "/metrics", "", ""); !strings.Contains(mt.(string), `mode="instant"} 1`) ||
		!strings.Contains(mt.(string), fmt.Sprintf(`cairn_placement_groups{condition="degraded"} %d`, s.Rebuild.DegradedGroups)) {
		t.Errorf("metrics lack the maintenance or the degraded groups:\n%s", mt)
	}
	// A second SDS that holds the other copy of one of sds1's groups
	// (placement is random: sds2 need not be one).
	partner := ""
	for _, x := range c.SDSs[1:] {
		if partner == "" && sharesGroup(m, c.SDSs[0].ID, x.ID) {
			partner = x.Name
		}
	}
	if partner == "" {
		t.Fatal("test premise: sds1 shares no group")
	}
	e.refused(400, "no complete copy", "POST", "/api/v1/sds/"+partner+"/maintenance", op, `{"mode":"instant"}`)
	if st := sds(partner).State; st != model.SDSNormal {
		t.Fatalf("refused %s is %s", partner, st)
	}
	// Writes keep working while it is away: change 6 chunks, some in
	// groups with a copy on sds1 and some not (placement is random, so the
	// chunks are picked from the map: writing a fixed range left sds1 with
	// nothing to resync in about one run of fifty).
	var onSDS1, elsewhere []int64
	for ch := int64(0); ch < int64(len(data))/MiB; ch++ {
		holds := false
		for _, cp := range m.PGs[placement.PG(vol.ID(), uint64(ch), m.PGCount)] {
			holds = holds || cp.SDSID == c.SDSs[0].ID
		}
		if holds {
			onSDS1 = append(onSDS1, ch)
		} else {
			elsewhere = append(elsewhere, ch)
		}
	}
	if len(onSDS1) == 0 {
		t.Fatal("test premise: no chunk of the volume is in sds1's groups")
	}
	onSDS1, elsewhere = onSDS1[:min(3, len(onSDS1))], elsewhere[:min(3, len(elsewhere))]
	patch := bytes.Repeat([]byte{0xa5}, MiB)
	for _, ch := range append(slices.Clip(onSDS1), elsewhere...) {
		if err := vol.WriteAt(ctx, patch, ch*MiB, 0); err != nil {
			t.Fatalf("write during maintenance: %v", err)
		}
		copy(data[ch*MiB:], patch)
	}
	// Exit: only the changed chunks are resynced.
	v = e.ok(200, "DELETE", "/api/v1/sds/sds1/maintenance", op, "")
	if v["state"] != model.SDSNormal {
		t.Fatalf("exit answer %v", v)
	}
	waitFor(t, 20*time.Second, "resync done", func() bool { return sds("sds1").Maintenance.State == "" && healthy() })
	if st := jobState(JobMaintenanceExit); st != JobSucceeded {
		t.Errorf("maintenance-exit job of sds1: %s", st)
	}
	// Each group's primary publishes its own figure every 500 ms: wait for
	// all of them, then one more round, so that a resync of more than the
	// changed chunks would show.
	want := int64(len(onSDS1)) * MiB
	waitFor(t, 20*time.Second, "resync figures published", func() bool { return e.totalResync(mon)-resyncBefore >= want })
	time.Sleep(1200 * time.Millisecond)
	resynced := e.totalResync(mon) - resyncBefore
	t.Logf("instant maintenance: resynced %d bytes of sds1's %d", resynced, usedBefore)
	// Exactly the changed chunks of sds1's groups: not those elsewhere,
	// not the rest of what sds1 holds.
	if resynced != want {
		t.Errorf("resynced %d bytes; want %d (%d changed chunks in sds1's groups, %d elsewhere; sds1 holds %d)", resynced, want, len(onSDS1), len(elsewhere), usedBefore)
	}
	got := make([]byte, len(data))
	if err := vol.ReadAt(ctx, got, 0); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("data after resync differs (err %v)", err)
	}

	// Protected maintenance of sds2: extra copies are built before its
	// copies go away; no map in between leaves a group with one copy.
	rev := e.rev()
	e.ok(200, "POST", "/api/v1/sds/sds2/maintenance", op, `{"mode":"protected"}`)
	waitFor(t, 20*time.Second, "sds2 in-maintenance", func() bool { return sds("sds2").Maintenance.State == MaintIn })
	checkProtected(t, c, rev+1, c.SDSs[1].ID)
	e.get("/api/v1/system", mon, &s)
	if s.Rebuild.DegradedGroups != 0 {
		t.Errorf("protected maintenance left %d groups degraded", s.Rebuild.DegradedGroups)
	}
	if err := vol.WriteAt(ctx, patch[:MiB], 20*MiB, 0); err != nil {
		t.Fatal(err)
	}
	copy(data[20*MiB:], patch[:MiB])
	e.ok(200, "DELETE", "/api/v1/sds/sds2/maintenance", op, "")
	waitFor(t, 20*time.Second, "sds2 back", func() bool { return sds("sds2").Maintenance.State == "" && healthy() })

	// An SDS failure: degraded, rebuilt, healthy again.
	c.StopSDS(2)
	var sawPending bool
	waitFor(t, 10*time.Second, "degraded after the failure", func() bool {
		e.get("/api/v1/system", mon, &s)
		sawPending = sawPending || s.Rebuild.PendingBytes > 0
		return s.Rebuild.DegradedGroups > 0
	})
	if !strings.Contains(strings.Join(s.Health.Messages, "\n"), "fewer than 2 complete copies") || s.Health.Status != HealthDegraded {
		t.Errorf("health while degraded: %+v", s.Health)
	}
	doneBefore := s.Rebuild.DoneBytes
	waitFor(t, 30*time.Second, "rebuilt", func() bool {
		e.get("/api/v1/system", mon, &s)
		sawPending = sawPending || s.Rebuild.PendingBytes > 0
		return s.Rebuild.DegradedGroups == 0 && s.Rebuild.RebuildingGroups == 0
	})
	waitFor(t, 5*time.Second, "rebuild figures", func() bool {
		e.get("/api/v1/system", mon, &s)
		return s.Rebuild.DoneBytes > doneBefore && s.Rebuild.Percent == 100 && s.Rebuild.ETASeconds != nil && *s.Rebuild.ETASeconds == 0
	})
	t.Logf("rebuild: done %d bytes (saw pending: %v)", s.Rebuild.DoneBytes-doneBefore, sawPending)
	if err := vol.ReadAt(ctx, got, 0); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("data after rebuild differs (err %v)", err)
	}
}

func sharesGroup(m *model.PlacementMap, a, b string) bool {
	for _, pg := range m.PGs {
		ha, hb := false, false
		for _, c := range pg {
			ha = ha || c.SDSID == a
			hb = hb || c.SDSID == b
		}
		if ha && hb {
			return true
		}
	}
	return false
}

// checkProtected reads every version of the pool's map since rev and checks
// that a copy on sdsID is away only while two other copies are ready, and
// that some version had extra copies (more than 2) while they were built.
func checkProtected(t *testing.T, c *testcluster.Cluster, rev int64, sdsID string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cur, err := c.Etcd.Get(ctx, model.MapKey(c.PoolID))
	if err != nil {
		t.Fatal(err)
	}
	wc := c.Etcd.Watch(ctx, model.MapKey(c.PoolID), clientv3.WithRev(rev))
	versions, extra := 0, false
	for resp := range wc {
		if err := resp.Err(); err != nil {
			t.Fatal(err)
		}
		for _, ev := range resp.Events {
			var m model.PlacementMap
			if err := json.Unmarshal(ev.Kv.Value, &m); err != nil {
				t.Fatal(err)
			}
			versions++
			for pg, copies := range m.PGs {
				away, readyOthers := false, 0
				for _, cp := range copies {
					if cp.SDSID == sdsID && cp.State == model.CopyAway {
						away = true
					}
					if cp.SDSID != sdsID && cp.State == model.CopyReady {
						readyOthers++
					}
				}
				if len(copies) > 2 {
					extra = true
				}
				if away && readyOthers < 2 {
					t.Errorf("epoch %d group %d: copy on the SDS away with %d other ready copies: %+v", m.Epoch, pg, readyOthers, copies)
				}
			}
			if ev.Kv.ModRevision >= cur.Kvs[0].ModRevision {
				if !extra {
					t.Errorf("protected maintenance built no extra copies (%d map versions)", versions)
				}
				return
			}
		}
	}
	t.Fatal("map watch ended early")
}

// TestFaultSetMaintenanceAPI: a whole fault set enters and exits at once;
// the system names the MDM leader.
func TestFaultSetMaintenanceAPI(t *testing.T) {
	e := newEnv(t)
	e.cluster()
	op := e.user("op", model.RoleOperator)
	e.ok(201, "POST", "/api/v1/fault-sets", e.admin, `{"name":"empty","protection_domain":"pd1"}`)
	e.fails(400, "holds no SDS", "POST", "/api/v1/fault-sets/empty/maintenance", op, `{"mode":"instant"}`)
	e.fails(400, "not in maintenance", "DELETE", "/api/v1/fault-sets/fs1/maintenance", op, "")
	st, v := e.do("POST", "/api/v1/fault-sets/fs1/maintenance", op, `{"mode":"protected"}`)
	list, _ := v.([]any)
	if st != 200 || len(list) != 2 {
		t.Fatalf("enter: %d %v", st, v)
	}
	for _, x := range list {
		m := x.(map[string]any)
		if m["state"] != model.SDSProtectedMain || m["maintenance"].(map[string]any)["mode"] != "protected" {
			t.Errorf("member %v", m)
		}
	}
	if b := e.ok(200, "GET", "/api/v1/sds/b", op, ""); b["state"] != model.SDSNormal {
		t.Errorf("b is not in fs1 but is %v", b["state"])
	}
	e.fails(400, "already in maintenance", "POST", "/api/v1/sds/a/maintenance", op, `{"mode":"instant"}`)
	st, v = e.do("DELETE", "/api/v1/fault-sets/fs1/maintenance", op, "")
	if list, _ := v.([]any); st != 200 || len(list) != 2 || list[0].(map[string]any)["state"] != model.SDSNormal {
		t.Fatalf("exit: %d %v", st, v)
	}

	// The leader: the oldest campaigner.
	var names []string
	for i := 0; i < 2; i++ {
		sess, err := concurrency.NewSession(e.etcd, concurrency.WithTTL(5))
		if err != nil {
			t.Fatal(err)
		}
		defer sess.Close()
		name := fmt.Sprintf("mdm-%d", i)
		names = append(names, name)
		el := concurrency.NewElection(sess, model.ElectionPrefix)
		if i == 0 {
			if err := el.Campaign(context.Background(), name); err != nil {
				t.Fatal(err)
			}
		} else {
			go el.Campaign(sess.Ctx(), name) // waits behind mdm-0
			time.Sleep(200 * time.Millisecond)
		}
	}
	if s := e.ok(200, "GET", "/api/v1/system", op, ""); s["leader"] != names[0] {
		t.Errorf("leader %v, want %s", s["leader"], names[0])
	}
}
