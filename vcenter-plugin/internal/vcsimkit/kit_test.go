package vcsimkit_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cairn-storage/cairn/vcenter-plugin/internal/gateway"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/gatewayfake"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/hoststorage"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/vcsimkit"
)

type recordingHooks struct {
	mu     sync.Mutex
	on     []vcsimkit.SVM
	off    []string
	events []string // "on" and "off", in order
}

func (r *recordingHooks) PoweredOn(ctx context.Context, s vcsimkit.SVM) (vcsimkit.GuestReport, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.on = append(r.on, s)
	r.events = append(r.events, "on")
	return vcsimkit.GuestReport{GuestInfo: map[string]string{vcsimkit.ReadyKey: "ready"}}, nil
}

func (r *recordingHooks) PoweredOff(ctx context.Context, s vcsimkit.SVM) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.off = append(r.off, s.Name)
	r.events = append(r.events, "off")
	return nil
}

func extra(vm mo.VirtualMachine, key string) string {
	for _, o := range vm.Config.ExtraConfig {
		if ov := o.GetOptionValue(); ov.Key == key {
			s, _ := ov.Value.(string)
			return s
		}
	}
	return ""
}

func waitVM(t *testing.T, ctx context.Context, vm *object.VirtualMachine, what string, ok func(mo.VirtualMachine) bool) mo.VirtualMachine {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var m mo.VirtualMachine
		if err := vm.Properties(ctx, vm.Reference(), []string{"config", "guest", "runtime", "summary"}, &m); err != nil {
			t.Fatal(err)
		}
		if ok(m) {
			return m
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestKit(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	array := gatewayfake.New()
	hooks := &recordingHooks{}
	kit, err := vcsimkit.Start(vcsimkit.Options{Dir: t.TempDir(), LUNs: array, Guest: hooks, Template: "cairn-svm"})
	if err != nil {
		t.Fatal(err)
	}
	defer kit.Close()
	if kit.Username == "user" || len(kit.Password) < 16 || kit.URL.Scheme != "https" || !strings.HasPrefix(kit.URL.Host, "127.0.0.1:") {
		t.Fatalf("credentials/url not generated as promised: %s %s", kit.Username, kit.URL)
	}
	c, err := kit.Client(ctx)
	if err != nil {
		t.Fatal(err)
	}
	finder := find.NewFinder(c.Client, true)
	dc, err := finder.Datacenter(ctx, vcsimkit.Datacenter)
	if err != nil {
		t.Fatal(err)
	}
	finder.SetDatacenter(dc)
	names := kit.HostNames()
	if len(names) != 4 || names[0] != "esx-01.cairn.test" {
		t.Fatalf("hosts %v", names)
	}
	if a, b := kit.LocalDisks(names[0]), kit.LocalDisks(names[1]); len(a) != 3 || a[0].CanonicalName == b[0].CanonicalName || !a[0].SSD || a[1].SSD {
		t.Fatalf("local disks not per host: %v %v", a, b)
	}

	// --- SVM: clone, vApp properties, RDM, power on -> hooks, tools, ovfEnv.
	tmpl, err := finder.VirtualMachine(ctx, "cairn-svm")
	if err != nil {
		t.Fatal(err)
	}
	host2, err := finder.HostSystem(ctx, names[1])
	if err != nil {
		t.Fatal(err)
	}
	ds2, err := finder.Datastore(ctx, "esx-02-local")
	if err != nil {
		t.Fatal(err)
	}
	pool, _ := host2.ResourcePool(ctx)
	hostRef, dsRef, poolRef := host2.Reference(), ds2.Reference(), pool.Reference()
	folders, _ := dc.Folders(ctx)
	task, err := tmpl.Clone(ctx, folders.VmFolder, "svm-esx-02", types.VirtualMachineCloneSpec{Location: types.VirtualMachineRelocateSpec{Host: &hostRef, Datastore: &dsRef, Pool: &poolRef}})
	if err != nil {
		t.Fatal(err)
	}
	info, err := task.WaitForResult(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.Name != "CloneVM_Task" {
		t.Fatalf("task name %q: pyVmomi resolves only the vSphere method name", info.Name)
	}
	vm := object.NewVirtualMachine(c.Client, info.Result.(types.ManagedObjectReference))
	var tm mo.VirtualMachine
	if err := tmpl.Properties(ctx, tmpl.Reference(), []string{"config.vAppConfig"}, &tm); err != nil {
		t.Fatal(err)
	}
	var props []types.VAppPropertySpec
	for _, p := range tm.Config.VAppConfig.(*types.VmConfigInfo).Property {
		if p.Id == "cairn.mgmt.address" || p.Id == "cairn.roles" {
			v := map[string]string{"cairn.mgmt.address": "10.20.0.12/24", "cairn.roles": "mdm,sds<&>"}[p.Id]
			// vcsim's clone drops vApp properties (vCenter keeps them): add.
			props = append(props, types.VAppPropertySpec{ArrayUpdateSpec: types.ArrayUpdateSpec{Operation: types.ArrayUpdateOperationAdd}, Info: &types.VAppPropertyInfo{Key: p.Key, Id: p.Id, Value: v}})
		}
	}
	devices := object.VirtualDeviceList{}
	scsi, err := devices.CreateSCSIController("pvscsi")
	if err != nil {
		t.Fatal(err)
	}
	scsi.GetVirtualDevice().Key = -100
	disk := kit.LocalDisks(names[1])[2]
	rdm := &types.VirtualDisk{VirtualDevice: types.VirtualDevice{Key: -101, ControllerKey: -100, UnitNumber: types.NewInt32(0),
		Backing: &types.VirtualDiskRawDiskMappingVer1BackingInfo{DeviceName: "/vmfs/devices/disks/" + disk.CanonicalName, CompatibilityMode: "physicalMode", DiskMode: "independent_persistent"}},
		CapacityInBytes: disk.Size}
	spec := types.VirtualMachineConfigSpec{
		VAppConfig: &types.VmConfigSpec{Property: props},
		DeviceChange: []types.BaseVirtualDeviceConfigSpec{
			&types.VirtualDeviceConfigSpec{Operation: types.VirtualDeviceConfigSpecOperationAdd, Device: scsi},
			// An RDM is a mapping file on the VM's datastore: fileOperation create, as on vSphere.
			&types.VirtualDeviceConfigSpec{Operation: types.VirtualDeviceConfigSpecOperationAdd, FileOperation: types.VirtualDeviceConfigSpecFileOperationCreate, Device: rdm},
		},
	}
	if task, err = vm.Reconfigure(ctx, spec); err != nil {
		t.Fatal(err)
	}
	if err := task.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if task, err = vm.PowerOn(ctx); err != nil {
		t.Fatal(err)
	}
	if err := task.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	m := waitVM(t, ctx, vm, "tools and readiness", func(m mo.VirtualMachine) bool {
		return m.Guest.ToolsRunningStatus == string(types.VirtualMachineToolsRunningStatusGuestToolsRunning) && extra(m, vcsimkit.ReadyKey) == "ready"
	})
	if m.Guest.IpAddress != "10.20.0.12" || m.Runtime.FaultToleranceState == "" || m.Runtime.RecordReplayState == "" {
		t.Fatalf("guest ip %q ft %q rr %q", m.Guest.IpAddress, m.Runtime.FaultToleranceState, m.Runtime.RecordReplayState)
	}
	env := extra(m, vcsimkit.OvfEnvKey)
	if !strings.Contains(env, `oe:key="cairn.roles" oe:value="mdm,sds&lt;&amp;&gt;"`) || !strings.Contains(env, `oe:key="cairn.mgmt.address" oe:value="10.20.0.12/24"`) {
		t.Fatalf("ovf environment lacks the properties:\n%s", env)
	}
	hooks.mu.Lock()
	if len(hooks.on) != 1 || hooks.on[0].Host != names[1] || len(hooks.on[0].RDMs) != 1 || hooks.on[0].RDMs[0] != disk.CanonicalName || hooks.on[0].Properties["cairn.mgmt.address"] != "10.20.0.12/24" {
		t.Fatalf("power-on hook saw %+v", hooks.on)
	}
	hooks.mu.Unlock()
	if err := vm.ShutdownGuest(ctx); err != nil {
		t.Fatal(err)
	}
	waitVM(t, ctx, vm, "shutdown", func(m mo.VirtualMachine) bool {
		return m.Guest.ToolsRunningStatus == string(types.VirtualMachineToolsRunningStatusGuestToolsNotRunning) && extra(m, vcsimkit.ReadyKey) == ""
	})
	if err := kit.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
	hooks.mu.Lock()
	if len(hooks.off) != 1 || hooks.off[0] != "svm-esx-02" {
		t.Fatalf("power-off hook saw %v", hooks.off)
	}
	hooks.mu.Unlock()

	// A reset (power-off then power-on in one task) reaches the guest as
	// off then on, even when the off is superseded before the hook worker
	// sees it: the guest's daemons must stop before they start again.
	for _, step := range []func(context.Context) (*object.Task, error){vm.PowerOn, vm.Reset} {
		task, err := step(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := task.Wait(ctx); err != nil {
			t.Fatal(err)
		}
		if err := kit.WaitIdle(ctx); err != nil {
			t.Fatal(err)
		}
	}
	hooks.mu.Lock()
	if got := strings.Join(hooks.events, ","); got != "on,off,on,off,on" {
		t.Fatalf("hooks after power-on and reset: %s", got)
	}
	hooks.mu.Unlock()
	if task, err = vm.PowerOff(ctx); err != nil {
		t.Fatal(err)
	}
	if err := task.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if err := kit.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}

	// --- iSCSI, LUN discovery, VMFS shared by the hosts that see the LUN.
	var hs []*hoststorage.Host
	for _, n := range names {
		h, err := finder.HostSystem(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		hs = append(hs, hoststorage.New(c.Client, h))
	}
	st, err := hs[0].EnableISCSI(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.HBA != vcsimkit.SoftwareISCSIDevice || st.IQN != vcsimkit.IQN(names[0]) {
		t.Fatalf("iscsi state %+v", st)
	}
	for _, h := range hs {
		st, err := h.EnableISCSI(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := h.AddSendTargets(ctx, []string{"10.20.0.11", "10.20.0.12:3260"}); err != nil {
			t.Fatal(err)
		}
		if err := h.AddSendTargets(ctx, []string{"10.20.0.11:3260"}); err != nil {
			t.Fatal(err)
		}
		if st2, _ := h.ISCSI(ctx); len(st2.SendTargets) != 2 {
			t.Fatalf("send targets duplicated or lost: %v", st2.SendTargets)
		}
		if _, err := array.CreateHost(ctx, gateway.HostSpec{Name: h.Name, Type: "iscsi", IQN: st.IQN}); err != nil {
			t.Fatal(err)
		}
	}
	mustFake(t, array)
	vol, err := array.CreateVolume(ctx, gateway.VolumeSpec{Name: "vol1", Pool: "pool1", Size: 8 << 30})
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range names[:3] {
		if err := array.MapVolume(ctx, "vol1", h); err != nil {
			t.Fatal(err)
		}
	}
	if err := hs[0].Rescan(ctx); err != nil {
		t.Fatal(err)
	}
	if ok, _ := hs[0].HasLUN(ctx, vol.WWN); !ok {
		t.Fatal("host 1 does not see the mapped LUN after rescan")
	}
	if ok, _ := hs[3].HasLUN(ctx, vol.WWN); ok {
		t.Fatal("host 4 sees a LUN that is not mapped to it")
	}
	// The gateway-backed source answers the same from the API's mappings.
	for i, name := range names {
		got, err := vcsimkit.GatewayLUNs{API: array}.LUNsFor(ctx, vcsimkit.IQN(name), []string{"10.20.0.11:3260"})
		if err != nil || (len(got) == 1) != (i < 3) || (len(got) == 1 && got[0].NAA != vol.WWN) {
			t.Fatalf("GatewayLUNs for %s: %+v %v", name, got, err)
		}
	}
	if _, err := hs[0].CreateVMFS(ctx, vol.WWN, "cairn-ds1"); err != nil {
		t.Fatal(err)
	}
	if _, err := hs[0].CreateVMFS(ctx, vol.WWN, "cairn-ds2"); err == nil || !strings.Contains(err.Error(), "already holds") {
		t.Fatalf("second VMFS on the same LUN: %v", err)
	}
	for i, h := range hs {
		if err := h.Rescan(ctx); err != nil {
			t.Fatal(err)
		}
		ds, err := h.Datastore(ctx, "cairn-ds1")
		if err != nil {
			t.Fatal(err)
		}
		if want := i < 3; (ds != nil) != want {
			t.Fatalf("host %s mounted=%v want %v", h.Name, ds != nil, want)
		}
		if ds != nil && ds.Summary.Type != "VMFS" {
			t.Fatalf("datastore type %s", ds.Summary.Type)
		}
	}

	// --- vmkernel port for iSCSI, created and bound once.
	vmk, err := hs[0].EnsureVmkernelPort(ctx, vcsimkit.SoftwareISCSIDevice, vcsimkit.ISCSIPortGrp, "vSwitch0", "10.30.0.1", "255.255.255.0", true)
	if err != nil {
		t.Fatal(err)
	}
	vmk2, err := hs[0].EnsureVmkernelPort(ctx, vcsimkit.SoftwareISCSIDevice, vcsimkit.ISCSIPortGrp, "vSwitch0", "10.30.0.1", "255.255.255.0", true)
	if err != nil || vmk2 != vmk {
		t.Fatalf("second ensure: %s %v (first %s)", vmk2, err, vmk)
	}
	if _, err := hs[1].EnsureVmkernelPort(ctx, vcsimkit.SoftwareISCSIDevice, "nope", "vSwitch0", "10.30.0.2", "255.255.255.0", false); err == nil {
		t.Fatal("missing vmkernel port without create: no error")
	}
}

func mustFake(t *testing.T, a *gatewayfake.Array) {
	ctx := context.Background()
	if err := a.Bootstrap(ctx, "kit"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.CreatePD(ctx, "pd1"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.CreatePool(ctx, gateway.PoolSpec{Name: "pool1", PD: "pd1", SparePercent: 10}); err != nil {
		t.Fatal(err)
	}
}
