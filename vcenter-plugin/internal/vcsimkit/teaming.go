package vcsimkit

import (
	"slices"
	"strings"

	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"
)

// Uplinks of every kit host's vSwitch0: two, both active, as on a
// production host with redundant uplinks. That is what makes iSCSI port
// binding fail on a real host unless the bound vmknic's port group
// overrides the teaming to one active uplink (see BindVnic).
var Uplinks = []string{"vmnic0", "vmnic1"}

// redundantUplinks gives vSwitch0 both uplinks, active, with its own
// policy objects (vcsim shares them between hosts).
func redundantUplinks(ni *types.HostNetworkInfo) {
	for i := range ni.Vswitch {
		sw := &ni.Vswitch[i]
		if sw.Name != "vSwitch0" {
			continue
		}
		sw.Pnic = nil
		for _, u := range Uplinks {
			sw.Pnic = append(sw.Pnic, "key-vim.host.PhysicalNic-"+u)
		}
		spec := sw.Spec
		spec.Bridge = &types.HostVirtualSwitchBondBridge{NicDevice: slices.Clone(Uplinks)}
		policy := types.HostNetworkPolicy{}
		if spec.Policy != nil {
			policy = *spec.Policy
		}
		teaming := types.HostNicTeamingPolicy{Policy: "loadbalance_srcid"}
		if policy.NicTeaming != nil {
			teaming = *policy.NicTeaming
		}
		teaming.NicOrder = &types.HostNicOrderPolicy{ActiveNic: slices.Clone(Uplinks)}
		policy.NicTeaming = &teaming
		spec.Policy = &policy
		sw.Spec = spec
	}
}

// vswitchUplinks returns the uplinks (vmnicN) of the named switch.
func vswitchUplinks(ni *types.HostNetworkInfo, name string) []string {
	for _, sw := range ni.Vswitch {
		if sw.Name == name {
			var out []string
			for _, p := range sw.Pnic {
				out = append(out, strings.TrimPrefix(p, "key-vim.host.PhysicalNic-"))
			}
			return out
		}
	}
	return nil
}

// effectiveTeaming is the NIC order a port group uses: its own override,
// or its switch's.
func effectiveTeaming(ni *types.HostNetworkInfo, portgroup string) (active, standby []string) {
	var pg *types.HostPortGroup
	for i := range ni.Portgroup {
		if ni.Portgroup[i].Spec.Name == portgroup {
			pg = &ni.Portgroup[i]
		}
	}
	if pg == nil {
		return nil, nil
	}
	if p := pg.Spec.Policy.NicTeaming; p != nil && p.NicOrder != nil {
		return p.NicOrder.ActiveNic, p.NicOrder.StandbyNic
	}
	for _, sw := range ni.Vswitch {
		if sw.Name == pg.Spec.VswitchName && sw.Spec.Policy != nil && sw.Spec.Policy.NicTeaming != nil && sw.Spec.Policy.NicTeaming.NicOrder != nil {
			o := sw.Spec.Policy.NicTeaming.NicOrder
			return o.ActiveNic, o.StandbyNic
		}
	}
	return nil, nil
}

// UpdatePortGroup changes a standard port group's spec (vcsim lacks it).
// Like ESXi it refuses a NIC order naming a NIC that is not an uplink of
// the port group's switch.
func (n *networkSystem) UpdatePortGroup(ctx *simulator.Context, req *types.UpdatePortGroup) soap.HasFault {
	n.mu.Lock()
	defer n.mu.Unlock()
	body := &methods.UpdatePortGroupBody{}
	for i := range n.NetworkInfo.Portgroup {
		pg := &n.NetworkInfo.Portgroup[i]
		if pg.Spec.Name != req.PgName {
			continue
		}
		if req.Portgrp.VswitchName != pg.Spec.VswitchName || req.Portgrp.Name != req.PgName {
			body.Fault_ = simulator.Fault("renaming a port group or moving it to another switch is not supported", &types.InvalidArgument{InvalidProperty: "portgrp"})
			return body
		}
		if t := req.Portgrp.Policy.NicTeaming; t != nil && t.NicOrder != nil {
			uplinks := vswitchUplinks(n.NetworkInfo, pg.Spec.VswitchName)
			for _, nic := range append(slices.Clone(t.NicOrder.ActiveNic), t.NicOrder.StandbyNic...) {
				if !slices.Contains(uplinks, nic) {
					body.Fault_ = simulator.Fault(nic+" is not an uplink of "+pg.Spec.VswitchName, &types.InvalidArgument{InvalidProperty: "portgrp.policy.nicTeaming.nicOrder"})
					return body
				}
			}
		}
		pg.Spec = req.Portgrp
		ctx.Update(n.HostNetworkSystem, []types.PropertyChange{{Name: "networkInfo", Val: n.NetworkInfo}})
		body.Res = &types.UpdatePortGroupResponse{}
		return body
	}
	body.Fault_ = simulator.Fault("port group "+req.PgName+" not found on this host", &types.NotFound{})
	return body
}

// bindable checks what ESXi checks when a vmknic is bound to the software
// iSCSI adapter: its port group must have exactly one active uplink and
// no standby uplink (otherwise the binding is "not compliant" and ESXi
// refuses it), so each bound vmknic carries iSCSI over one known NIC.
func (n *networkSystem) bindable(vmk string) *soap.Fault {
	n.mu.Lock()
	defer n.mu.Unlock()
	pg := ""
	for _, v := range n.NetworkInfo.Vnic {
		if v.Device == vmk {
			pg = v.Portgroup
		}
	}
	if pg == "" {
		return simulator.Fault("no vmkernel NIC "+vmk+": create it first", &types.NotFound{})
	}
	active, standby := effectiveTeaming(n.NetworkInfo, pg)
	switch {
	case len(active) == 0:
		return simulator.Fault(vmk+" is not compliant for iSCSI port binding: port group "+pg+" has no active uplink", &types.IscsiFaultVnicHasNoUplinks{})
	case len(active) > 1 || len(standby) > 0:
		return simulator.Fault(vmk+" is not compliant for iSCSI port binding: port group "+pg+" must have exactly one active uplink and no standby uplinks (has active "+
			strings.Join(active, ",")+", standby "+strings.Join(standby, ",")+")", &types.IscsiFaultVnicHasMultipleUplinks{})
	}
	return nil
}
