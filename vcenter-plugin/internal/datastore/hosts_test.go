package datastore_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/vmware/govmomi"
	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cairn-storage/cairn/vcenter-plugin/internal/datastore"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/deploy"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/gateway"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/gatewayfake"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/hoststorage"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/inventory"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/plan"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/vcsimkit"
)

// deployed: a deployed 4-host system with volume vol1's datastore on the
// first three hosts.
func deployed(t *testing.T) (*vcsimkit.Kit, *govmomi.Client, *gatewayfake.Array, *datastore.Engine, string) {
	t.Helper()
	ctx := context.Background()
	array := gatewayfake.New()
	kit, c := vcsimkit.StartTest(t, vcsimkit.Options{Hosts: 4, LUNs: array, Guest: array.Hooks(nil)})
	inv, err := inventory.Collect(ctx, c.Client)
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.Suggest(inv, vcsimkit.Datacenter, "cairn1", "cairn-svm", "10.20.0.0/24", "10.30.0.0/24")
	if err != nil {
		t.Fatal(err)
	}
	p.Hosts[3].Roles, p.Hosts[3].Devices, p.Hosts[3].SVMIP, p.Hosts[3].FaultSet = nil, nil, "", ""
	dep := &deploy.Engine{VC: c.Client, StateDir: t.TempDir(), ReadyTimeout: 3 * time.Second, PollInterval: 10 * time.Millisecond,
		Gateway: func(gateway.Config) (gateway.API, error) { return array, nil }}
	if err := dep.Deploy(ctx, p); err != nil {
		t.Fatal(err)
	}
	eng := &datastore.Engine{VC: c.Client, API: array, RescanTimeout: time.Second, PollInterval: 10 * time.Millisecond}
	res, err := eng.Create(ctx, datastore.Request{Datacenter: vcsimkit.Datacenter, Volume: "vol1", Pool: "pool1", SizeGiB: 8, Thin: true, Hosts: kit.HostNames()[:3]})
	if err != nil {
		t.Fatal(err)
	}
	return kit, c, array, eng, res.WWN
}

func hostOf(t *testing.T, c *govmomi.Client, name string) (*hoststorage.Host, *object.HostSystem) {
	t.Helper()
	hs, err := find.NewFinder(c.Client).HostSystem(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	return hoststorage.New(c.Client, hs), hs
}

// vmOn registers a VM (or template) on host with its files on datastore.
func vmOn(t *testing.T, c *govmomi.Client, hs *object.HostSystem, name, ds string, template bool) *object.VirtualMachine {
	t.Helper()
	ctx := context.Background()
	finder := find.NewFinder(c.Client)
	dc, err := finder.Datacenter(ctx, vcsimkit.Datacenter)
	if err != nil {
		t.Fatal(err)
	}
	finder.SetDatacenter(dc)
	pool, err := hs.ResourcePool(ctx)
	if err != nil {
		t.Fatal(err)
	}
	folders, err := finder.DefaultFolder(ctx)
	if err != nil {
		t.Fatal(err)
	}
	spec := types.VirtualMachineConfigSpec{Name: name, GuestId: string(types.VirtualMachineGuestOsIdentifierOtherLinux64Guest),
		NumCPUs: 1, MemoryMB: 256, Files: &types.VirtualMachineFileInfo{VmPathName: "[" + ds + "]"}}
	task, err := folders.CreateVM(ctx, spec, pool, hs)
	if err != nil {
		t.Fatal(err)
	}
	info, err := task.WaitForResult(ctx)
	if err != nil {
		t.Fatal(err)
	}
	vm := object.NewVirtualMachine(c.Client, info.Result.(types.ManagedObjectReference))
	if template {
		if err := vm.MarkAsTemplate(ctx); err != nil {
			t.Fatal(err)
		}
	}
	return vm
}

func destroy(t *testing.T, vm *object.VirtualMachine) {
	t.Helper()
	ctx := context.Background()
	task, err := vm.Destroy(ctx)
	if err == nil {
		err = task.Wait(ctx)
	}
	if err != nil {
		t.Fatal(err)
	}
}

func TestMapUnmapDelete(t *testing.T) {
	ctx := context.Background()
	kit, c, array, eng, wwn := deployed(t)
	names := kit.HostNames()
	h4, hs4 := hostOf(t, c, names[3])
	req := datastore.HostsRequest{Datacenter: vcsimkit.Datacenter, Volume: "vol1", Hosts: []string{names[3]}}

	// Map to the fourth host: it sees the LUN and mounts the datastore.
	if err := eng.Map(ctx, req); err != nil {
		t.Fatal(err)
	}
	if ds, err := h4.Datastore(ctx, "vol1"); err != nil || ds == nil {
		t.Fatalf("host 4 after map: %v %v", ds, err)
	}
	calls := len(array.Calls())
	if err := eng.Map(ctx, req); err != nil {
		t.Fatalf("map again: %v", err)
	}
	if len(array.Calls()) != calls {
		t.Fatalf("map again changed the cluster: %v", array.Calls()[calls:])
	}
	// Read-only while mapped read-write: refused, says to unmap first.
	ro := req
	ro.ReadOnly = true
	if err := eng.Map(ctx, ro); err == nil || !strings.Contains(err.Error(), "unmap it from") {
		t.Fatalf("remap read-only: %v", err)
	}

	// A VM registered on host 4 with files on vol1 stops the unmap.
	vm := vmOn(t, c, hs4, "web1", "vol1", false)
	err := eng.Unmap(ctx, req)
	if !errors.Is(err, datastore.ErrInUse) || !strings.Contains(err.Error(), "web1") {
		t.Fatalf("unmap with a VM: %v", err)
	}
	if len(array.Calls()) != calls {
		t.Fatalf("refused unmap changed the cluster: %v", array.Calls()[calls:])
	}
	// The kit refuses as ESXi does, whatever the engine checks first.
	ds, _ := h4.Datastore(ctx, "vol1")
	if err := h4.UnmountVMFS(ctx, ds); err == nil || !strings.Contains(vcsimkit.FaultMessage(err)+err.Error(), "web1") {
		t.Fatalf("ESXi unmount with a VM on the datastore: %v", err)
	}
	lun, _ := h4.LUN(ctx, wwn)
	if err := h4.DetachLUN(ctx, lun); err == nil || !strings.Contains(err.Error(), "unmount it first") {
		t.Fatalf("ESXi detach under a mounted VMFS: %v", err)
	}
	destroy(t, vm)

	// A failure after the host-side steps: running the job again resumes.
	array.FailNext("UnmapVolume", errors.New("gateway down"))
	if err := eng.Unmap(ctx, req); err == nil || !strings.Contains(err.Error(), "gateway down") {
		t.Fatalf("unmap with the gateway failing: %v", err)
	}
	if ds, mounted, _ := h4.DatastoreMount(ctx, "vol1"); ds == nil || mounted {
		t.Fatalf("after the failed unmap the datastore should be unmounted on host 4, still listed: %v %v", ds, mounted)
	}
	if err := eng.Unmap(ctx, req); err != nil {
		t.Fatalf("unmap resumed: %v", err)
	}
	if ds, _, _ := h4.DatastoreMount(ctx, "vol1"); ds != nil {
		t.Fatal("host 4 keeps datastore vol1 after unmap")
	}
	if l, _ := h4.LUN(ctx, wwn); l != nil {
		t.Fatal("host 4 keeps the LUN after unmap")
	}
	for _, n := range names[:3] {
		h, _ := hostOf(t, c, n)
		if ds, _ := h.Datastore(ctx, "vol1"); ds == nil {
			t.Fatalf("host %s lost vol1 when host 4 was unmapped", n)
		}
	}
	v, _ := array.GetVolume(ctx, "vol1")
	if len(v.Mappings) != 3 {
		t.Fatalf("mappings after unmap: %+v", v.Mappings)
	}

	// Map back: ESXi kept the LUN detached; the job attaches and mounts.
	if err := eng.Map(ctx, req); err != nil {
		t.Fatalf("map back: %v", err)
	}
	if ds, err := h4.Datastore(ctx, "vol1"); err != nil || ds == nil {
		t.Fatalf("host 4 after map back: %v", err)
	}
	// A host that has the datastore unmounted (in vSphere, by hand): map
	// mounts it again.
	ds, _ = h4.Datastore(ctx, "vol1")
	if err := h4.UnmountVMFS(ctx, ds); err != nil {
		t.Fatal(err)
	}
	if err := eng.Map(ctx, req); err != nil {
		t.Fatalf("map with the datastore unmounted: %v", err)
	}
	if ds, err := h4.Datastore(ctx, "vol1"); err != nil || ds == nil {
		t.Fatalf("host 4 after map of an unmounted datastore: %v", err)
	}

	// Delete: refused with the names of the VMs and templates on it.
	_, hs1 := hostOf(t, c, names[0])
	tmpl := vmOn(t, c, hs1, "gold", "vol1", true)
	del := datastore.DeleteRequest{Datacenter: vcsimkit.Datacenter, Volume: "vol1", Hosts: names}
	calls = len(array.Calls())
	if err := eng.Delete(ctx, del); !errors.Is(err, datastore.ErrInUse) || !strings.Contains(err.Error(), "gold (template)") {
		t.Fatalf("delete with a template: %v", err)
	}
	if len(array.Calls()) != calls {
		t.Fatalf("refused delete changed the cluster: %v", array.Calls()[calls:])
	}
	destroy(t, tmpl)
	if err := eng.Delete(ctx, del); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if _, err := array.GetVolume(ctx, "vol1"); !errors.Is(err, gateway.ErrNotFound) {
		t.Fatalf("volume after delete: %v", err)
	}
	for _, n := range names {
		h, _ := hostOf(t, c, n)
		if ds, _, _ := h.DatastoreMount(ctx, "vol1"); ds != nil {
			t.Fatalf("host %s keeps datastore vol1", n)
		}
		if l, _ := h.LUN(ctx, wwn); l != nil {
			t.Fatalf("host %s keeps the LUN", n)
		}
	}
	if _, err := find.NewFinder(c.Client).Datastore(ctx, "/"+vcsimkit.Datacenter+"/datastore/vol1"); err == nil {
		t.Fatal("vCenter still lists datastore vol1")
	}
	if err := eng.Delete(ctx, del); err != nil {
		t.Fatalf("delete again: %v", err)
	}
	// The name is free for a new volume and datastore.
	if _, err := eng.Create(ctx, datastore.Request{Datacenter: vcsimkit.Datacenter, Volume: "vol1", Pool: "pool1", SizeGiB: 8, Hosts: names[:2]}); err != nil {
		t.Fatalf("create vol1 again: %v", err)
	}
}

// Without the kit's UnmountVmfsVolume/DetachScsiLun vcsim answers
// NotImplemented; the kit's refusals come from ESXi's rules, not from a
// missing method: a second detach of a detached LUN and a mount on a
// detached LUN are refused too.
func TestKitDetachRules(t *testing.T) {
	ctx := context.Background()
	kit, c, _, _, wwn := deployed(t)
	h, hs := hostOf(t, c, kit.HostNames()[0])
	ds, _ := h.Datastore(ctx, "vol1")
	if err := h.UnmountVMFS(ctx, ds); err != nil {
		t.Fatal(err)
	}
	if err := h.UnmountVMFS(ctx, ds); err == nil {
		t.Fatal("second unmount accepted")
	}
	// Unmounted stays unmounted across a rescan.
	if err := h.Rescan(ctx); err != nil {
		t.Fatal(err)
	}
	if d, _ := h.Datastore(ctx, "vol1"); d != nil {
		t.Fatal("a rescan mounted an unmounted VMFS again")
	}
	lun, _ := h.LUN(ctx, wwn)
	if err := h.DetachLUN(ctx, lun); err != nil {
		t.Fatal(err)
	}
	if err := h.DetachLUN(ctx, lun); err == nil {
		t.Fatal("second detach accepted")
	}
	if err := h.Rescan(ctx); err != nil {
		t.Fatal(err)
	}
	if l, _ := h.LUN(ctx, wwn); l == nil || !hoststorage.Detached(l) {
		t.Fatalf("a rescan attached the LUN: %+v", l)
	}
	ss, _ := hs.ConfigManager().StorageSystem(ctx)
	if _, err := methods.MountVmfsVolume(ctx, c.Client, &types.MountVmfsVolume{This: ss.Reference(), VmfsUuid: vcsimkit.VMFSUUID("vol1")}); err == nil {
		t.Fatal("mount on a detached LUN accepted")
	}
}
