package deploy_test

import (
	"context"
	"errors"
	"github.com/cairn-storage/cairn/appliance/contract"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vmware/govmomi"
	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cairn-storage/cairn/vcenter-plugin/internal/deploy"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/gateway"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/gatewayfake"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/hoststorage"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/inventory"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/plan"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/vcsimkit"
)

// flakyGuest fails the first boot of the SVM on failHost while armed.
type flakyGuest struct {
	failHost     string
	armed        atomic.Bool
	noThumbprint atomic.Bool // an appliance that does not publish it
}

func (f *flakyGuest) PoweredOn(ctx context.Context, s vcsimkit.SVM) (vcsimkit.GuestReport, error) {
	if f.armed.Load() && s.Host == f.failHost {
		return vcsimkit.GuestReport{}, errors.New("injected: kernel panic")
	}
	r, err := vcsimkit.ReadyGuest{}.PoweredOn(ctx, s)
	for _, id := range s.Passthrough {
		// The appliance reports where a passthrough NVMe shows in the guest.
		r.GuestInfo[deploy.GuestPassthroughPrefix+id] = "/dev/disk/by-id/nvme-sim-" + id
	}
	if f.noThumbprint.Load() {
		delete(r.GuestInfo, vcsimkit.ThumbprintKey)
	}
	return r, err
}
func (f *flakyGuest) PoweredOff(ctx context.Context, s vcsimkit.SVM) error { return nil }

type env struct {
	kit    *vcsimkit.Kit
	c      *govmomi.Client
	array  *gatewayfake.Array
	engine *deploy.Engine
	plan   *plan.Plan
	finder *find.Finder
	guest  *flakyGuest
}

func setup(t *testing.T) *env {
	t.Helper()
	e := &env{array: gatewayfake.New(), guest: &flakyGuest{failHost: "esx-03.cairn.test"}}
	e.kit, e.c = vcsimkit.StartTest(t, vcsimkit.Options{LUNs: e.array, Guest: e.array.Hooks(e.guest)})
	ctx := context.Background()
	inv, err := inventory.Collect(ctx, e.c.Client)
	if err != nil {
		t.Fatal(err)
	}
	e.plan, err = plan.Suggest(inv, vcsimkit.Datacenter, "cairn1", "cairn-svm", "10.20.0.0/24", "10.30.0.0/24")
	if err != nil {
		t.Fatal(err)
	}
	e.engine = &deploy.Engine{VC: e.c.Client, StateDir: t.TempDir(), ReadyTimeout: 3 * time.Second, PollInterval: 10 * time.Millisecond,
		Gateway: func(cfg gateway.Config) (gateway.API, error) {
			if !strings.HasPrefix(cfg.URL, "https://10.20.0.11:8443") || cfg.Username != "admin" || len(cfg.Password) < 20 || cfg.Thumbprint == "" {
				t.Errorf("gateway config %+v", cfg)
			}
			return e.array, nil
		}}
	e.finder = find.NewFinder(e.c.Client)
	dc, _ := e.finder.DefaultDatacenter(ctx)
	e.finder.SetDatacenter(dc)
	return e
}

func count(calls []string, prefix string) int {
	n := 0
	for _, c := range calls {
		if strings.HasPrefix(c, prefix) {
			n++
		}
	}
	return n
}

func (e *env) svms(t *testing.T) []mo.VirtualMachine {
	t.Helper()
	ctx := context.Background()
	vms, err := e.finder.VirtualMachineList(ctx, "cairn-cairn1-*")
	var nf *find.NotFoundError
	if errors.As(err, &nf) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []mo.VirtualMachine
	for _, vm := range vms {
		var m mo.VirtualMachine
		if err := vm.Properties(ctx, vm.Reference(), []string{"name", "config", "runtime"}, &m); err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

// checkDeployed asserts the end state of a complete deployment.
func (e *env) checkDeployed(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	svms := e.svms(t)
	if len(svms) != 4 {
		t.Fatalf("%d SVMs, want 4", len(svms))
	}
	// Every SVM of the initial deployment, whatever its roles, carries the
	// deployment's bootstrap token (the one in its state file) for its first
	// boot; no join token is created for them.
	st, err := deploy.LoadState(e.engine.StateDir, e.plan)
	if err != nil || len(st.Secrets.BootstrapToken) < 16 {
		t.Fatalf("state %+v: %v", st, err)
	}
	for _, m := range svms {
		rdms := 0
		for _, d := range m.Config.Hardware.Device {
			if disk, ok := d.(*types.VirtualDisk); ok {
				if b, ok := disk.Backing.(*types.VirtualDiskRawDiskMappingVer1BackingInfo); ok && b.CompatibilityMode == "physicalMode" {
					rdms++
				}
			}
		}
		props := map[string]string{}
		var keys []string
		for _, p := range m.Config.VAppConfig.(*types.VmConfigInfo).Property {
			props[p.Id] = p.Value
			keys = append(keys, p.Id)
		}
		host := object.NewHostSystem(e.c.Client, *m.Runtime.Host)
		hn, _ := host.ObjectName(ctx)
		if rdms != 3 || m.Runtime.PowerState != types.VirtualMachinePowerStatePoweredOn || props["cairn.cluster.name"] != "cairn1" ||
			!strings.HasSuffix(props["cairn.mgmt.address"], "/24") || props[contract.KeyJoinToken] != st.Secrets.BootstrapToken || props["cairn.hostname"] == "" {
			t.Fatalf("SVM %s: %d RDMs, %s, props %v", m.Name, rdms, m.Runtime.PowerState, props)
		}
		// One contract: the VM has exactly the contract's properties, and what the
		// simulator hands the guest (its OVF environment) passes first boot's parser
		// and validator.
		slices.Sort(keys)
		if want := slices.Sorted(slices.Values(contract.Keys())); !slices.Equal(keys, want) {
			t.Fatalf("SVM %s has vApp properties %v, the contract %v", m.Name, keys, want)
		}
		env := vcsimkit.OvfEnvironment(vcsimkit.SVM{Properties: props}, m.Self.Value)
		parsed, err := contract.ParseOVFEnv([]byte(env))
		if err != nil {
			t.Fatalf("SVM %s: OVF environment: %v", m.Name, err)
		}
		if _, err := contract.Validate(parsed); err != nil {
			t.Fatalf("SVM %s: first boot would refuse its settings: %v", m.Name, err)
		}
		// No long-lived secret in any vApp property (anyone who can read the VM's
		// settings in vCenter reads them).
		if len(e.array.AdminPassword) < 20 {
			t.Fatalf("the engine did not set a strong admin password: %q", e.array.AdminPassword)
		}
		for k, v := range props {
			if strings.Contains(v, e.array.AdminPassword) {
				t.Fatalf("SVM %s: vApp property %s holds the admin password", m.Name, k)
			}
		}
		if err := e.array.RedeemBootstrapToken(ctx, props[contract.KeyJoinToken], "another-password-123"); err == nil {
			t.Fatalf("the bootstrap token in SVM %s's vApp properties still works", m.Name)
		}
		if e.plan.SVMName(hn) != m.Name {
			t.Fatalf("SVM %s runs on %s", m.Name, hn)
		}
	}
	calls := e.array.Calls()
	for prefix, want := range map[string]int{"Bootstrap": 1, "CreatePD": 1, "CreateFaultSet": 4, "CreatePool": 1, "CreateSDS": 4, "AddDevice": 12, "CreateHost": 4, "CreateJoinToken": 0} {
		if got := count(calls, prefix); got != want {
			t.Fatalf("%s called %d times, want %d: %v", prefix, got, want, calls)
		}
	}
	devs, _ := e.array.ListDevices(ctx)
	for _, d := range devs {
		if !strings.HasPrefix(d.Path, "/dev/disk/by-id/wwn-0x5000c500") {
			t.Fatalf("device path %s", d.Path)
		}
	}
	for _, name := range e.kit.HostNames() {
		hs, _ := e.finder.HostSystem(ctx, name)
		st, err := hoststorage.New(e.c.Client, hs).ISCSI(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !st.Enabled || len(st.SendTargets) != 4 {
			t.Fatalf("host %s iSCSI %+v", name, st)
		}
		if h, err := e.array.GetHost(ctx, name); err != nil || h.IQN != st.IQN {
			t.Fatalf("host %s registered as %+v, %v (iqn %s)", name, h, err, st.IQN)
		}
	}
}

func TestDeployAndRerun(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	if err := e.engine.Deploy(ctx, e.plan); err != nil {
		t.Fatal(err)
	}
	e.checkDeployed(t)
	before := len(e.array.Calls())
	if err := e.engine.Deploy(ctx, e.plan); err != nil {
		t.Fatal(err)
	}
	if after := len(e.array.Calls()); after != before {
		t.Fatalf("a re-run changed the cluster: %d -> %d calls", before, after)
	}
	data, err := os.ReadFile(deploy.StatePath(e.engine.StateDir, "cairn1"))
	if err != nil || !strings.Contains(string(data), `"completed": true`) {
		t.Fatalf("state: %v %s", err, data)
	}
	grown := *e.plan
	grown.StoragePool.SparePercent = 30
	if err := e.engine.Deploy(ctx, &grown); err == nil || !strings.Contains(err.Error(), "is deployed with another plan") {
		t.Fatalf("changed plan after deployment: %v", err)
	}
	if fi, _ := os.Stat(deploy.StatePath(e.engine.StateDir, "cairn1")); fi.Mode().Perm() != 0o600 {
		t.Fatalf("state file mode %v: it holds secrets", fi.Mode())
	}
	var events int
	for _, ev := range e.engine.Log.Since(0, deploy.Job("cairn1")) {
		if ev.Step == "clone" {
			events++
		}
	}
	if events == 0 {
		t.Fatal("no clone progress events")
	}
}

func TestResumeAfterGatewayFailure(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	e.array.FailNext("AddDevice", errors.New("injected: device busy"))
	err := e.engine.Deploy(ctx, e.plan)
	if err == nil || !strings.Contains(err.Error(), "injected: device busy") || !strings.Contains(err.Error(), "cluster/devices/") {
		t.Fatalf("first run: %v", err)
	}
	if len(e.svms(t)) != 4 {
		t.Fatal("SVMs not all deployed before the bootstrap")
	}
	st, _ := os.ReadFile(deploy.StatePath(e.engine.StateDir, "cairn1"))
	if !strings.Contains(string(st), "injected: device busy") {
		t.Fatal("state does not record the failure")
	}
	if err := e.engine.Deploy(ctx, e.plan); err != nil {
		t.Fatalf("resume: %v", err)
	}
	// The token was redeemed once, by the first run; the resume did not need it.
	if n := count(e.array.Calls(), "RedeemBootstrapToken"); n != 1 {
		t.Fatalf("bootstrap token redeemed %d times", n)
	}
	e.checkDeployed(t)
}

// An SVM image that does not publish its gateway certificate is refused: the engine
// never trusts a certificate it only saw over the network.
func TestRefusesGatewayWithoutThumbprint(t *testing.T) {
	e := setup(t)
	e.guest.noThumbprint.Store(true)
	err := e.engine.Deploy(context.Background(), e.plan)
	if err == nil || !strings.Contains(err.Error(), "published no certificate thumbprint") {
		t.Fatalf("deploy: %v", err)
	}
	if n := count(e.array.Calls(), "RedeemBootstrapToken"); n != 0 {
		t.Fatal("talked to an unpinned gateway")
	}
}

func TestResumeAfterSVMDidNotBoot(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	e.guest.armed.Store(true)
	err := e.engine.Deploy(ctx, e.plan)
	if err == nil || !strings.Contains(err.Error(), "svm/esx-03.cairn.test/ready") || !strings.Contains(err.Error(), "journalctl") {
		t.Fatalf("first run: %v", err)
	}
	if n := len(e.svms(t)); n != 3 {
		t.Fatalf("%d SVMs after stopping at the third", n)
	}
	// The operator fixes the SVM and restarts it.
	e.guest.armed.Store(false)
	vm, err := e.finder.VirtualMachine(ctx, "cairn-cairn1-esx-03")
	if err != nil {
		t.Fatal(err)
	}
	task, _ := vm.PowerOff(ctx)
	_ = task.Wait(ctx)
	task, _ = vm.PowerOn(ctx)
	_ = task.Wait(ctx)
	if err := e.engine.Deploy(ctx, e.plan); err != nil {
		t.Fatalf("resume: %v", err)
	}
	e.checkDeployed(t)
}

func TestDeployRefusesInvalidPlanAndChangedPlan(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	bad := *e.plan
	bad.Template = "missing"
	err := e.engine.Deploy(ctx, &bad)
	if err == nil || !strings.Contains(err.Error(), `SVM template "missing" not found`) {
		t.Fatalf("invalid plan: %v", err)
	}
	if len(e.svms(t)) != 0 {
		t.Fatal("an invalid plan deployed SVMs")
	}
	// A started deployment with another plan is refused.
	changed := *e.plan
	changed.StoragePool.SparePercent = 20
	if err := e.engine.Deploy(ctx, &changed); err == nil || !strings.Contains(err.Error(), "plan of system cairn1 changed") {
		t.Fatalf("changed plan: %v", err)
	}
}

func TestDeployPassthrough(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	e.plan.Hosts[0].Devices = append(e.plan.Hosts[0].Devices, plan.Device{PCI: "0000:3b:00.0", Mode: plan.ModePassthrough})
	if err := e.engine.Deploy(ctx, e.plan); err != nil {
		t.Fatal(err)
	}
	vm, err := e.finder.VirtualMachine(ctx, "cairn-cairn1-esx-01")
	if err != nil {
		t.Fatal(err)
	}
	var m mo.VirtualMachine
	if err := vm.Properties(ctx, vm.Reference(), []string{"config"}, &m); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, d := range m.Config.Hardware.Device {
		if pt, ok := d.(*types.VirtualPCIPassthrough); ok {
			found = pt.Backing.(*types.VirtualPCIPassthroughDeviceBackingInfo).Id == "0000:3b:00.0"
		}
	}
	if !found || m.Config.MemoryReservationLockedToMax == nil || !*m.Config.MemoryReservationLockedToMax {
		t.Fatalf("passthrough device attached %v, memory locked %v", found, m.Config.MemoryReservationLockedToMax)
	}
	devs, _ := e.array.ListDevices(ctx)
	paths := 0
	for _, d := range devs {
		if d.Path == "/dev/disk/by-id/nvme-sim-0000:3b:00.0" {
			paths++
		}
	}
	if paths != 1 || len(devs) != 13 {
		t.Fatalf("%d devices, passthrough path seen %d times", len(devs), paths)
	}
	// The inventory now shows the device in use by the SVM, and the plan
	// still validates (its own SVM uses it).
	inv, _ := inventory.Collect(ctx, e.c.Client)
	h, _ := inv.Host("esx-01.cairn.test")
	if pci := h.PCI("0000:3b:00.0"); pci.UsedBy != "vm cairn-cairn1-esx-01" {
		t.Fatalf("pci used by %q", pci.UsedBy)
	}
	if err := plan.Validate(e.plan, inv).Err(); err != nil {
		t.Fatalf("own devices count as in use: %v", err)
	}
}

// The state file's step keys are stored: an old state file resumes by them, so they
// never change. This pins them all (a renamed key fails here, not in the field).
func TestStateStepKeysAreStable(t *testing.T) {
	e := setup(t)
	if err := e.engine.Deploy(context.Background(), e.plan); err != nil {
		t.Fatal(err)
	}
	st, err := deploy.LoadState(e.engine.StateDir, e.plan)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"cluster/admin", "cluster/system", "cluster/service-users", "cluster/pd", "cluster/pool"}
	for _, fs := range e.plan.FaultSets() {
		want = append(want, "cluster/faultset/"+fs)
	}
	for _, h := range e.plan.Hosts {
		want = append(want, "iscsi/"+h.Name)
		if h.HasSVM() {
			want = append(want, "svm/"+h.Name+"/clone", "svm/"+h.Name+"/configure", "svm/"+h.Name+"/power-on")
		}
		if h.Has(plan.RoleSDS) {
			want = append(want, "cluster/sds/"+h.Name, "cluster/devices/"+h.Name)
		}
	}
	var got []string
	for k, s := range st.Steps {
		if !s.Done {
			t.Errorf("step %s recorded but not done", k)
		}
		got = append(got, k)
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("state step keys\n got %v\nwant %v", got, want)
	}
}
