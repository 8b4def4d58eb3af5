package deploy_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cairn-storage/cairn/appliance/contract"

	"github.com/cairn-storage/cairn/vcenter-plugin/internal/deploy"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/gateway"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/gatewayfake"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/hoststorage"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/inventory"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/plan"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/progress"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/vcsimkit"
)

// grown is a system deployed on the first `deployed` hosts of a kit of
// `hosts`, with full the plan of all of them.
type grown struct {
	*env
	full, deployed *plan.Plan
	saved          []*plan.Plan // what SavePlan got
	mu             sync.Mutex
}

func setupGrown(t *testing.T, hosts, deployed int) *grown {
	t.Helper()
	g := &grown{env: &env{array: gatewayfake.New(), guest: &flakyGuest{}}}
	e := g.env
	e.kit, e.c = vcsimkit.StartTest(t, vcsimkit.Options{Hosts: hosts, LUNs: e.array, Guest: e.array.Hooks(e.guest)})
	ctx := context.Background()
	inv, err := inventory.Collect(ctx, e.c.Client)
	if err != nil {
		t.Fatal(err)
	}
	g.full, err = plan.Suggest(inv, vcsimkit.Datacenter, "cairn1", "cairn-svm", "10.20.0.0/24", "10.30.0.0/24")
	if err != nil {
		t.Fatal(err)
	}
	d := *g.full
	d.Hosts = slices.Clone(g.full.Hosts[:deployed])
	g.deployed = &d
	e.plan = g.deployed
	e.engine = &deploy.Engine{VC: e.c.Client, StateDir: t.TempDir(), ReadyTimeout: 3 * time.Second, PollInterval: 10 * time.Millisecond,
		DataTimeout: 5 * time.Second, Log: progress.NewLog(10000, nil),
		Gateway: func(cfg gateway.Config) (gateway.API, error) { return e.array, nil },
		SavePlan: func(p *plan.Plan) error {
			g.mu.Lock()
			defer g.mu.Unlock()
			g.saved = append(g.saved, p)
			return nil
		}}
	e.finder = find.NewFinder(e.c.Client)
	dc, _ := e.finder.DefaultDatacenter(ctx)
	e.finder.SetDatacenter(dc)
	if err := e.engine.Deploy(ctx, g.deployed); err != nil {
		t.Fatal(err)
	}
	return g
}

// volume creates a thick volume of size GiB in the pool, mapped to host.
func (g *grown) volume(t *testing.T, name string, gib int64, host string) {
	t.Helper()
	ctx := context.Background()
	if _, err := g.array.CreateVolume(ctx, gateway.VolumeSpec{Name: name, Pool: "pool1", Size: gib << 30}); err != nil {
		t.Fatal(err)
	}
	if host != "" {
		if err := g.array.MapVolume(ctx, name, host); err != nil {
			t.Fatal(err)
		}
	}
}

func (g *grown) sendTargets(t *testing.T, host string) []string {
	t.Helper()
	ctx := context.Background()
	hs, err := g.finder.HostSystem(ctx, host)
	if err != nil {
		t.Fatal(err)
	}
	st, err := hoststorage.New(g.c.Client, hs).ISCSI(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return st.SendTargets
}

// stepKeys are the keys a deployment of p records.
func stepKeys(p *plan.Plan) []string {
	want := []string{"cluster/admin", "cluster/system", "cluster/pd", "cluster/pool"}
	for _, fs := range p.FaultSets() {
		want = append(want, "cluster/faultset/"+fs)
	}
	for _, h := range p.Hosts {
		want = append(want, "iscsi/"+h.Name)
		if h.HasSVM() {
			want = append(want, "svm/"+h.Name+"/clone", "svm/"+h.Name+"/configure", "svm/"+h.Name+"/power-on")
		}
		if h.Has(plan.RoleSDS) {
			want = append(want, "cluster/sds/"+h.Name, "cluster/devices/"+h.Name)
		}
	}
	slices.Sort(want)
	return want
}

func (g *grown) checkState(t *testing.T, p *plan.Plan) {
	t.Helper()
	st, err := deploy.LoadState(g.engine.StateDir, p)
	if err != nil {
		t.Fatalf("state does not load with the plan after the change: %v", err)
	}
	if st.Change != nil || !st.Completed || st.LastError != "" {
		t.Fatalf("state after the change: change %+v completed %v error %q", st.Change, st.Completed, st.LastError)
	}
	var got []string
	for k := range st.Steps {
		got = append(got, k)
	}
	slices.Sort(got)
	if want := stepKeys(p); !slices.Equal(got, want) {
		t.Fatalf("state step keys\n got %v\nwant %v", got, want)
	}
}

func (g *grown) events(job string) []progress.Event { return g.engine.Log.Since(0, job) }

func seqOf(evs []progress.Event, host, substr string) int64 {
	for _, e := range evs {
		if e.Host == host && strings.Contains(e.Message, substr) {
			return e.Seq
		}
	}
	return -1
}

func TestExpandThreeToFiveInParallel(t *testing.T) {
	g := setupGrown(t, 5, 3)
	ctx := context.Background()
	g.volume(t, "vol1", 100, "esx-01.cairn.test")
	if err := g.engine.Expand(ctx, g.deployed, g.full); err != nil {
		t.Fatal(err)
	}
	if n := len(g.svms(t)); n != 5 {
		t.Fatalf("%d SVMs after expanding to 5 hosts", n)
	}
	calls := g.array.Calls()
	for prefix, want := range map[string]int{"Bootstrap": 1, "CreatePD": 1, "CreatePool": 1, "CreateFaultSet": 5, "CreateSDS": 5, "AddDevice": 15, "CreateHost": 5} {
		if got := count(calls, prefix); got != want {
			t.Fatalf("%s called %d times, want %d: %v", prefix, got, want, calls)
		}
	}
	sdss, _ := g.array.ListSDS(ctx)
	for _, s := range sdss {
		if !s.Up || s.State != gateway.SDSNormal {
			t.Fatalf("SDS %+v", s)
		}
	}
	for _, h := range g.full.Hosts {
		if ts := g.sendTargets(t, h.Name); len(ts) != 5 {
			t.Fatalf("host %s has send targets %v, want the 5 SVMs", h.Name, ts)
		}
	}
	if n := g.array.Rebalancing(); n != 0 {
		t.Fatalf("expansion ended with %d groups still rebalancing", n)
	}
	evs := g.events(deploy.ExpandJob("cairn1"))
	var pcts []string
	for _, e := range evs {
		if e.Step == "rebalance" && strings.HasPrefix(e.Message, "rebalance ") {
			pcts = append(pcts, e.Message)
		}
	}
	if len(pcts) < 2 {
		t.Fatalf("rebalance progress events: %v", pcts)
	}
	// The two hosts ran side by side: each one's clone started before the
	// other's devices were added.
	h4, h5 := g.full.Hosts[3].Name, g.full.Hosts[4].Name
	c4, c5 := seqOf(evs, h4, "/clone: started"), seqOf(evs, h5, "/clone: started")
	d4, d5 := seqOf(evs, h4, "cluster/devices/"+h4+": done"), seqOf(evs, h5, "cluster/devices/"+h5+": done")
	if c4 < 0 || c5 < 0 || d4 < 0 || d5 < 0 || c5 > d4 || c4 > d5 {
		t.Fatalf("hosts not deployed in parallel: clone %d %d, devices %d %d", c4, c5, d4, d5)
	}
	// The new SVMs joined through the contract: every MDM member and
	// gateway, no bootstrap token; the full target port list.
	joined := 0
	for _, m := range g.svms(t) {
		if !strings.HasSuffix(m.Name, "-esx-04") {
			continue
		}
		joined++
		props := map[string]string{}
		for _, p := range m.Config.VAppConfig.(*types.VmConfigInfo).Property {
			props[p.Id] = p.Value
		}
		if props[contract.KeyMDMMembers] != "cairn-esx-01=10.20.0.11,cairn-esx-02=10.20.0.12,cairn-esx-03=10.20.0.13" ||
			props[contract.KeyGateways] != "10.20.0.11,10.20.0.12" || props[contract.KeyJoinToken] != "" ||
			props[contract.KeyTargetPortID] != "4" || props[contract.KeyTargetPorts] != "1,2,3,4,5" || props[contract.KeyRoles] != "sds,target" {
			t.Fatalf("joining SVM %s has properties %v", m.Name, props)
		}
	}
	if joined != 1 {
		t.Fatalf("%d SVMs on esx-04", joined)
	}
	g.checkState(t, g.full)
	if len(g.saved) != 1 || !slices.EqualFunc(g.saved[0].Hosts, g.full.Hosts, func(a, b plan.Host) bool { return a.Name == b.Name }) {
		t.Fatalf("SavePlan got %d plans", len(g.saved))
	}
	// Again: nothing to add.
	if err := g.engine.Expand(ctx, g.full, g.full); err == nil || !strings.Contains(err.Error(), "adds no host") {
		t.Fatalf("second expansion: %v", err)
	}
}
