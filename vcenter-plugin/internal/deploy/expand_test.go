package deploy_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/vim25/mo"
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
		DataTimeout: 5 * time.Second, RebalanceQuiet: 50 * time.Millisecond, Log: progress.NewLog(10000, nil),
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
	want := []string{"cluster/admin", "cluster/system", "cluster/service-users", "cluster/pd", "cluster/pool"}
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

// checkJoinTokens checks that the SVMs of the hosts added to a running
// system each got a join token of their own in cairn.cluster.join_token,
// created by the gateway for exactly their certificate roles and spent by
// their first boot, and that no join token is in the state directory (the
// state file, or anything else the engine wrote there).
func (g *grown) checkJoinTokens(t *testing.T, added []string, roles []string) {
	t.Helper()
	ctx := context.Background()
	records := g.array.JoinTokens()
	var tokens []string
	for _, h := range added {
		vm, err := g.finder.VirtualMachine(ctx, g.full.SVMName(h))
		if err != nil {
			t.Fatal(err)
		}
		var m mo.VirtualMachine
		if err := vm.Properties(ctx, vm.Reference(), []string{"config"}, &m); err != nil {
			t.Fatal(err)
		}
		props := map[string]string{}
		for _, p := range m.Config.VAppConfig.(*types.VmConfigInfo).Property {
			props[p.Id] = p.Value
		}
		tok := props[contract.KeyJoinToken]
		parts := strings.Split(tok, ".")
		if len(parts) != 4 || parts[0] != "cj1" {
			t.Fatalf("SVM on %s: join token property %q is no join token", h, tok)
		}
		rec, ok := records[parts[1]]
		if !ok || !slices.Equal(rec.Roles, roles) || rec.SpentBy != plan.SVMHostname(h) {
			t.Fatalf("SVM on %s: join token %s: record %+v (created %v), want roles %v spent by %s", h, parts[1], rec, ok, roles, plan.SVMHostname(h))
		}
		if _, err := contract.Validate(props); err != nil {
			t.Fatalf("SVM on %s: first boot would refuse its settings: %v", h, err)
		}
		tokens = append(tokens, tok)
	}
	if len(slices.Compact(slices.Sorted(slices.Values(tokens)))) != len(added) {
		t.Fatalf("the new SVMs share join tokens: %v", tokens)
	}
	files, err := os.ReadDir(g.engine.StateDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(g.engine.StateDir, f.Name()))
		if err != nil {
			t.Fatal(err)
		}
		for _, tok := range tokens {
			secret := strings.Split(tok, ".")[2]
			if strings.Contains(string(b), secret) || strings.Contains(string(b), "cj1.") {
				t.Fatalf("%s holds a join token", f.Name())
			}
		}
	}
}

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
	// Each new SVM was recorded in the model before its clone (peer sync on
	// the older SVMs admits it before it boots), as its own peersync would.
	recs := g.array.SVMs()
	for i, h := range []string{h4, h5} {
		r4 := seqOf(evs, h, "/svmrecord/"+h+": done")
		if r4 < 0 || r4 > []int64{c4, c5}[i] {
			t.Fatalf("SVM of %s recorded at event %d, its clone started at %d", h, r4, []int64{c4, c5}[i])
		}
	}
	want := []string{g.full.Hosts[3].SVMIP}
	if d := g.full.Hosts[3].DataIP; d != "" {
		want = append(want, d)
	}
	if r := recs["cairn-esx-04"]; len(recs) != 2 || !slices.Equal(r.Addresses, want) || want[0] != "10.20.0.14" ||
		r.TargetPort != 4 || !slices.Equal(r.Roles, []string{"sds", "target"}) {
		t.Fatalf("SVM records after the expansion: %+v", recs)
	}
	// The new SVMs joined through the contract: every MDM member and
	// gateway, a join token of their own, not the bootstrap token; the full
	// target port list.
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
			props[contract.KeyGateways] != "10.20.0.11,10.20.0.12" || !strings.HasPrefix(props[contract.KeyJoinToken], "cj1.") ||
			props[contract.KeyTargetPortID] != "4" || props[contract.KeyTargetPorts] != "1,2,3,4,5" || props[contract.KeyRoles] != "sds,target" {
			t.Fatalf("joining SVM %s has properties %v", m.Name, props)
		}
	}
	if joined != 1 {
		t.Fatalf("%d SVMs on esx-04", joined)
	}
	g.checkJoinTokens(t, []string{h4, h5}, []string{"sds", "target"})
	if n := count(calls, "CreateJoinToken sds,target"); n != 2 {
		t.Fatalf("%d join tokens created for 2 new SVMs: %v", n, calls)
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

// A failure in the middle stops the expansion; sent again, it resumes and
// does not redo what was done.
func TestExpandResumesWithoutRedoing(t *testing.T) {
	g := setupGrown(t, 5, 3)
	ctx := context.Background()
	g.volume(t, "vol1", 100, "")
	g.array.FailNext("AddDevice", errors.New("injected: device busy"))
	err := g.engine.Expand(ctx, g.deployed, g.full)
	if err == nil || !strings.Contains(err.Error(), "injected: device busy") {
		t.Fatalf("first run: %v", err)
	}
	st, err := deploy.LoadState(g.engine.StateDir, g.deployed)
	if err != nil || st.Change == nil || st.Change.Kind != deploy.ChangeExpand || !strings.Contains(st.LastError, "injected") {
		t.Fatalf("state after the failure: %+v %v", st, err)
	}
	if len(g.saved) != 0 {
		t.Fatal("the plan was saved by a failed expansion")
	}
	// Another change waits for this one.
	other := *g.full
	other.Hosts = other.Hosts[:4]
	if err := g.engine.Expand(ctx, g.deployed, &other); err == nil || !strings.Contains(err.Error(), "has an expansion in progress") {
		t.Fatalf("another expansion during an expansion: %v", err)
	}
	before := g.array.Calls()
	clonesBefore := count(eventsMsgs(g.events(deploy.ExpandJob("cairn1"))), "svm/esx-04.cairn.test/clone: done")
	if err := g.engine.Expand(ctx, g.deployed, g.full); err != nil {
		t.Fatalf("resume: %v", err)
	}
	after := g.array.Calls()
	for _, prefix := range []string{"CreateSDS", "CreateFaultSet"} {
		if count(after, prefix) != 5 {
			t.Fatalf("%s called %d times in all: %v", prefix, count(after, prefix), after)
		}
	}
	if got := count(after, "AddDevice"); got != 15 {
		t.Fatalf("AddDevice called %d times in all, want 15 (before the resume: %d)", got, count(before, "AddDevice"))
	}
	msgs := eventsMsgs(g.events(deploy.ExpandJob("cairn1")))
	if clonesBefore != 1 || count(msgs, "svm/esx-04.cairn.test/clone: done") != 1 || count(msgs, "svm/esx-04.cairn.test/clone: already done") != 1 {
		t.Fatalf("esx-04's clone was redone or not skipped: %v", msgs)
	}
	if n := len(g.svms(t)); n != 5 {
		t.Fatalf("%d SVMs", n)
	}
	g.checkState(t, g.full)
}

func eventsMsgs(evs []progress.Event) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.Message)
	}
	return out
}

func TestExpandRefusesOtherEdits(t *testing.T) {
	g := setupGrown(t, 5, 3)
	ctx := context.Background()
	edit := func(f func(p *plan.Plan)) *plan.Plan {
		b, _ := json.Marshal(g.full)
		var p plan.Plan
		_ = json.Unmarshal(b, &p)
		f(&p)
		return &p
	}
	for name, c := range map[string]struct {
		p    *plan.Plan
		want string
	}{
		"spare":        {edit(func(p *plan.Plan) { p.StoragePool.SparePercent = 20 }), "storage_pool cannot change"},
		"template":     {edit(func(p *plan.Plan) { p.Template = "cairn-svm-2" }), "one version"},
		"host removed": {edit(func(p *plan.Plan) { p.Hosts = slices.Delete(p.Hosts, 1, 2) }), "hosts/esx-02.cairn.test/remove"},
		"host moved":   {edit(func(p *plan.Plan) { p.Hosts[0], p.Hosts[3] = p.Hosts[3], p.Hosts[0] }), "deployed order"},
		"device added": {edit(func(p *plan.Plan) { p.Hosts[0].Devices = p.Hosts[0].Devices[:2] }), "cairnctl device create"},
		"new mdm":      {edit(func(p *plan.Plan) { p.Hosts[3].Roles = []string{"mdm", "sds", "target"} }), "cairnctl mdm add"},
		"new gateway":  {edit(func(p *plan.Plan) { p.Hosts[4].Roles = []string{"sds", "target", "gateway"} }), "role gateway"},
		"nothing":      {g.deployed, "adds no host"},
	} {
		err := g.engine.Expand(ctx, g.deployed, c.p)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", name, err, c.want)
		}
	}
	if n := len(g.svms(t)); n != 3 {
		t.Fatalf("refused edits deployed SVMs: %d", n)
	}
	g.checkState(t, g.deployed)
	// A plan the inventory refuses stops before any change too.
	bad := edit(func(p *plan.Plan) { p.Hosts[3].SVMIP = p.Hosts[0].SVMIP })
	if err := g.engine.Expand(ctx, g.deployed, bad); err == nil {
		t.Fatal("an expansion reusing an SVM address was accepted")
	}
	if n := len(g.svms(t)); n != 3 || count(g.array.Calls(), "CreateSDS") != 3 {
		t.Fatalf("a refused plan changed the system: %d SVMs", n)
	}
}

func TestShrinkDrainsAndRemoves(t *testing.T) {
	g := setupGrown(t, 4, 4)
	ctx := context.Background()
	g.volume(t, "vol1", 100, "esx-01.cairn.test")
	host := "esx-04.cairn.test"
	// Another array's send target on the host stays: only Cairn's go.
	hs, _ := g.finder.HostSystem(ctx, host)
	if err := hoststorage.New(g.c.Client, hs).AddSendTargets(ctx, []string{"192.0.2.50:3260"}); err != nil {
		t.Fatal(err)
	}
	// The SVMs recorded themselves (cairn peersync at their start).
	for _, h := range g.deployed.Hosts {
		if err := g.array.PutSVM(ctx, gateway.SVMRecord{Name: "cairn-" + strings.TrimSuffix(h.Name, ".cairn.test"), Addresses: []string{h.SVMIP}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := g.engine.Shrink(ctx, g.deployed, host); err != nil {
		t.Fatal(err)
	}
	if recs := g.array.SVMs(); len(recs) != 3 || recs["cairn-esx-01"].Name == "" {
		t.Fatalf("SVM records after the removal of %s: %+v (its record must go, the others stay)", host, recs)
	} else if _, ok := recs["cairn-esx-04"]; ok {
		t.Fatalf("the removed SVM's record stays: %+v", recs)
	}
	if _, err := g.array.GetSDS(ctx, deploy.SDSName(host)); !errors.Is(err, gateway.ErrNotFound) {
		t.Fatalf("SDS of %s after the removal: %v", host, err)
	}
	devs, _ := g.array.ListDevices(ctx)
	if len(devs) != 9 {
		t.Fatalf("%d devices left, want 9", len(devs))
	}
	if _, err := g.array.GetHost(ctx, host); !errors.Is(err, gateway.ErrNotFound) {
		t.Fatalf("host record of %s: %v", host, err)
	}
	for _, m := range g.svms(t) {
		if strings.HasSuffix(m.Name, "-esx-04") {
			t.Fatalf("SVM %s still exists", m.Name)
		}
	}
	if ts := g.sendTargets(t, host); !slices.Equal(ts, []string{"192.0.2.50:3260"}) {
		t.Fatalf("removed host's send targets %v, want only the other array's", ts)
	}
	for _, h := range g.deployed.Hosts[:3] {
		ts := g.sendTargets(t, h.Name)
		if len(ts) != 3 || slices.Contains(ts, "10.20.0.14:3260") {
			t.Fatalf("host %s send targets %v", h.Name, ts)
		}
	}
	var drains []string
	for _, e := range g.events(deploy.ShrinkJob("cairn1", host)) {
		if e.Step == "drain" {
			drains = append(drains, e.Message)
		}
	}
	if len(drains) < 3 || !slices.ContainsFunc(drains, func(m string) bool { return strings.Contains(m, "33%") }) ||
		!slices.ContainsFunc(drains, func(m string) bool { return strings.Contains(m, "100%: sds cairn-esx-04 drained and removed") }) {
		t.Fatalf("drain progress: %v", drains)
	}
	if len(g.saved) != 1 {
		t.Fatal("plan not saved")
	}
	after := g.saved[0]
	if len(after.Hosts) != 3 || after.Hosts[2].TargetPortID != 3 {
		t.Fatalf("plan after the removal: %+v", after.Hosts)
	}
	g.checkStateLoose(t, after)
	// The host is gone from the plan: removing it again is refused.
	if err := g.engine.Shrink(ctx, after, host); err == nil || !strings.Contains(err.Error(), "not part of system") {
		t.Fatalf("second removal: %v", err)
	}
}

// checkStateLoose checks the state after a removal: the plan's deploy keys
// only (a removed host's are gone).
func (g *grown) checkStateLoose(t *testing.T, p *plan.Plan) {
	t.Helper()
	st, err := deploy.LoadState(g.engine.StateDir, p)
	if err != nil || st.Change != nil {
		t.Fatalf("state: %v %+v", err, st)
	}
	for k := range st.Steps {
		if strings.Contains(k, "esx-04") || strings.HasPrefix(k, "shrink/") {
			t.Fatalf("state keeps step %s", k)
		}
	}
	if _, ok := st.GatewayThumbprints["esx-04.cairn.test"]; ok {
		t.Fatal("thumbprint of the removed host kept")
	}
}

func TestShrinkRefusals(t *testing.T) {
	g := setupGrown(t, 4, 4)
	ctx := context.Background()
	host := "esx-04.cairn.test"
	unchanged := func(what string) {
		t.Helper()
		if n := len(g.svms(t)); n != 4 {
			t.Fatalf("%s: %d SVMs", what, n)
		}
		if s, err := g.array.GetSDS(ctx, deploy.SDSName(host)); err != nil || s.State != gateway.SDSNormal {
			t.Fatalf("%s: SDS %+v %v", what, s, err)
		}
		st, err := deploy.LoadState(g.engine.StateDir, g.deployed)
		if err != nil || st.Change != nil {
			t.Fatalf("%s: state %v %+v", what, err, st)
		}
	}
	if err := g.engine.Shrink(ctx, g.deployed, "esx-01.cairn.test"); err == nil || !strings.Contains(err.Error(), "MDM member") {
		t.Fatalf("MDM host: %v", err)
	}
	unchanged("MDM host")
	// The gateway refuses a drain that leaves too little room for the data
	// (4 hosts x 3 x 100 GiB; 3 hosts after: 405 GiB usable).
	g.volume(t, "big", 500, "")
	err := g.engine.Shrink(ctx, g.deployed, host)
	if err == nil || !strings.Contains(err.Error(), "refused by the gateway") || !strings.Contains(err.Error(), "thick reservations") {
		t.Fatalf("drain without room: %v", err)
	}
	unchanged("drain without room")
	// A volume mapped to the host: its datastores would be cut off.
	g.volume(t, "vol1", 10, host)
	if err := g.engine.Shrink(ctx, g.deployed, host); err == nil || !strings.Contains(err.Error(), "vol1 are mapped") {
		t.Fatalf("mapped host: %v", err)
	}
	unchanged("mapped host")
	if count(g.array.Calls(), "RemoveSDS") != 0 {
		t.Fatal("a refused removal started a drain")
	}
}

// A system without a cluster CA gives no join token (409): the expansion
// stops before the new SVM is configured, saying why and what to do, and
// sent again once the system has certificates it resumes with a token.
func TestExpandStopsWithoutClusterCA(t *testing.T) {
	g := setupGrown(t, 4, 3)
	ctx := context.Background()
	g.array.WithoutPKI = true
	err := g.engine.Expand(ctx, g.deployed, g.full)
	if err == nil || !strings.Contains(err.Error(), "has no cluster CA") || !strings.Contains(err.Error(), "send this request again") {
		t.Fatalf("expansion of a system without PKI: %v", err)
	}
	h := g.full.Hosts[3].Name
	st, err := deploy.LoadState(g.engine.StateDir, g.deployed)
	if err != nil || !st.Steps["svm/"+h+"/clone"].Done || st.Steps["svm/"+h+"/configure"].Done {
		t.Fatalf("state after the refusal: %+v %v", st, err)
	}
	if n := len(g.array.JoinTokens()); n != 0 {
		t.Fatalf("%d join tokens created", n)
	}
	g.array.WithoutPKI = false
	if err := g.engine.Expand(ctx, g.deployed, g.full); err != nil {
		t.Fatalf("resume: %v", err)
	}
	g.checkJoinTokens(t, []string{h}, []string{"sds", "target"})
	if n := len(g.array.JoinTokens()); n != 1 {
		t.Fatalf("%d join tokens created for one SVM", n)
	}
	g.checkState(t, g.full)
}
