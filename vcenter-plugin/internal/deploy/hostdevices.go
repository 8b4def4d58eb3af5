package deploy

import (
	"context"
	"fmt"
	"strings"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/property"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cairn-storage/cairn/vcenter-plugin/internal/plan"
)

// configTarget asks the host's compute resource what a VM on host may use
// (QueryConfigTarget): the devices it can pass through, with the system id
// their backing must carry, and the disks it can map raw.
func configTarget(ctx context.Context, host *object.HostSystem) (*types.ConfigTarget, error) {
	var hm mo.HostSystem
	if err := host.Properties(ctx, host.Reference(), []string{"parent"}, &hm); err != nil {
		return nil, fmt.Errorf("host %s: %w", host.Name(), err)
	}
	if hm.Parent == nil {
		return nil, fmt.Errorf("host %s has no compute resource", host.Name())
	}
	var cr mo.ComputeResource
	if err := property.DefaultCollector(host.Client()).RetrieveOne(ctx, *hm.Parent, []string{"environmentBrowser"}, &cr); err != nil {
		return nil, fmt.Errorf("host %s: compute resource: %w", host.Name(), err)
	}
	if cr.EnvironmentBrowser == nil {
		return nil, fmt.Errorf("host %s: its compute resource has no environment browser", host.Name())
	}
	ref := host.Reference()
	res, err := methods.QueryConfigTarget(ctx, host.Client(), &types.QueryConfigTarget{This: *cr.EnvironmentBrowser, Host: &ref})
	if err != nil {
		return nil, fmt.Errorf("host %s: query config target: %w", host.Name(), err)
	}
	if res.Returnval == nil {
		return &types.ConfigTarget{}, nil
	}
	return res.Returnval, nil
}

// pciBacking is the passthrough backing of PCI device id on host. Its
// systemId is the one QueryConfigTarget reports for the device, which is
// not the host's BIOS UUID (hardware.systemInfo.uuid): a backing with the
// wrong one does not power on.
func pciBacking(ctx context.Context, host *object.HostSystem, id string) (types.BaseVirtualDeviceBackingInfo, error) {
	ct, err := configTarget(ctx, host)
	if err != nil {
		return nil, err
	}
	for _, bp := range ct.PciPassthrough {
		p, ok := bp.(*types.VirtualMachinePciPassthroughInfo)
		if !ok || p.PciDevice.Id != id {
			continue
		}
		d := p.PciDevice
		return &types.VirtualPCIPassthroughDeviceBackingInfo{Id: id, DeviceId: fmt.Sprintf("%x", uint16(d.DeviceId)),
			VendorId: d.VendorId, SystemId: p.SystemId,
			VirtualDeviceDeviceBackingInfo: types.VirtualDeviceDeviceBackingInfo{DeviceName: d.DeviceName}}, nil
	}
	return nil, fmt.Errorf("host %s does not offer PCI device %s for passthrough: enable passthrough for it (Host > Configure > PCI Devices), reboot the host, then resume", host.Name(), id)
}

// checkRDMs refuses, before any change, a plan RDM the host would refuse:
// a disk not in QueryConfigTarget().scsiDisk (a local disk without a
// unique serial, or one holding VMFS). Disks the VM already maps are not
// asked about again.
func checkRDMs(ctx context.Context, host *object.HostSystem, cfg *vmConfig, h *plan.Host) error {
	attached := map[string]bool{}
	for _, d := range cfg.devices {
		if vd, ok := d.(*types.VirtualDisk); ok {
			if b, ok := vd.Backing.(*types.VirtualDiskRawDiskMappingVer1BackingInfo); ok {
				attached[strings.TrimPrefix(b.DeviceName, "/vmfs/devices/disks/")] = true
			}
		}
	}
	var want []string
	for _, d := range h.Devices {
		if d.Mode == plan.ModeRDM && !attached[d.Disk] {
			want = append(want, d.Disk)
		}
	}
	if len(want) == 0 {
		return nil
	}
	ct, err := configTarget(ctx, host)
	if err != nil {
		return err
	}
	capable := map[string]bool{}
	for _, d := range ct.ScsiDisk {
		if d.Disk != nil {
			capable[d.Disk.CanonicalName] = true
		}
	}
	for _, disk := range want {
		if !capable[disk] {
			return fmt.Errorf("host %s does not offer disk %s for raw mapping (a local disk without a unique serial, or one holding VMFS): pass its controller through instead, or choose another disk in the plan", host.Name(), disk)
		}
	}
	return nil
}
