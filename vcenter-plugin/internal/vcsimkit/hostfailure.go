package vcsimkit

import (
	"fmt"

	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"
)

// A failed ESXi host, as vCenter shows it: FailHost sets the host's
// runtime.connectionState to notResponding and its VMs' to disconnected
// (their power state stays the last one vCenter knew). vCenter can no
// longer reach the host, so every call that needs it fails with
// HostNotConnected: calls on the host and its config managers (rescans,
// iSCSI), on its VMs (power, reconfigure, destroy, clone from them) and
// clones placed on it. Reading properties still answers (vCenter's
// inventory); UnregisterVM (remove from inventory) goes on to vcsim, which
// refuses it for a VM it still thinks powered on. Nothing of this runs the
// guest hooks: whoever fails a host stops its SVM's guest.

// FailHost marks host not responding and its VMs disconnected.
func (k *Kit) FailHost(host string) error {
	ctx := k.simContext()
	for ref, h := range k.hosts {
		if h.name != host {
			continue
		}
		hs := ctx.Map.Get(ref).(*simulator.HostSystem)
		var vms []types.ManagedObjectReference
		ctx.WithLock(hs, func() {
			hs.Runtime.ConnectionState = types.HostSystemConnectionStateNotResponding
			hs.Summary.Runtime = &hs.Runtime
			ctx.Update(hs, []types.PropertyChange{{Name: "runtime.connectionState", Val: hs.Runtime.ConnectionState}})
			vms = append(vms, hs.Vm...)
		})
		for _, ref := range vms {
			vm, ok := ctx.Map.Get(ref).(*simulator.VirtualMachine)
			if !ok {
				continue
			}
			ctx.WithLock(vm, func() {
				vm.Runtime.ConnectionState = types.VirtualMachineConnectionStateDisconnected
				vm.Summary.Runtime.ConnectionState = types.VirtualMachineConnectionStateDisconnected
				ctx.Update(vm, []types.PropertyChange{
					{Name: "runtime.connectionState", Val: vm.Runtime.ConnectionState},
					{Name: "summary.runtime.connectionState", Val: vm.Runtime.ConnectionState}})
			})
		}
		return nil
	}
	return fmt.Errorf("vcsimkit: no host %s (hosts: %v)", host, k.HostNames())
}

// unreachable answers the fault vCenter gives for a call that needs a
// host that does not respond, or nil when the call can go on.
func (k *Kit) unreachable(ctx *simulator.Context, m *simulator.Method) types.BaseMethodFault {
	refuse := func(hostRef types.ManagedObjectReference, what string) types.BaseMethodFault {
		hs, ok := ctx.Map.Get(hostRef).(*simulator.HostSystem)
		if !ok || hs.Runtime.ConnectionState != types.HostSystemConnectionStateNotResponding {
			return nil
		}
		f := &types.HostNotConnected{}
		f.FaultMessage = []types.LocalizableMessage{{Key: "vob.vpxd.host.notresponding",
			Message: fmt.Sprintf("%s: host %s is not responding; vCenter cannot reach it", what, hs.Name)}}
		return f
	}
	switch obj := ctx.Map.Get(m.This).(type) {
	case *simulator.VirtualMachine:
		if _, ok := m.Body.(*types.UnregisterVM); ok || obj.Runtime.Host == nil {
			return nil
		}
		if f := refuse(*obj.Runtime.Host, m.Name+" on VM "+obj.Name); f != nil {
			return f
		}
		if req, ok := m.Body.(*types.CloneVM_Task); ok && req.Spec.Location.Host != nil {
			return refuse(*req.Spec.Location.Host, "clone to it")
		}
		return nil
	case *simulator.HostSystem:
		return refuse(obj.Self, m.Name)
	case mo.Reference:
		// The host's config managers (storage, datastore, network…).
		for ref := range k.hosts {
			hs, ok := ctx.Map.Get(ref).(*simulator.HostSystem)
			if !ok || hs.Runtime.ConnectionState != types.HostSystemConnectionStateNotResponding {
				continue
			}
			for _, mgr := range managers(hs) {
				if mgr == m.This {
					return refuse(ref, m.Name)
				}
			}
		}
	}
	return nil
}

func managers(hs *simulator.HostSystem) []types.ManagedObjectReference {
	c := hs.ConfigManager
	var out []types.ManagedObjectReference
	for _, r := range []*types.ManagedObjectReference{c.StorageSystem, c.DatastoreSystem, c.NetworkSystem, c.VirtualNicManager,
		c.FirewallSystem, c.AdvancedOption, c.ServiceSystem, c.DateTimeSystem, c.CertificateManager, c.PciPassthruSystem} {
		if r != nil {
			out = append(out, *r)
		}
	}
	return out
}
