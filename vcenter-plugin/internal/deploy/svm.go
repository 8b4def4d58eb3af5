package deploy

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cairn-storage/cairn/appliance/contract"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/plan"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/poll"
)

// Guest info keys an SVM publishes through VMware Tools (appliance/contract;
// vcsimkit simulates them).
const (
	GuestReady      = contract.GuestReady
	ReadyValue      = contract.ReadyValue
	GuestThumbprint = contract.GuestThumbprint
	// GuestPassthroughPrefix + PCI id: the guest path of a passthrough device.
	GuestPassthroughPrefix = "guestinfo.cairn.passthrough."
)

// findVM returns the VM called name in the datacenter, or nil.
// hostSVM finds h's SVM; without one (no SVM in the plan, or already gone)
// vm is nil and none says which.
func (r *run) hostSVM(ctx context.Context, h *plan.Host) (vm *object.VirtualMachine, name, none string, err error) {
	if !h.HasSVM() {
		return nil, "", "no SVM", nil
	}
	name = r.p.SVMName(h.Name)
	if vm, err = findVM(ctx, r.finder, name); err != nil {
		return nil, name, "", err
	}
	if vm == nil {
		return nil, name, "already gone", nil
	}
	return vm, name, "", nil
}

func findVM(ctx context.Context, f *find.Finder, name string) (*object.VirtualMachine, error) {
	vm, err := f.VirtualMachine(ctx, name)
	var nf *find.NotFoundError
	if errors.As(err, &nf) {
		return nil, nil
	}
	return vm, err
}

// GuestInfo reads the VM's guestinfo.* values, power and tools state.
type GuestInfo struct {
	PowerState   types.VirtualMachinePowerState
	ToolsRunning bool
	IP           string
	Values       map[string]string
	Host         types.ManagedObjectReference
}

// ReadGuest reads what the guest of vm reports.
func ReadGuest(ctx context.Context, vm *object.VirtualMachine) (GuestInfo, error) {
	var m mo.VirtualMachine
	if err := vm.Properties(ctx, vm.Reference(), []string{"runtime", "guest", "config.extraConfig"}, &m); err != nil {
		return GuestInfo{}, err
	}
	g := GuestInfo{PowerState: m.Runtime.PowerState, Values: map[string]string{}}
	if m.Runtime.Host != nil {
		g.Host = *m.Runtime.Host
	}
	if m.Guest != nil {
		g.ToolsRunning = m.Guest.ToolsRunningStatus == string(types.VirtualMachineToolsRunningStatusGuestToolsRunning)
		g.IP = m.Guest.IpAddress
	}
	if m.Config != nil {
		for _, o := range m.Config.ExtraConfig {
			if ov := o.GetOptionValue(); ov != nil && strings.HasPrefix(ov.Key, "guestinfo.") {
				g.Values[ov.Key], _ = ov.Value.(string)
			}
		}
	}
	return g, nil
}

// WaitReady waits until vm is on, its tools run and it reports ready; an
// SVM that reports its start failed ends the wait at once.
func WaitReady(ctx context.Context, vm *object.VirtualMachine, timeout, interval time.Duration) (GuestInfo, error) {
	var g GuestInfo
	err := poll.Until(ctx, timeout, interval, "open its console and check `journalctl -u 'cairn*'`, fix, restart the SVM, then resume", func() (bool, string, error) {
		var err error
		if g, err = ReadGuest(ctx, vm); err != nil {
			return false, "", err
		}
		if g.PowerState == types.VirtualMachinePowerStatePoweredOn && g.ToolsRunning && g.Values[GuestReady] == ReadyValue {
			return true, "", nil
		}
		if msg, failed := strings.CutPrefix(g.Values[GuestReady], "error:"); failed && g.PowerState == types.VirtualMachinePowerStatePoweredOn {
			return false, "", fmt.Errorf("SVM %s reports it failed to start: %s — open its console (journalctl -u cairn-firstboot), fix, restart the SVM, then resume", vm.Name(), strings.TrimSpace(msg))
		}
		why := "VMware Tools are not running"
		switch {
		case g.PowerState != types.VirtualMachinePowerStatePoweredOn:
			why = "it is " + string(g.PowerState)
		case g.ToolsRunning:
			why = "its Cairn services did not report ready"
		}
		return false, fmt.Sprintf("SVM %s is not ready (%s)", vm.Name(), why), nil
	})
	return g, err
}

// vmConfig is the part of a VM's configuration the engine edits.
type vmConfig struct {
	devices object.VirtualDeviceList
	vapp    *types.VmConfigInfo
}

func readConfig(ctx context.Context, vm *object.VirtualMachine) (*vmConfig, error) {
	var m mo.VirtualMachine
	if err := vm.Properties(ctx, vm.Reference(), []string{"config.hardware.device", "config.vAppConfig"}, &m); err != nil {
		return nil, err
	}
	c := &vmConfig{devices: object.VirtualDeviceList(m.Config.Hardware.Device)}
	if va, ok := m.Config.VAppConfig.(*types.VmConfigInfo); ok {
		c.vapp = va
	}
	return c, nil
}

// vappSpec sets the wanted property values: edit where the VM has the
// property (vCenter keeps them on clone), add from the template's
// definition where it does not.
func vappSpec(current, template *types.VmConfigInfo, want map[string]string) (*types.VmConfigSpec, error) {
	spec := &types.VmConfigSpec{OvfEnvironmentTransport: []string{"com.vmware.guestInfo"}}
	have := map[string]types.VAppPropertyInfo{}
	maxKey := int32(0)
	if current != nil {
		for _, p := range current.Property {
			have[p.Id] = p
			maxKey = max(maxKey, p.Key)
		}
	}
	defs := map[string]types.VAppPropertyInfo{}
	if template != nil {
		for _, p := range template.Property {
			defs[p.Id] = p
		}
	}
	for _, id := range sortedKeys(want) {
		v := want[id]
		if p, ok := have[id]; ok {
			if p.Value == v {
				continue
			}
			p.Value = v
			spec.Property = append(spec.Property, types.VAppPropertySpec{ArrayUpdateSpec: types.ArrayUpdateSpec{Operation: types.ArrayUpdateOperationEdit}, Info: &p})
			continue
		}
		def, ok := defs[id]
		if !ok {
			return nil, fmt.Errorf("the SVM template has no vApp property %s: it was made from an older Cairn OVA; upload the OVA of this version as the template", id)
		}
		maxKey++
		def.Key = maxKey
		def.Value = v
		spec.Property = append(spec.Property, types.VAppPropertySpec{ArrayUpdateSpec: types.ArrayUpdateSpec{Operation: types.ArrayUpdateOperationAdd}, Info: &def})
	}
	return spec, nil
}

// deviceChanges attaches the plan's devices not yet attached: one
// paravirtual SCSI controller for the RDMs (added if missing), physical
// compatibility RDMs, PCI passthrough devices; and connects the first NIC
// to the SVM network.
func deviceChanges(ctx context.Context, c *vim25.Client, cfg *vmConfig, h *plan.Host, disks map[string]int64, netBacking, dataBacking types.BaseVirtualDeviceBackingInfo, pciBacking func(id string) (types.BaseVirtualDeviceBackingInfo, error)) ([]types.BaseVirtualDeviceConfigSpec, bool, error) {
	var changes []types.BaseVirtualDeviceConfigSpec
	attached := map[string]bool{}
	for _, d := range cfg.devices {
		switch x := d.(type) {
		case *types.VirtualDisk:
			if b, ok := x.Backing.(*types.VirtualDiskRawDiskMappingVer1BackingInfo); ok {
				attached[strings.TrimPrefix(b.DeviceName, "/vmfs/devices/disks/")] = true
			}
		case *types.VirtualPCIPassthrough:
			if b, ok := x.Backing.(*types.VirtualPCIPassthroughDeviceBackingInfo); ok {
				attached[b.Id] = true
			}
		}
	}
	var ctrl types.BaseVirtualController
	for _, d := range cfg.devices {
		if s, ok := d.(*types.ParaVirtualSCSIController); ok {
			ctrl = s
		}
	}
	unit := int32(0)
	used := map[int32]bool{7: true} // unit 7 is the controller itself
	if ctrl != nil {
		for _, d := range cfg.devices {
			if vd := d.GetVirtualDevice(); vd.ControllerKey == ctrl.GetVirtualController().Key && vd.UnitNumber != nil {
				used[*vd.UnitNumber] = true
			}
		}
	}
	nextUnit := func() int32 {
		for used[unit] {
			unit++
		}
		used[unit] = true
		return unit
	}
	passthrough := false
	key := int32(-200)
	for _, dev := range h.Devices {
		switch dev.Mode {
		case plan.ModeRDM:
			if attached[dev.Disk] {
				continue
			}
			if ctrl == nil {
				sc, err := object.VirtualDeviceList{}.CreateSCSIController("pvscsi")
				if err != nil {
					return nil, false, err
				}
				sc.GetVirtualDevice().Key = -100
				ctrl = sc.(types.BaseVirtualController)
				changes = append(changes, &types.VirtualDeviceConfigSpec{Operation: types.VirtualDeviceConfigSpecOperationAdd, Device: sc})
			}
			key--
			rdm := &types.VirtualDisk{VirtualDevice: types.VirtualDevice{Key: key, ControllerKey: ctrl.GetVirtualController().Key, UnitNumber: types.NewInt32(nextUnit()),
				Backing: &types.VirtualDiskRawDiskMappingVer1BackingInfo{DeviceName: "/vmfs/devices/disks/" + dev.Disk,
					CompatibilityMode: string(types.VirtualDiskCompatibilityModePhysicalMode), DiskMode: string(types.VirtualDiskModeIndependent_persistent)}},
				CapacityInBytes: disks[dev.Disk]}
			// An RDM is a mapping file next to the VM: fileOperation create.
			changes = append(changes, &types.VirtualDeviceConfigSpec{Operation: types.VirtualDeviceConfigSpecOperationAdd,
				FileOperation: types.VirtualDeviceConfigSpecFileOperationCreate, Device: rdm})
		case plan.ModePassthrough:
			passthrough = true
			if attached[dev.PCI] {
				continue
			}
			b, err := pciBacking(dev.PCI)
			if err != nil {
				return nil, false, err
			}
			key--
			changes = append(changes, &types.VirtualDeviceConfigSpec{Operation: types.VirtualDeviceConfigSpecOperationAdd,
				Device: &types.VirtualPCIPassthrough{VirtualDevice: types.VirtualDevice{Key: key, Backing: b}}})
		}
	}
	// NIC 0 (eth0) is management, NIC 1 (eth1) data, as firstboot expects.
	nics := cfg.devices.SelectByType((*types.VirtualEthernetCard)(nil))
	for i, backing := range []types.BaseVirtualDeviceBackingInfo{netBacking, dataBacking} {
		if backing == nil {
			continue
		}
		if i >= len(nics) {
			nic, err := object.EthernetCardTypes().CreateEthernetCard("vmxnet3", backing)
			if err != nil {
				return nil, false, err
			}
			key--
			nic.GetVirtualDevice().Key = key
			nic.GetVirtualDevice().Connectable = &types.VirtualDeviceConnectInfo{StartConnected: true, Connected: true, AllowGuestControl: true}
			changes = append(changes, &types.VirtualDeviceConfigSpec{Operation: types.VirtualDeviceConfigSpecOperationAdd, Device: nic})
			continue
		}
		nic := nics[i]
		vd := nic.GetVirtualDevice()
		if !sameNetwork(vd.Backing, backing) || vd.Connectable == nil || !vd.Connectable.StartConnected {
			vd.Backing = backing
			vd.Connectable = &types.VirtualDeviceConnectInfo{StartConnected: true, Connected: true, AllowGuestControl: true}
			changes = append(changes, &types.VirtualDeviceConfigSpec{Operation: types.VirtualDeviceConfigSpecOperationEdit, Device: nic})
		}
	}
	return changes, passthrough, nil
}

func sameNetwork(a, b types.BaseVirtualDeviceBackingInfo) bool {
	switch x := a.(type) {
	case *types.VirtualEthernetCardNetworkBackingInfo:
		y, ok := b.(*types.VirtualEthernetCardNetworkBackingInfo)
		return ok && x.DeviceName == y.DeviceName
	case *types.VirtualEthernetCardDistributedVirtualPortBackingInfo:
		y, ok := b.(*types.VirtualEthernetCardDistributedVirtualPortBackingInfo)
		return ok && x.Port.PortgroupKey == y.Port.PortgroupKey
	}
	return false
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
