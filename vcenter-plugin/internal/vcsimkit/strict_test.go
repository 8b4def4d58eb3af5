package vcsimkit_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/property"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cairn-storage/cairn/vcenter-plugin/internal/hoststorage"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/vcsimkit"
)

// The kit refuses what vCenter and ESXi refuse for an SVM's devices and
// its iSCSI port binding, and offers what QueryConfigTarget offers.
func TestKitIsStrict(t *testing.T) {
	ctx := context.Background()
	kit, c := vcsimkit.StartTest(t, vcsimkit.Options{Hosts: 2, DisksPerHost: 2})
	finder := find.NewFinder(c.Client)
	dc, err := finder.Datacenter(ctx, vcsimkit.Datacenter)
	if err != nil {
		t.Fatal(err)
	}
	finder.SetDatacenter(dc)
	name := kit.HostNames()[0]
	host, err := finder.HostSystem(ctx, name)
	if err != nil {
		t.Fatal(err)
	}

	// --- QueryConfigTarget: passthrough devices with the host's system id
	// (not its BIOS UUID); RDM-capable disks without the path-named one.
	var hm mo.HostSystem
	if err := host.Properties(ctx, host.Reference(), []string{"parent", "hardware.systemInfo"}, &hm); err != nil {
		t.Fatal(err)
	}
	var cr mo.ComputeResource
	if err := property.DefaultCollector(c.Client).RetrieveOne(ctx, *hm.Parent, []string{"environmentBrowser"}, &cr); err != nil {
		t.Fatal(err)
	}
	ref := host.Reference()
	ct, err := methods.QueryConfigTarget(ctx, c.Client, &types.QueryConfigTarget{This: *cr.EnvironmentBrowser, Host: &ref})
	if err != nil {
		t.Fatal(err)
	}
	sysID := vcsimkit.SystemID(name)
	if sysID == hm.Hardware.SystemInfo.Uuid {
		t.Fatal("the kit's passthrough system id equals the BIOS UUID: the test could not tell them apart")
	}
	var pciIDs []string
	for _, bp := range ct.Returnval.PciPassthrough {
		p := bp.(*types.VirtualMachinePciPassthroughInfo)
		if p.SystemId != sysID {
			t.Fatalf("pciPassthrough %s systemId %q, want %q", p.PciDevice.Id, p.SystemId, sysID)
		}
		pciIDs = append(pciIDs, p.PciDevice.Id)
	}
	if len(pciIDs) != 2 {
		t.Fatalf("passthrough devices %v, want the 2 capable NVMe controllers", pciIDs)
	}
	var rdm []string
	for _, d := range ct.Returnval.ScsiDisk {
		rdm = append(rdm, d.Disk.CanonicalName)
	}
	local := kit.LocalDisks(name)
	if slices.Contains(rdm, vcsimkit.NonRDMDisk) || !slices.Contains(rdm, local[0].CanonicalName) || !slices.Contains(rdm, local[1].CanonicalName) {
		t.Fatalf("RDM-capable disks %v: want the candidate disks and not %s", rdm, vcsimkit.NonRDMDisk)
	}

	// --- ReconfigVM refuses a wrong systemId and a non-RDM-capable disk.
	vm := newVM(t, ctx, c.Client, finder, host)
	pt := func(systemID string) types.BaseVirtualDeviceConfigSpec {
		return &types.VirtualDeviceConfigSpec{Operation: types.VirtualDeviceConfigSpecOperationAdd,
			Device: &types.VirtualPCIPassthrough{VirtualDevice: types.VirtualDevice{Key: -10,
				Backing: &types.VirtualPCIPassthroughDeviceBackingInfo{Id: pciIDs[0], SystemId: systemID, VendorId: 0x144d, DeviceId: "a80"}}}}
	}
	rdmDisk := func(canonical string) types.BaseVirtualDeviceConfigSpec {
		return &types.VirtualDeviceConfigSpec{Operation: types.VirtualDeviceConfigSpecOperationAdd, FileOperation: types.VirtualDeviceConfigSpecFileOperationCreate,
			Device: &types.VirtualDisk{VirtualDevice: types.VirtualDevice{Key: -11, ControllerKey: 1000, UnitNumber: types.NewInt32(1),
				Backing: &types.VirtualDiskRawDiskMappingVer1BackingInfo{DeviceName: "/vmfs/devices/disks/" + canonical,
					CompatibilityMode: string(types.VirtualDiskCompatibilityModePhysicalMode), DiskMode: string(types.VirtualDiskModeIndependent_persistent)}}}}
	}
	reconfigure := func(change types.BaseVirtualDeviceConfigSpec) error {
		task, err := vm.Reconfigure(ctx, types.VirtualMachineConfigSpec{DeviceChange: []types.BaseVirtualDeviceConfigSpec{change}})
		if err != nil {
			return err
		}
		return task.Wait(ctx)
	}
	refused := func(err error, want string) bool {
		return err != nil && strings.Contains(vcsimkit.FaultMessage(err), want)
	}
	if err := reconfigure(pt(hm.Hardware.SystemInfo.Uuid)); !refused(err, "pciPassthrough[].systemId") {
		t.Fatalf("passthrough with the BIOS UUID as systemId: %v %q", err, vcsimkit.FaultMessage(err))
	}
	if err := reconfigure(rdmDisk(vcsimkit.NonRDMDisk)); !refused(err, "not an RDM-capable disk") {
		t.Fatalf("RDM of %s: %v %q", vcsimkit.NonRDMDisk, err, vcsimkit.FaultMessage(err))
	}
	if err := reconfigure(rdmDisk(local[1].CanonicalName)); err != nil {
		t.Fatalf("RDM of candidate %s: %v", local[1].CanonicalName, err)
	}
	if err := reconfigure(pt(sysID)); err != nil {
		t.Fatalf("passthrough with the right systemId: %v", err)
	}

	// --- iSCSI port binding: a vmknic whose port group inherits the
	// switch's two active uplinks is not compliant; hoststorage fixes the
	// port group (one active uplink) and binds.
	ns, err := host.ConfigManager().NetworkSystem(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := ns.AddPortGroup(ctx, types.HostPortGroupSpec{Name: "iscsi-a", VswitchName: "vSwitch0", Policy: types.HostNetworkPolicy{}}); err != nil {
		t.Fatal(err)
	}
	vmk, err := ns.AddVirtualNic(ctx, "iscsi-a", types.HostVirtualNicSpec{Ip: &types.HostIpConfig{IpAddress: "10.30.0.9", SubnetMask: "255.255.255.0"}})
	if err != nil {
		t.Fatal(err)
	}
	h := hoststorage.New(c.Client, host)
	st, err := h.EnableISCSI(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var im mo.HostSystem
	if err := host.Properties(ctx, host.Reference(), []string{"configManager.iscsiManager"}, &im); err != nil {
		t.Fatal(err)
	}
	_, err = methods.BindVnic(ctx, c.Client, &types.BindVnic{This: *im.ConfigManager.IscsiManager, IScsiHbaName: st.HBA, VnicDevice: vmk})
	if err == nil || !strings.Contains(err.Error(), "exactly one active uplink and no standby") {
		t.Fatalf("binding %s with two active uplinks: %v", vmk, err)
	}
	bad := types.HostPortGroupSpec{Name: "iscsi-a", VswitchName: "vSwitch0", Policy: types.HostNetworkPolicy{
		NicTeaming: &types.HostNicTeamingPolicy{NicOrder: &types.HostNicOrderPolicy{ActiveNic: []string{"vmnic7"}}}}}
	if err := ns.UpdatePortGroup(ctx, "iscsi-a", bad); err == nil || !strings.Contains(err.Error(), "not an uplink") {
		t.Fatalf("teaming with a NIC the switch lacks: %v", err)
	}
	got, err := h.EnsureVmkernelPort(ctx, st.HBA, "iscsi-a", "vSwitch0", "10.30.0.9", "255.255.255.0", false)
	if err != nil || got != vmk {
		t.Fatalf("EnsureVmkernelPort: %s %v", got, err)
	}
	var nm mo.HostNetworkSystem
	if err := ns.Properties(ctx, ns.Reference(), []string{"networkInfo"}, &nm); err != nil {
		t.Fatal(err)
	}
	for _, pg := range nm.NetworkInfo.Portgroup {
		if pg.Spec.Name != "iscsi-a" {
			continue
		}
		o := pg.Spec.Policy.NicTeaming.NicOrder
		if !slices.Equal(o.ActiveNic, []string{"vmnic0"}) || len(o.StandbyNic) != 0 {
			t.Fatalf("iscsi-a teaming active %v standby %v, want [vmnic0] and none", o.ActiveNic, o.StandbyNic)
		}
	}
}

// newVM creates a plain VM with a paravirtual SCSI controller (key 1000)
// on host's local datastore.
func newVM(t *testing.T, ctx context.Context, c *vim25.Client, finder *find.Finder, host *object.HostSystem) *object.VirtualMachine {
	t.Helper()
	pool, err := host.ResourcePool(ctx)
	if err != nil {
		t.Fatal(err)
	}
	folders, err := finder.DefaultFolder(ctx)
	if err != nil {
		t.Fatal(err)
	}
	scsi, err := object.VirtualDeviceList{}.CreateSCSIController("pvscsi")
	if err != nil {
		t.Fatal(err)
	}
	scsi.GetVirtualDevice().Key = 1000
	spec := types.VirtualMachineConfigSpec{Name: "strict-vm", GuestId: string(types.VirtualMachineGuestOsIdentifierOtherLinux64Guest),
		NumCPUs: 1, MemoryMB: 512, Files: &types.VirtualMachineFileInfo{VmPathName: "[esx-01-local]"},
		DeviceChange: []types.BaseVirtualDeviceConfigSpec{&types.VirtualDeviceConfigSpec{Operation: types.VirtualDeviceConfigSpecOperationAdd, Device: scsi}}}
	task, err := folders.CreateVM(ctx, spec, pool, host)
	if err != nil {
		t.Fatal(err)
	}
	info, err := task.WaitForResult(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return object.NewVirtualMachine(c, info.Result.(types.ManagedObjectReference))
}
