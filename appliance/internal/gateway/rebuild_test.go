package gateway

import (
	"testing"
	"time"

	"github.com/cairn-storage/cairn/appliance/internal/model"
)

// TestRebuildProgress: rate from two publications, percent of the running
// work (not of everything copied since start), ETA, counter reset.
func TestRebuildProgress(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	w := &world{sdss: map[string]model.SDS{"a": {ID: "a"}}, live: map[string]model.SDSLive{"a": {}}, stats: map[string]model.SDSStats{}}
	pub := func(at time.Duration, pending, done int64) {
		w.stats["a"] = model.SDSStats{SDSID: "a", Time: t0.Add(at), Rebuild: model.RebuildStats{PendingBytes: pending, DoneBytes: done}}
	}
	var p progress
	pub(0, 0, 1000*MiB) // earlier work, finished
	if r := p.rebuildView(w); r.Percent != 100 || r.ETASeconds == nil || *r.ETASeconds != 0 {
		t.Fatalf("idle: %+v", r)
	}
	pub(time.Second, 100*MiB, 1000*MiB) // new work starts
	r := p.rebuildView(w)
	if r.Percent != 0 || r.RateBytesPerSecond != 0 || r.ETASeconds != nil {
		t.Fatalf("start: %+v", r)
	}
	pub(3*time.Second, 60*MiB, 1040*MiB)
	r = p.rebuildView(w)
	if r.RateBytesPerSecond != 20*MiB || r.Percent != 40 || r.ETASeconds == nil || *r.ETASeconds != 3 {
		t.Fatalf("running: rate %v percent %v eta %v", r.RateBytesPerSecond, r.Percent, r.ETASeconds)
	}
	// The same publication read again changes nothing.
	if r2 := p.rebuildView(w); r2.RateBytesPerSecond != r.RateBytesPerSecond || r2.Percent != r.Percent {
		t.Fatalf("re-read: %+v", r2)
	}
	// The SDS restarted: counters start over, no negative rate.
	pub(4*time.Second, 10*MiB, 0)
	if r = p.rebuildView(w); r.RateBytesPerSecond != 0 || r.Percent != 0 {
		t.Fatalf("after restart: %+v", r)
	}
	// A dead SDS's figures do not count.
	delete(w.live, "a")
	if r = p.rebuildView(w); r.PendingBytes != 0 || r.Percent != 100 {
		t.Fatalf("dead SDS: %+v", r)
	}
}

// TestGroupCounts classifies placement groups and SDS maintenance states.
func TestGroupCounts(t *testing.T) {
	w := &world{
		sdss: map[string]model.SDS{"a": {ID: "a", State: model.SDSNormal}, "b": {ID: "b", State: model.SDSNormal},
			"c": {ID: "c", State: model.SDSNormal}, "m": {ID: "m", State: model.SDSProtectedMain}, "d": {ID: "d", State: model.SDSNormal}},
		live:    map[string]model.SDSLive{"a": {}, "b": {}, "c": {}, "m": {}},
		devices: map[string]model.Device{},
	}
	for _, id := range []string{"a", "b", "c", "m", "d"} {
		w.devices[id+"1"] = model.Device{ID: id + "1", SDSID: id, State: model.DeviceNormal}
	}
	cp := func(sds, state string) model.CopyRef {
		return model.CopyRef{SDSID: sds, DeviceID: sds + "1", State: state}
	}
	w.maps = map[string]model.PlacementMap{"p": {PGs: [][]model.CopyRef{
		{cp("a", model.CopyReady), cp("b", model.CopyReady)},                             // healthy
		{cp("a", model.CopyReady), cp("d", model.CopyReady)},                             // d is dead: degraded
		{cp("a", model.CopyReady), cp("c", model.CopyRebuild)},                           // rebuilding, degraded
		{cp("a", model.CopyReady), cp("b", model.CopyReady), cp("c", model.CopyRebuild)}, // rebalancing
		{cp("a", model.CopyReady), cp("m", model.CopyReady), cp("b", model.CopyRebuild)}, // protected maintenance: not a rebalance
		{cp("b", model.CopyReady), cp("c", model.CopyResync)},                            // resyncing, degraded
		{cp("c", model.CopyReady), cp("m", model.CopyAway), cp("a", model.CopyReady)},    // m's copy away
	}}}
	var r rebuildView
	w.groupCounts(&r)
	if r.DegradedGroups != 3 || r.RebuildingGroups != 3 || r.ResyncingGroups != 1 || r.RebalancingGroups != 1 {
		t.Fatalf("%+v", r)
	}
	if v := w.maintenanceOf(w.sdss["m"]); v.Mode != "protected" || v.State != MaintEntering {
		t.Errorf("m: %+v", v)
	}
	w.maps["p"].PGs[4][1].State = model.CopyAway
	if v := w.maintenanceOf(w.sdss["m"]); v.State != MaintIn {
		t.Errorf("m with every copy away: %+v", v)
	}
	if v := w.maintenanceOf(w.sdss["c"]); v.Mode != "" || v.State != MaintResyncing {
		t.Errorf("c: %+v", v)
	}
	if v := w.maintenanceOf(w.sdss["b"]); v.Mode != "" || v.State != "" {
		t.Errorf("b: %+v", v)
	}
}
