package placement

import (
	"fmt"
	"testing"

	"github.com/cairn-storage/cairn/appliance/internal/model"
)

// world: 4 SDSs (s0..s3) with one device each (d0..d3), all live.
func world() *View {
	v := &View{SDS: map[string]SDSView{}, DeviceOK: map[string]bool{}, Done: map[string]uint64{}, Epoch: 10}
	for i := 0; i < 4; i++ {
		s, d := fmt.Sprintf("s%d", i), fmt.Sprintf("d%d", i)
		v.SDS[s] = SDSView{Live: true, FaultDomain: "sds:" + s}
		v.DeviceOK[d] = true
		v.Cands = append(v.Cands, Candidate{DeviceID: d, SDSID: s, FaultDomain: "sds:" + s, Weight: 1})
	}
	return v
}

func ref(i int, state string) model.CopyRef {
	return model.CopyRef{SDSID: fmt.Sprintf("s%d", i), DeviceID: fmt.Sprintf("d%d", i), State: state}
}

func states(cs []model.CopyRef) string {
	out := ""
	for _, c := range cs {
		st := c.State
		if st == "" {
			st = "ready"
		}
		out += fmt.Sprintf("%s:%s ", c.SDSID, st)
	}
	return out
}

func dropCand(v *View, sds string) {
	var keep []Candidate
	for _, c := range v.Cands {
		if c.SDSID != sds {
			keep = append(keep, c)
		}
	}
	v.Cands = keep
}

func TestHealDeadPrimary(t *testing.T) {
	v := world()
	v.SDS["s0"] = SDSView{Live: false, FaultDomain: "sds:s0"}
	dropCand(v, "s0")
	next := Heal(7, []model.CopyRef{ref(0, model.CopyReady), ref(1, model.CopyReady)}, v)
	if len(next) != 2 || next[0].SDSID != "s1" || next[0].State != model.CopyReady || next[1].State != model.CopyRebuild || next[1].SDSID == "s0" || next[1].Since != 10 {
		t.Fatalf("after primary death: %s", states(next))
	}
	// The fill is reported done: ready.
	v.Epoch = 11
	v.Done[FillKey(7, next[1].DeviceID)] = 10
	next2 := Heal(7, next, v)
	if len(next2) != 2 || next2[0].State != model.CopyReady || next2[1].State != model.CopyReady || next2[0].SDSID == next2[1].SDSID {
		t.Fatalf("after fill: %s", states(next2))
	}
	// A fill reported for an older state does not count.
	v2 := world()
	v2.Done[FillKey(7, "d2")] = 3
	n3 := Heal(7, []model.CopyRef{ref(1, model.CopyReady), {SDSID: "s2", DeviceID: "d2", State: model.CopyRebuild, Since: 5}}, v2)
	if n3[1].State != model.CopyRebuild {
		t.Fatalf("stale completion accepted: %s", states(n3))
	}
}

func TestHealInstantMaintenanceRoundTrip(t *testing.T) {
	v := world()
	v.SDS["s1"] = SDSView{Live: true, Mode: ModeInstant, FaultDomain: "sds:s1"}
	dropCand(v, "s1")
	next := Heal(3, []model.CopyRef{ref(1, model.CopyReady), ref(2, model.CopyReady)}, v)
	if states(next) != "s2:ready s1:away " {
		t.Fatalf("enter instant maintenance: %s", states(next))
	}
	// Shut down while away: still away, nothing rebuilt.
	v.SDS["s1"] = SDSView{Live: false, Mode: ModeInstant, FaultDomain: "sds:s1"}
	if n := Heal(3, next, v); states(n) != "s2:ready s1:away " {
		t.Fatalf("away and down: %s", states(n))
	}
	// Back: resync, then ready once the primary reports it.
	v = world()
	v.Epoch = 20
	n := Heal(3, next, v)
	if states(n) != "s2:ready s1:resync " || n[1].Since != 20 {
		t.Fatalf("exit maintenance: %s", states(n))
	}
	v.Done[FillKey(3, "d1")] = 20
	v.Epoch = 21
	if n2 := Heal(3, n, v); n2[1].State != model.CopyReady {
		t.Fatalf("after resync: %s", states(n2))
	}
}

func TestHealProtectedMaintenance(t *testing.T) {
	v := world()
	v.SDS["s1"] = SDSView{Live: true, Mode: ModeProtected, FaultDomain: "sds:s1"}
	dropCand(v, "s1")
	n := Heal(5, []model.CopyRef{ref(1, model.CopyReady), ref(2, model.CopyReady)}, v)
	// s1 keeps serving until an extra copy is ready.
	if len(n) != 3 || n[0].SDSID != "s1" || n[0].State != model.CopyReady || n[2].State != model.CopyRebuild {
		t.Fatalf("protected, phase 1: %s", states(n))
	}
	v.Done[FillKey(5, n[2].DeviceID)] = v.Epoch
	v.Epoch++
	n = Heal(5, n, v) // the extra copy is ready
	n = Heal(5, n, v) // now s1 can go away
	var away, ready int
	for _, c := range n {
		switch c.State {
		case model.CopyAway:
			away++
			if c.SDSID != "s1" {
				t.Fatalf("wrong copy away: %s", states(n))
			}
		case model.CopyReady:
			ready++
		}
	}
	if away != 1 || ready != 2 || n[0].State != model.CopyReady || n[0].SDSID == "s1" {
		t.Fatalf("protected, phase 2: %s", states(n))
	}
}

func TestHealRefusesToInventData(t *testing.T) {
	v := world()
	for _, s := range []string{"s0", "s1"} {
		v.SDS[s] = SDSView{Live: false, FaultDomain: "sds:" + s}
		dropCand(v, s)
	}
	n := Heal(1, []model.CopyRef{ref(0, model.CopyReady), ref(1, model.CopyReady)}, v)
	if states(n) != "s0:ready s1:ready " {
		t.Fatalf("both copies unreachable: the group must wait for them, got %s", states(n))
	}
	// Only a copy being filled survives: nothing to fill it from.
	n = Heal(1, []model.CopyRef{ref(0, model.CopyReady), {SDSID: "s2", DeviceID: "d2", State: model.CopyRebuild, Since: 1}}, v)
	if len(n) != 2 || n[0].SDSID != "s0" || n[1].State != model.CopyRebuild {
		t.Fatalf("partial copy promoted: %s", states(n))
	}
}

func TestHealRebalanceMovesTowardIdeal(t *testing.T) {
	v := world()
	v.Rebalance = true
	moved := 0
	for pg := 0; pg < 64; pg++ {
		ideal := Choose(pg, v.Cands)
		cur := []model.CopyRef{ideal[0], ideal[1]}
		if n := Heal(pg, cur, v); len(n) != 2 {
			t.Fatalf("pg %d: ideal placement changed: %s", pg, states(n))
		}
		// A group placed elsewhere gets one extra copy toward the ideal.
		other := []model.CopyRef{}
		for i := 0; i < 4 && len(other) < 2; i++ {
			r := ref(i, model.CopyReady)
			if r.DeviceID != ideal[0].DeviceID && r.DeviceID != ideal[1].DeviceID {
				other = append(other, r)
			}
		}
		n := Heal(pg, other, v)
		if len(n) == 3 && n[2].State == model.CopyRebuild {
			moved++
		}
	}
	if moved != 64 {
		t.Fatalf("only %d of 64 misplaced groups started moving", moved)
	}
}

// A group never holds two copies on one SDS, whatever the devices' scores.
func TestHealNeverTwoCopiesOnOneSDS(t *testing.T) {
	v := &View{SDS: map[string]SDSView{}, DeviceOK: map[string]bool{}, Done: map[string]uint64{}, Epoch: 5, Rebalance: true}
	for s := 0; s < 3; s++ {
		sid := fmt.Sprintf("s%d", s)
		v.SDS[sid] = SDSView{Live: true, FaultDomain: "sds:" + sid}
		for d := 0; d < 4; d++ {
			did := fmt.Sprintf("d%d-%d", s, d)
			v.DeviceOK[did] = true
			v.Cands = append(v.Cands, Candidate{DeviceID: did, SDSID: sid, FaultDomain: "sds:" + sid, Weight: 1})
		}
	}
	for pg := 0; pg < 256; pg++ {
		// start from a placement on device 0 of s0 and s1
		cur := []model.CopyRef{{SDSID: "s0", DeviceID: "d0-0", State: model.CopyReady}, {SDSID: "s1", DeviceID: "d1-0", State: model.CopyReady}}
		for step := 0; step < 6; step++ {
			cur = Heal(pg, cur, v)
			seen := map[string]bool{}
			for _, c := range cur {
				if seen[c.SDSID] {
					t.Fatalf("pg %d step %d: two copies on %s: %s", pg, step, c.SDSID, states(cur))
				}
				seen[c.SDSID] = true
				if c.State == model.CopyRebuild {
					v.Done[FillKey(pg, c.DeviceID)] = c.Since
				}
			}
			v.Epoch++
		}
		if len(cur) != 2 {
			t.Fatalf("pg %d did not settle: %s", pg, states(cur))
		}
	}
}
