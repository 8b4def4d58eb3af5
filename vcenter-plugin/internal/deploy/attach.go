// Adding a device to a deployed SVM (day 2): the same device change the
// deploy's configure step makes, on the running SVM.

package deploy

import (
	"context"
	"fmt"
	"strings"

	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cairn-storage/cairn/vcenter-plugin/internal/inventory"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/plan"
)

// AttachDevice makes dev visible to the SVM of plan host h and returns the
// path its SDS opens (DefaultDevicePath) and whether the SVM was changed.
//
// An RDM not yet attached is hot-added (physical compatibility, on the
// SVM's paravirtual SCSI controller; vSphere hot-adds a disk to a running
// VM, and the guest sees it as a new SCSI disk). The host must offer the
// disk for raw mapping (checkRDMs). A PCI passthrough device must be
// attached already: ESXi adds one only to a powered-off VM with all its
// memory reserved, which is the deploy's work (add it to the plan).
func AttachDevice(ctx context.Context, vc *vim25.Client, p *plan.Plan, h *plan.Host, dev plan.Device, diskSize int64) (string, bool, error) {
	loc, err := inventory.Locate(ctx, vc, p.Datacenter, []string{h.Name})
	if err != nil {
		return "", false, err
	}
	host := loc.Hosts[h.Name]
	name := p.SVMName(h.Name)
	vm, err := loc.Finder.VirtualMachine(ctx, name)
	if err != nil {
		return "", false, fmt.Errorf("SVM %s: %w (is the system deployed on %s?)", name, err, h.Name)
	}
	cfg, err := readConfig(ctx, vm)
	if err != nil {
		return "", false, err
	}
	g, err := ReadGuest(ctx, vm)
	if err != nil {
		return "", false, err
	}
	if g.PowerState != types.VirtualMachinePowerStatePoweredOn {
		return "", false, fmt.Errorf("SVM %s is %s: power it on (its SDS must run to prepare the device), then try again", name, g.PowerState)
	}
	changed := false
	if !hasDevice(cfg, dev) {
		if dev.Mode == plan.ModePassthrough {
			return "", false, fmt.Errorf("PCI device %s is not passed through to SVM %s: ESXi adds passthrough devices only to a powered-off VM; add it to the plan's devices of %s and run the deploy again (its host goes through maintenance), then add it here", dev.PCI, name, h.Name)
		}
		one := &plan.Host{Name: h.Name, Devices: []plan.Device{dev}}
		if err := checkRDMs(ctx, host, cfg, one); err != nil {
			return "", false, err
		}
		if len(cfg.devices.SelectByType((*types.ParaVirtualSCSIController)(nil))) == 0 {
			return "", false, fmt.Errorf("SVM %s has no paravirtual SCSI controller for raw disks, and one is not added to a running VM: add the disk to the plan and run the deploy again", name)
		}
		changes, _, err := deviceChanges(ctx, vc, cfg, one, map[string]int64{dev.Disk: diskSize}, nil, nil, nil)
		if err != nil {
			return "", false, err
		}
		task, err := vm.Reconfigure(ctx, types.VirtualMachineConfigSpec{DeviceChange: changes})
		if err != nil {
			return "", false, err
		}
		if err := task.Wait(ctx); err != nil {
			return "", false, fmt.Errorf("attach disk %s to SVM %s as a raw device mapping: %w", dev.Disk, name, err)
		}
		// The device the SDS opens must be one the SVM really has.
		if cfg, err = readConfig(ctx, vm); err != nil {
			return "", false, err
		}
		if !hasDevice(cfg, dev) {
			return "", false, fmt.Errorf("vCenter accepted the change but SVM %s does not map disk %s: check its settings in vSphere", name, dev.Disk)
		}
		changed = true
	}
	path, err := DefaultDevicePath(h.Name, dev, g.Values)
	return path, changed, err
}

// hasDevice says whether the VM's configuration holds dev (an RDM of its
// disk, or its PCI device passed through).
func hasDevice(cfg *vmConfig, dev plan.Device) bool {
	for _, d := range cfg.devices {
		switch x := d.(type) {
		case *types.VirtualDisk:
			if b, ok := x.Backing.(*types.VirtualDiskRawDiskMappingVer1BackingInfo); ok && dev.Mode == plan.ModeRDM &&
				strings.TrimPrefix(b.DeviceName, "/vmfs/devices/disks/") == dev.Disk {
				return true
			}
		case *types.VirtualPCIPassthrough:
			if b, ok := x.Backing.(*types.VirtualPCIPassthroughDeviceBackingInfo); ok && dev.Mode == plan.ModePassthrough && b.Id == dev.PCI {
				return true
			}
		}
	}
	return false
}

// RecordPlanChange makes the deploy state of a deployed system stand for
// updated, a plan whose devices changed on day 2 (device add or remove):
// the state names the plan it deployed by hash, and refuses any other.
// Only devices may differ from old.
func RecordPlanChange(dir string, old, updated *plan.Plan) error {
	st, err := LoadState(dir, old)
	if err != nil {
		return err
	}
	if !st.Completed {
		return fmt.Errorf("system %s is not fully deployed: finish the deployment first", old.System)
	}
	a, b := *old, *updated
	a.Hosts, b.Hosts = nil, nil
	if planHash(&a) != planHash(&b) || len(old.Hosts) != len(updated.Hosts) {
		return fmt.Errorf("system %s: only devices change on a deployed system", old.System)
	}
	for i := range old.Hosts {
		x, y := old.Hosts[i], updated.Hosts[i]
		x.Devices, y.Devices = nil, nil
		a.Hosts, b.Hosts = []plan.Host{x}, []plan.Host{y}
		if planHash(&a) != planHash(&b) {
			return fmt.Errorf("system %s: only devices change on a deployed system (host %s differs)", old.System, x.Name)
		}
	}
	st.PlanSHA256 = planHash(updated)
	return st.Save(dir)
}
