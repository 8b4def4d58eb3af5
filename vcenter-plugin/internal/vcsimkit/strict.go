package vcsimkit

import (
	"fmt"
	"hash/fnv"
	"strings"

	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"
)

// What vCenter and ESXi refuse that vcsim accepts, for the devices an SVM
// gets:
//
//   - A PCI passthrough backing names its device by id and by the
//     *system id* QueryConfigTarget().pciPassthrough[].systemId reports for
//     the host. That is not hardware.systemInfo.uuid (the BIOS UUID); a
//     backing with the wrong one does not power on. The kit refuses it at
//     ReconfigVM, where the bad backing is made.
//   - An RDM can only map a disk QueryConfigTarget().scsiDisk lists. Local
//     disks without a unique identifier (ESXi names them mpx.vmhbaN:C:T:L)
//     are not listed and cannot be RDMs; neither can a disk holding VMFS.
//
// QueryConfigTarget is answered by the cluster's environment browser, for
// the host the request names.

// SystemID is the passthrough system id the kit reports for a host.
func SystemID(host string) string {
	h := fnv.New64a()
	h.Write([]byte("pci-system/" + host))
	v := h.Sum64()
	return fmt.Sprintf("%08x-%04x-%04x-%04x-%012x", uint32(v>>32), uint16(v>>16), uint16(v), uint16(v>>48), v&0xFFFFFFFFFFFF)
}

// NonRDMDisk is the canonical name of the local disk every kit host has
// besides its candidate disks: a SATA disk without a unique serial, which
// ESXi names by path and will not map as an RDM.
const NonRDMDisk = "mpx.vmhba1:C0:T0:L0"

// envBrowser answers QueryConfigTarget with the passthrough devices and
// the RDM-capable disks of the host asked about.
type envBrowser struct {
	*simulator.EnvironmentBrowser
	kit *Kit
}

func (b *envBrowser) QueryConfigTarget(ctx *simulator.Context, req *types.QueryConfigTarget) soap.HasFault {
	body := b.EnvironmentBrowser.QueryConfigTarget(ctx, req).(*methods.QueryConfigTargetBody)
	if body.Res == nil || body.Res.Returnval == nil || req.Host == nil {
		return body
	}
	target := *body.Res.Returnval // vcsim builds a new one per call; copy anyway
	target.PciPassthrough = b.kit.passthroughTargets(ctx, *req.Host)
	target.ScsiDisk = b.kit.rdmTargets(*req.Host)
	body.Res.Returnval = &target
	return body
}

func (k *Kit) passthroughTargets(ctx *simulator.Context, host types.ManagedObjectReference) []types.BaseVirtualMachinePciPassthroughInfo {
	h, ok := ctx.Map.Get(host).(*simulator.HostSystem)
	kh := k.hosts[host]
	if !ok || kh == nil {
		return nil
	}
	devs := map[string]types.HostPciDevice{}
	for _, d := range h.Hardware.PciDevice {
		devs[d.Id] = d
	}
	var out []types.BaseVirtualMachinePciPassthroughInfo
	for _, bp := range h.Config.PciPassthruInfo {
		p := bp.GetHostPciPassthruInfo()
		if !p.PassthruActive {
			continue
		}
		out = append(out, &types.VirtualMachinePciPassthroughInfo{
			VirtualMachineTargetInfo: types.VirtualMachineTargetInfo{Name: devs[p.Id].DeviceName},
			PciDevice:                devs[p.Id], SystemId: SystemID(kh.name)})
	}
	return out
}

// rdmTargets lists the disks of host an RDM may map: not path-named
// (mpx.…), not holding VMFS.
func (k *Kit) rdmTargets(host types.ManagedObjectReference) []types.VirtualMachineScsiDiskDeviceInfo {
	kh := k.hosts[host]
	if kh == nil {
		return nil
	}
	vmfs := k.vmfsExtents()
	var out []types.VirtualMachineScsiDiskDeviceInfo
	for _, d := range kh.storage.luns() {
		if strings.HasPrefix(d.CanonicalName, "mpx.") || vmfs[d.CanonicalName] {
			continue
		}
		out = append(out, types.VirtualMachineScsiDiskDeviceInfo{
			VirtualMachineDiskDeviceInfo: types.VirtualMachineDiskDeviceInfo{
				VirtualMachineTargetInfo: types.VirtualMachineTargetInfo{Name: d.DeviceName}, Capacity: d.Capacity.Block * int64(d.Capacity.BlockSize)},
			Disk: d})
	}
	return out
}

// strictHandler is the registry's method hook: it refuses calls that need
// a host that does not respond (hostfailure.go) and the ReconfigVM calls
// vCenter would refuse (see the top of this file), and lets every other
// call through.
func (k *Kit) strictHandler(ctx *simulator.Context, m *simulator.Method) (mo.Reference, types.BaseMethodFault) {
	if f := k.unreachable(ctx, m); f != nil {
		return nil, f
	}
	req, ok := m.Body.(*types.ReconfigVM_Task)
	if !ok {
		return nil, nil
	}
	vm, ok := ctx.Map.Get(m.This).(*simulator.VirtualMachine)
	if !ok || vm.Runtime.Host == nil {
		return nil, nil
	}
	if msg := k.checkDevices(ctx, *vm.Runtime.Host, req.Spec.DeviceChange); msg != "" {
		// The hook can only answer with a fault (a replacement handler
		// would be overridden by the session's view of the VM), and vcsim
		// sends it without a fault string: the text goes in FaultMessage.
		f := &types.InvalidDeviceBacking{}
		f.FaultMessage = []types.LocalizableMessage{{Key: "com.vmware.vim.vpxd.vmprov.incompatibleDeviceBacking", Message: msg}}
		return nil, f
	}
	return nil, nil
}

// FaultMessage returns the text of a fault the kit refused a call with.
func FaultMessage(err error) string {
	if !soap.IsSoapFault(err) {
		return ""
	}
	var vf types.BaseMethodFault
	switch f := soap.ToSoapFault(err).VimFault().(type) {
	case types.BaseMethodFault:
		vf = f
	case types.InvalidDeviceBacking: // decoded by value
		vf = &f
	default:
		return ""
	}
	var parts []string
	for _, m := range vf.GetMethodFault().FaultMessage {
		parts = append(parts, m.Message)
	}
	return strings.Join(parts, "; ")
}

func (k *Kit) checkDevices(ctx *simulator.Context, host types.ManagedObjectReference, changes []types.BaseVirtualDeviceConfigSpec) string {
	kh := k.hosts[host]
	if kh == nil {
		return ""
	}
	rdm := map[string]bool{}
	for _, d := range k.rdmTargets(host) {
		rdm[d.Disk.DevicePath] = true
	}
	pci := map[string]string{} // id -> system id
	for _, p := range k.passthroughTargets(ctx, host) {
		info := p.(*types.VirtualMachinePciPassthroughInfo)
		pci[info.PciDevice.Id] = info.SystemId
	}
	for i, c := range changes {
		spec := c.GetVirtualDeviceConfigSpec()
		if spec.Operation != types.VirtualDeviceConfigSpecOperationAdd {
			continue
		}
		switch dev := spec.Device.(type) {
		case *types.VirtualDisk:
			if b, ok := dev.Backing.(*types.VirtualDiskRawDiskMappingVer1BackingInfo); ok && !rdm[b.DeviceName] {
				return fmt.Sprintf("Incompatible device backing specified for device '%d': %s on %s is not an RDM-capable disk (not in QueryConfigTarget().scsiDisk)", i, b.DeviceName, kh.name)
			}
		case *types.VirtualPCIPassthrough:
			b, ok := dev.Backing.(*types.VirtualPCIPassthroughDeviceBackingInfo)
			if !ok {
				continue
			}
			sys, found := pci[b.Id]
			switch {
			case !found:
				return fmt.Sprintf("Incompatible device backing specified for device '%d': PCI device %s of %s is not available for passthrough", i, b.Id, kh.name)
			case b.SystemId != sys:
				return fmt.Sprintf("Incompatible device backing specified for device '%d': systemId %q of PCI device %s is not %s's (%q, from QueryConfigTarget().pciPassthrough[].systemId)", i, b.SystemId, b.Id, kh.name, sys)
			}
		}
	}
	return ""
}
