package model_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/cairn-storage/cairn/appliance/internal/model"
)

// maintFixture: SDSs a, b, c (c in fault set fs1 with d), one device each,
// all live, and a placement map written by the test.
type maintFixture struct {
	*fixture
	ids  map[string]string // name -> SDS id
	devs map[string]string // SDS name -> device id
	pool string
}

func newMaintFixture(t *testing.T) *maintFixture {
	f := &maintFixture{fixture: newFixture(t), ids: map[string]string{}, devs: map[string]string{}}
	pd := must(f.s.CreatePD(f.ctx, model.PDSpec{Name: "pd1"}))
	fs := must(f.s.CreateFaultSet(f.ctx, model.FaultSetSpec{Name: "fs1", PD: "pd1"}))
	p := must(f.s.CreatePool(f.ctx, model.PoolSpec{Name: "p1", PD: pd.ID}))
	f.pool = p.ID
	for i, n := range []string{"a", "b", "c", "d"} {
		spec := model.SDSSpec{Name: n, PD: "pd1", Address: "127.0.0.1:" + string(rune('1'+i)) + "000"}
		if n == "c" || n == "d" {
			spec.FaultSet = fs.Name
		}
		x := must(f.s.CreateSDS(f.ctx, spec))
		f.ids[n] = x.ID
		d := must(f.s.AddDevice(f.ctx, model.DeviceSpec{SDS: n, Pool: "p1", Path: "/srv/" + n + ".img"}, fakePrepare(&f.calls)))
		f.devs[n] = d.ID
		f.setLive(n, true)
	}
	return f
}

func (f *maintFixture) setLive(name string, live bool) {
	f.t.Helper()
	var err error
	if live {
		_, err = f.c.Put(f.ctx, model.LiveKey(f.ids[name]), `{}`)
	} else {
		_, err = f.c.Delete(f.ctx, model.LiveKey(f.ids[name]))
	}
	if err != nil {
		f.t.Fatal(err)
	}
}

// setMap writes groups given as "a b" (ready copies) or "a b:rebuild". A
// ready copy is written with an empty state, the layout of maps written
// before CopyReady had a name: the store must still read it as ready.
func (f *maintFixture) setMap(groups ...string) {
	f.t.Helper()
	m := model.PlacementMap{PoolID: f.pool, Epoch: 1, PGCount: len(groups)}
	for _, g := range groups {
		var cs []model.CopyRef
		for _, w := range strings.Fields(g) {
			n, state, _ := strings.Cut(w, ":")
			cs = append(cs, model.CopyRef{SDSID: f.ids[n], DeviceID: f.devs[n], State: state})
		}
		m.PGs = append(m.PGs, cs)
	}
	b, _ := json.Marshal(m)
	if _, err := f.c.Put(f.ctx, model.MapKey(f.pool), string(b)); err != nil {
		f.t.Fatal(err)
	}
}

func (f *maintFixture) state(name string) string {
	f.t.Helper()
	return must(f.s.GetSDS(f.ctx, name)).State
}

func (f *maintFixture) refused(err error, want string) {
	f.t.Helper()
	if err == nil || !errors.Is(err, model.ErrInvalid) || !strings.Contains(err.Error(), want) {
		f.t.Fatalf("got %v; want ErrInvalid with %q", err, want)
	}
}

func TestMaintenanceEnterExit(t *testing.T) {
	f := newMaintFixture(t)
	f.setMap("a b", "b c", "a c", "c a")
	if _, err := f.s.EnterMaintenance(f.ctx, []string{"a"}, "sleepy"); !errors.Is(err, model.ErrInvalid) {
		t.Fatalf("bad mode: %v", err)
	}
	set, err := f.s.EnterMaintenance(f.ctx, []string{"a"}, model.MaintenanceInstant)
	if err != nil || len(set) != 1 || set[0].State != model.SDSMaintenance {
		t.Fatalf("enter: %v %+v", err, set)
	}
	if f.state("a") != model.SDSMaintenance {
		t.Fatalf("a is %s", f.state("a"))
	}
	_, err = f.s.EnterMaintenance(f.ctx, []string{"a"}, model.MaintenanceProtected)
	f.refused(err, "already in maintenance")
	// b's partner a is away: group "a b" would have no complete copy.
	rev := f.rev()
	_, err = f.s.EnterMaintenance(f.ctx, []string{f.ids["b"]}, model.MaintenanceProtected)
	f.refused(err, "no complete copy")
	if f.rev() != rev {
		t.Fatal("a refused request changed etcd")
	}
	_, err = f.s.ExitMaintenance(f.ctx, []string{"b"})
	f.refused(err, "not in maintenance")
	if _, err := f.s.ExitMaintenance(f.ctx, []string{"a"}); err != nil {
		t.Fatal(err)
	}
	if f.state("a") != model.SDSNormal {
		t.Fatalf("a is %s after exit", f.state("a"))
	}
	// Two partners at once.
	_, err = f.s.EnterMaintenance(f.ctx, []string{"a", "b"}, model.MaintenanceProtected)
	f.refused(err, "1 placement group would have no complete copy")
	if f.state("a") != model.SDSNormal || f.state("b") != model.SDSNormal {
		t.Fatal("a refused pair changed a state")
	}
	if _, err := f.s.EnterMaintenance(f.ctx, []string{"nosuch"}, model.MaintenanceInstant); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("unknown SDS: %v", err)
	}
}

func TestMaintenanceRefusals(t *testing.T) {
	f := newMaintFixture(t)
	// A group still rebuilding: instant refused, protected allowed (a ready
	// copy on b stays).
	f.setMap("a b c:rebuild", "b c")
	_, err := f.s.EnterMaintenance(f.ctx, []string{"a"}, model.MaintenanceInstant)
	f.refused(err, "wait for rebuild to finish")
	if _, err := f.s.EnterMaintenance(f.ctx, []string{"a"}, model.MaintenanceProtected); err != nil {
		t.Fatalf("protected during rebuild: %v", err)
	}
	if f.state("a") != model.SDSProtectedMain {
		t.Fatalf("a is %s", f.state("a"))
	}
	must(f.s.ExitMaintenance(f.ctx, []string{"a"}))

	// The only other ready copy is on a dead SDS.
	f.setMap("a b", "a c")
	f.setLive("c", false)
	_, err = f.s.EnterMaintenance(f.ctx, []string{"a"}, model.MaintenanceProtected)
	f.refused(err, "no complete copy on a running SDS outside it (e.g. pool p1 placement group 1)")
	f.setLive("c", true)

	// The other copy is only being rebuilt: not complete.
	f.setMap("a b:rebuild")
	_, err = f.s.EnterMaintenance(f.ctx, []string{"a"}, model.MaintenanceProtected)
	f.refused(err, "no complete copy")
}

func TestFaultSetMaintenance(t *testing.T) {
	f := newMaintFixture(t)
	// c and d (fault set fs1) share a group: refused.
	f.setMap("a c", "c d", "b d")
	_, err := f.s.EnterFaultSetMaintenance(f.ctx, "fs1", model.MaintenanceInstant)
	f.refused(err, `fault set "fs1"`)
	// Fault sets keep copies apart: then the whole set may go.
	f.setMap("a c", "b d", "d a", "a b")
	set, err := f.s.EnterFaultSetMaintenance(f.ctx, "fs1", model.MaintenanceProtected)
	if err != nil || len(set) != 2 {
		t.Fatalf("fault set enter: %v %+v", err, set)
	}
	if f.state("c") != model.SDSProtectedMain || f.state("d") != model.SDSProtectedMain {
		t.Fatal("fault set members not in protected maintenance")
	}
	if _, err := f.s.ExitFaultSetMaintenance(f.ctx, "fs1"); err != nil {
		t.Fatal(err)
	}
	if f.state("c") != model.SDSNormal || f.state("d") != model.SDSNormal {
		t.Fatal("fault set members still in maintenance")
	}
	if _, err := f.s.ExitFaultSetMaintenance(f.ctx, "nosuch"); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("unknown fault set: %v", err)
	}
}

// TestMaintenanceGuard: a map change between the decision's read and its
// write fails the transaction's guard; the retry decides on the new map.
func TestMaintenanceGuard(t *testing.T) {
	f := newMaintFixture(t)
	f.setMap("a b")
	calls := 0
	model.SetMaintenanceHook(func() {
		calls++
		if calls == 1 {
			f.setMap("a b:rebuild") // b's copy is no longer complete
		}
	})
	defer model.SetMaintenanceHook(nil)
	_, err := f.s.EnterMaintenance(f.ctx, []string{"a"}, model.MaintenanceProtected)
	f.refused(err, "no complete copy")
	if calls != 1 || f.state("a") != model.SDSNormal {
		t.Fatalf("hook calls %d, a is %s", calls, f.state("a"))
	}
}
