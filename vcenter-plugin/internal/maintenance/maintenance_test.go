package maintenance_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vmware/govmomi"
	"github.com/vmware/govmomi/event"
	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cairn-storage/cairn/vcenter-plugin/internal/datastore"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/deploy"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/gateway"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/gatewayfake"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/hoststorage"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/inventory"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/maintenance"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/plan"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/vcsimkit"
)

type flakyGuest struct {
	failHost atomic.Value // string
}

func (f *flakyGuest) PoweredOn(ctx context.Context, s vcsimkit.SVM) (vcsimkit.GuestReport, error) {
	if h, _ := f.failHost.Load().(string); h == s.Host {
		return vcsimkit.GuestReport{}, errors.New("injected: SVM does not boot")
	}
	return vcsimkit.ReadyGuest{}.PoweredOn(ctx, s)
}
func (f *flakyGuest) PoweredOff(ctx context.Context, s vcsimkit.SVM) error { return nil }

type env struct {
	c      *govmomi.Client
	array  *gatewayfake.Array
	plan   *plan.Plan
	engine *maintenance.Engine
	guest  *flakyGuest
	finder *find.Finder
}

func setup(t *testing.T, faultSets func(i int) string) *env {
	t.Helper()
	ctx := context.Background()
	e := &env{array: gatewayfake.New(), guest: &flakyGuest{}}
	e.guest.failHost.Store("")
	e.array.ResyncTime = 30 * time.Millisecond
	var kit *vcsimkit.Kit
	kit, e.c = vcsimkit.StartTest(t, vcsimkit.Options{LUNs: e.array, Guest: e.array.Hooks(e.guest)})
	_ = kit
	inv, err := inventory.Collect(ctx, e.c.Client)
	if err != nil {
		t.Fatal(err)
	}
	e.plan, err = plan.Suggest(inv, vcsimkit.Datacenter, "cairn1", "cairn-svm", "10.20.0.0/24", "10.30.0.0/24")
	if err != nil {
		t.Fatal(err)
	}
	for i := range e.plan.Hosts {
		e.plan.Hosts[i].FaultSet = faultSets(i)
	}
	dir := t.TempDir()
	dep := &deploy.Engine{VC: e.c.Client, StateDir: dir, ReadyTimeout: 3 * time.Second, PollInterval: 10 * time.Millisecond,
		Gateway: func(gateway.Config) (gateway.API, error) { return e.array, nil }}
	if err := dep.Deploy(ctx, e.plan); err != nil {
		t.Fatal(err)
	}
	e.engine = &maintenance.Engine{VC: e.c.Client, API: e.array, StateDir: dir, ShutdownTimeout: 2 * time.Second,
		ReadyTimeout: 500 * time.Millisecond, ResyncTimeout: 2 * time.Second, PollInterval: 10 * time.Millisecond}
	e.finder = find.NewFinder(e.c.Client)
	dc, _ := e.finder.DefaultDatacenter(ctx)
	e.finder.SetDatacenter(dc)
	return e
}

func perHost(i int) string { return fmt.Sprintf("fs%d", i+1) }

// checker is a Patcher asserting the invariant of a roll: exactly the
// unit's hosts are in maintenance, their SVMs off, their SDSs in
// maintenance, and nothing else is.
type checker struct {
	t      *testing.T
	e      *env
	mu     sync.Mutex
	order  []string
	onUnit func(unit []string)
}

func (c *checker) patch(ctx context.Context, unit []string) error {
	c.mu.Lock()
	c.order = append(c.order, strings.Join(unit, "+"))
	c.mu.Unlock()
	in := map[string]bool{}
	for _, h := range unit {
		in[h] = true
	}
	for _, h := range c.e.plan.Hosts {
		hs, _ := c.e.finder.HostSystem(ctx, h.Name)
		var m mo.HostSystem
		if err := hs.Properties(ctx, hs.Reference(), []string{"runtime"}, &m); err != nil {
			return err
		}
		if m.Runtime.InMaintenanceMode != in[h.Name] {
			c.t.Errorf("during %v: host %s maintenance=%v", unit, h.Name, m.Runtime.InMaintenanceMode)
		}
		vm, _ := c.e.finder.VirtualMachine(ctx, c.e.plan.SVMName(h.Name))
		g, _ := deploy.ReadGuest(ctx, vm)
		if (g.PowerState == types.VirtualMachinePowerStatePoweredOff) != in[h.Name] {
			c.t.Errorf("during %v: SVM of %s is %s", unit, h.Name, g.PowerState)
		}
		s, _ := c.e.array.GetSDS(ctx, deploy.SDSName(h.Name))
		if (s.State == gateway.SDSMaintenance) != in[h.Name] {
			c.t.Errorf("during %v: sds of %s is %s", unit, h.Name, s.State)
		}
	}
	if c.onUnit != nil {
		c.onUnit(unit)
	}
	return nil
}

func TestRollByHost(t *testing.T) {
	e := setup(t, perHost)
	ctx := context.Background()
	ck := &checker{t: t, e: e}
	e.engine.Patch = ck.patch
	if err := e.engine.Run(ctx, e.plan, maintenance.Request{By: maintenance.ByHost}); err != nil {
		t.Fatal(err)
	}
	want := "esx-01.cairn.test,esx-02.cairn.test,esx-03.cairn.test,esx-04.cairn.test"
	if got := strings.Join(ck.order, ","); got != want {
		t.Fatalf("order %s", got)
	}
	var seq []string
	for _, c := range e.array.Calls() {
		if strings.Contains(c, "SDSMaintenance") {
			seq = append(seq, c)
		}
	}
	if len(seq) != 8 || !strings.HasPrefix(seq[0], "EnterSDSMaintenance cairn-esx-01:instant") || seq[1] != "ExitSDSMaintenance cairn-esx-01" || seq[7] != "ExitSDSMaintenance cairn-esx-04" {
		t.Fatalf("SDS maintenance sequence %v", seq)
	}
	if sys, _ := e.array.System(ctx); sys.Health.Status != gateway.HealthOK {
		t.Fatalf("health after roll %s", sys.Health.Status)
	}
	// The roll is visible in vCenter's events of the hosts.
	hs, _ := e.finder.HostSystem(ctx, "esx-02.cairn.test")
	evs, err := event.NewManager(e.c.Client).QueryEvents(ctx, types.EventFilterSpec{Entity: &types.EventFilterSpecByEntity{Entity: hs.Reference(), Recursion: types.EventFilterSpecRecursionOptionSelf}})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, ev := range evs {
		found = found || strings.Contains(ev.GetEvent().FullFormattedMessage, "Cairn: maintenance: resync: done")
	}
	if !found {
		t.Fatal("no Cairn maintenance event on host 2")
	}
}

func TestRollByFaultSet(t *testing.T) {
	e := setup(t, func(i int) string { return []string{"rack-a", "rack-a", "rack-b", "rack-b"}[i] })
	ck := &checker{t: t, e: e}
	e.engine.Patch = ck.patch
	if err := e.engine.Run(context.Background(), e.plan, maintenance.Request{By: maintenance.ByFaultSet}); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(ck.order, ","); got != "esx-01.cairn.test+esx-02.cairn.test,esx-03.cairn.test+esx-04.cairn.test" {
		t.Fatalf("order %s", got)
	}
}

func TestRollStopsWhenSVMDoesNotComeBackAndResumes(t *testing.T) {
	e := setup(t, perHost)
	ctx := context.Background()
	ck := &checker{t: t, e: e, onUnit: func(unit []string) {
		if unit[0] == "esx-03.cairn.test" && len(unit) == 1 {
			e.guest.failHost.Store("esx-03.cairn.test")
		}
	}}
	e.engine.Patch = ck.patch
	req := maintenance.Request{By: maintenance.ByHost}
	err := e.engine.Run(ctx, e.plan, req)
	if err == nil || !strings.Contains(err.Error(), "hosts esx-03.cairn.test: svm-power-on: the SVM did not come back") || !strings.Contains(err.Error(), "then resume") {
		t.Fatalf("first run: %v", err)
	}
	st, _ := maintenance.LoadState(e.engine.StateDir, "cairn1")
	if st.DoneUnits != 2 || st.Completed {
		t.Fatalf("state %+v", st)
	}
	// Host 4 was not touched; host 3's SDS is still in maintenance.
	if s, _ := e.array.GetSDS(ctx, "cairn-esx-04"); s.State != gateway.SDSNormal {
		t.Fatal("host 4 touched after the anomaly")
	}
	if s, _ := e.array.GetSDS(ctx, "cairn-esx-03"); s.State != gateway.SDSMaintenance {
		t.Fatalf("sds 3 state %s", s.State)
	}
	// A different request does not silently replace the unfinished roll.
	if err := e.engine.Run(ctx, e.plan, maintenance.Request{By: maintenance.ByFaultSet}); err == nil || !strings.Contains(err.Error(), "unfinished roll") {
		t.Fatalf("other request: %v", err)
	}
	e.guest.failHost.Store("") // the operator fixed the SVM
	if err := e.engine.Run(ctx, e.plan, req); err != nil {
		t.Fatalf("resume: %v", err)
	}
	if got := strings.Join(ck.order, ","); got != "esx-01.cairn.test,esx-02.cairn.test,esx-03.cairn.test,esx-04.cairn.test" {
		t.Fatalf("order %s (host 3 must be patched once)", got)
	}
}

func TestRollRefusesUnhealthyCluster(t *testing.T) {
	e := setup(t, perHost)
	ctx := context.Background()
	s, _ := e.array.GetSDS(ctx, "cairn-esx-02")
	if err := e.array.EnterSDSMaintenance(ctx, s.ID, gateway.MaintenanceInstant); err != nil {
		t.Fatal(err)
	}
	e.engine.Patch = func(context.Context, []string) error { t.Error("patched an unhealthy cluster"); return nil }
	err := e.engine.Run(ctx, e.plan, maintenance.Request{By: maintenance.ByHost})
	if err == nil || !strings.Contains(err.Error(), "health: cluster health is \"degraded\" (SDS cairn-esx-02 is in maintenance)") {
		t.Fatalf("got %v", err)
	}
}

func TestRollHookAndOperator(t *testing.T) {
	e := setup(t, perHost)
	ctx := context.Background()
	out := filepath.Join(t.TempDir(), "patched")
	req := maintenance.Request{By: maintenance.ByHost, Hosts: []string{"esx-02.cairn.test", "esx-01.cairn.test"},
		Hook: []string{"sh", "-c", `echo "$CAIRN_HOSTS" >> "` + out + `"`}}
	if err := e.engine.Run(ctx, e.plan, req); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(out)
	if string(b) != "esx-02.cairn.test\nesx-01.cairn.test\n" {
		t.Fatalf("hook saw %q", b)
	}
	// A failing hook stops the roll with its output.
	bad := maintenance.Request{By: maintenance.ByHost, Hosts: []string{"esx-03.cairn.test"}, Hook: []string{"sh", "-c", "echo no space left >&2; exit 3"}}
	if err := e.engine.Run(ctx, e.plan, bad); err == nil || !strings.Contains(err.Error(), "no space left") {
		t.Fatalf("failing hook: %v", err)
	}
	_ = os.Remove(filepath.Join(e.engine.StateDir, "maintenance-cairn1.json"))
	// Recover host 3 by hand for the operator part.
	hs, _ := e.finder.HostSystem(ctx, "esx-03.cairn.test")
	task, _ := hs.ExitMaintenanceMode(ctx, 0)
	_ = task.Wait(ctx)
	vm, _ := e.finder.VirtualMachine(ctx, e.plan.SVMName("esx-03.cairn.test"))
	task, _ = vm.PowerOn(ctx)
	_ = task.Wait(ctx)
	s, _ := e.array.GetSDS(ctx, "cairn-esx-03")
	time.Sleep(50 * time.Millisecond)
	_ = e.array.ExitSDSMaintenance(ctx, s.ID)

	for sys, _ := e.array.System(ctx); sys.Health.Status != gateway.HealthOK; sys, _ = e.array.System(ctx) {
		time.Sleep(10 * time.Millisecond)
	}
	// Operator step: the roll waits until Continue.
	if err := e.engine.Continue("cairn1"); err == nil {
		t.Fatal("Continue accepted with no roll waiting")
	}
	done := make(chan error, 1)
	go func() {
		done <- e.engine.Run(ctx, e.plan, maintenance.Request{By: maintenance.ByHost, Hosts: []string{"esx-04.cairn.test"}})
	}()
	deadline := time.Now().Add(10 * time.Second)
	for e.engine.Continue("cairn1") != nil {
		select {
		case err := <-done:
			t.Fatalf("roll ended without waiting for the operator: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("roll never waited for the operator")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// A roll refuses to take an SVM down while a host reaches a Cairn LUN with
// MRU (one working path): it names the LUN, the host and the fix; once the
// LUN is round robin again, the roll goes ahead.
func TestRollRefusesSinglePathLUN(t *testing.T) {
	e := setup(t, perHost)
	ctx := context.Background()
	hosts := []string{}
	for _, h := range e.plan.Hosts {
		hosts = append(hosts, h.Name)
	}
	ds := &datastore.Engine{VC: e.c.Client, API: e.array, RescanTimeout: time.Second, PollInterval: 10 * time.Millisecond}
	res, err := ds.Create(ctx, datastore.Request{Datacenter: vcsimkit.Datacenter, Volume: "vmfs1", Pool: "pool1", SizeGiB: 8, Thin: true, Hosts: hosts})
	if err != nil {
		t.Fatal(err)
	}
	hs, _ := e.finder.HostSystem(ctx, hosts[1])
	h := hoststorage.New(e.c.Client, hs)
	paths, err := h.CairnPaths(ctx)
	if err != nil || len(paths) != 1 || paths[0].Policy != hoststorage.PolicyRoundRobin {
		t.Fatalf("after the datastore job: %+v %v", paths, err)
	}
	ss, _ := hs.ConfigManager().StorageSystem(ctx)
	setPolicy := func(p string) {
		t.Helper()
		req := types.SetMultipathLunPolicy{This: ss.Reference(), LunId: paths[0].LUID, Policy: &types.HostMultipathInfoLogicalUnitPolicy{Policy: p}}
		if _, err := methods.SetMultipathLunPolicy(ctx, e.c.Client, &req); err != nil {
			t.Fatal(err)
		}
	}
	setPolicy("VMW_PSP_MRU")
	e.engine.Patch = func(context.Context, []string) error { t.Error("patched with a single-path LUN"); return nil }
	err = e.engine.Run(ctx, e.plan, maintenance.Request{By: maintenance.ByHost})
	want := "host " + hosts[1] + ": LUN naa." + strings.ToLower(res.WWN) + " uses path selection \"VMW_PSP_MRU\""
	if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "then resume") {
		t.Fatalf("got %v, want it to contain %q", err, want)
	}
	setPolicy(hoststorage.PolicyRoundRobin)
	e.engine.Patch = func(context.Context, []string) error { return nil }
	if err := e.engine.Run(ctx, e.plan, maintenance.Request{By: maintenance.ByHost}); err != nil {
		t.Fatalf("round robin restored: %v", err)
	}
}
