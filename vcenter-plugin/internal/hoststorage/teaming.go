package hoststorage

import (
	"context"
	"fmt"
	"strings"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"
)

// singleUplink makes the port group of an iSCSI-bound vmknic compliant
// for port binding: ESXi refuses to bind a vmknic whose port group has
// more than one active uplink or any standby uplink (a bound vmknic is one
// path; the path's NIC must be fixed, and the multipathing layer, not NIC
// teaming, handles failover). A port group inheriting a switch's
// redundant uplinks gets an override: the switch's first active uplink
// active, the others unused. A compliant port group is left alone.
func (h *Host) singleUplink(ctx context.Context, ns *object.HostNetworkSystem, portgroup string) error {
	var m mo.HostNetworkSystem
	if err := ns.Properties(ctx, ns.Reference(), []string{"networkInfo"}, &m); err != nil {
		return fmt.Errorf("host %s: read network: %w", h.Name, err)
	}
	ni := m.NetworkInfo
	if ni == nil {
		return fmt.Errorf("host %s: no network information", h.Name)
	}
	var pg *types.HostPortGroup
	for i := range ni.Portgroup {
		if ni.Portgroup[i].Spec.Name == portgroup {
			pg = &ni.Portgroup[i]
		}
	}
	if pg == nil {
		return fmt.Errorf("host %s: port group %s not found", h.Name, portgroup)
	}
	var sw *types.HostVirtualSwitch
	for i := range ni.Vswitch {
		if ni.Vswitch[i].Name == pg.Spec.VswitchName {
			sw = &ni.Vswitch[i]
		}
	}
	if sw == nil {
		return fmt.Errorf("host %s: port group %s is on %s, which is not a standard switch of this host: bind a vmknic on a standard switch port group, or set its teaming by hand (one active uplink, no standby)", h.Name, portgroup, pg.Spec.VswitchName)
	}
	active, standby := switchOrder(sw)
	if t := pg.Spec.Policy.NicTeaming; t != nil && t.NicOrder != nil {
		active, standby = t.NicOrder.ActiveNic, t.NicOrder.StandbyNic
	}
	if len(active) == 1 && len(standby) == 0 {
		return nil
	}
	uplink := ""
	if a, _ := switchOrder(sw); len(a) > 0 {
		uplink = a[0]
	} else if len(sw.Pnic) > 0 {
		uplink = strings.TrimPrefix(sw.Pnic[0], "key-vim.host.PhysicalNic-")
	}
	if uplink == "" {
		return fmt.Errorf("host %s: switch %s has no uplink: add a physical NIC to it for iSCSI", h.Name, sw.Name)
	}
	spec := pg.Spec
	teaming := types.HostNicTeamingPolicy{}
	if spec.Policy.NicTeaming != nil {
		teaming = *spec.Policy.NicTeaming
	}
	teaming.NicOrder = &types.HostNicOrderPolicy{ActiveNic: []string{uplink}}
	spec.Policy.NicTeaming = &teaming
	if err := ns.UpdatePortGroup(ctx, portgroup, spec); err != nil {
		return fmt.Errorf("host %s: set port group %s to one active uplink (%s) for iSCSI port binding: %w", h.Name, portgroup, uplink, err)
	}
	return nil
}

func switchOrder(sw *types.HostVirtualSwitch) (active, standby []string) {
	if p := sw.Spec.Policy; p != nil && p.NicTeaming != nil && p.NicTeaming.NicOrder != nil {
		return p.NicTeaming.NicOrder.ActiveNic, p.NicTeaming.NicOrder.StandbyNic
	}
	return nil, nil
}
