package plan

import (
	"fmt"
	"net/netip"

	"github.com/cairn-storage/cairn/vcenter-plugin/internal/inventory"
)

// Suggest drafts a plan for the connected hosts of the first cluster of
// the datacenter: 3 MDM voters (5 from 7 hosts on), SDS and target on
// every host, gateway on the first two, one fault set per host, every
// candidate disk as an RDM, addresses counted up from .11 in svmCIDR and
// from .101 in iscsiCIDR. The wizard starts from it; Validate still rules.
func Suggest(inv *inventory.Inventory, datacenter, system, template, svmCIDR, iscsiCIDR string) (*Plan, error) {
	var dc *inventory.Datacenter
	for i := range inv.Datacenters {
		if inv.Datacenters[i].Name == datacenter {
			dc = &inv.Datacenters[i]
		}
	}
	if dc == nil || len(dc.Clusters) == 0 {
		return nil, fmt.Errorf("datacenter %q has no cluster to suggest a plan for", datacenter)
	}
	svmNet, err := netip.ParsePrefix(svmCIDR)
	if err != nil {
		return nil, fmt.Errorf("svm subnet: %w", err)
	}
	iscsiNet, err := netip.ParsePrefix(iscsiCIDR)
	if err != nil {
		return nil, fmt.Errorf("iscsi subnet: %w", err)
	}
	p := &Plan{Version: Version, System: system, Datacenter: datacenter, Template: template,
		ProtectionDomain: "pd1", StoragePool: StoragePool{Name: "pool1", SparePercent: 10},
		Network: Network{Portgroup: "VM Network", CIDR: svmNet.Masked().String(), Gateway: nth(svmNet, 1).String()},
		ISCSI:   ISCSI{Portgroup: "iSCSI", VSwitch: "vSwitch0", CIDR: iscsiNet.Masked().String(), CreateVmkernel: true},
	}
	var hosts []*inventory.Host
	for _, name := range dc.Clusters[0].Hosts {
		if h, _ := inv.Host(name); h != nil && h.ConnectionState == "connected" && !h.InMaintenance {
			hosts = append(hosts, h)
		}
	}
	mdms := 3
	if len(hosts) >= 7 {
		mdms = 5
	}
	for i, h := range hosts {
		ph := Host{Name: h.Name, Roles: []string{RoleSDS, RoleTarget}, FaultSet: fmt.Sprintf("fs%d", i+1),
			SVMIP: nth(svmNet, 11+i).String(), VmkernelIP: nth(iscsiNet, 101+i).String()}
		if i < mdms {
			ph.Roles = append([]string{RoleMDM}, ph.Roles...)
		}
		if i < 2 {
			ph.Roles = append(ph.Roles, RoleGateway)
		}
		for _, d := range h.Disks {
			if d.Candidate {
				ph.Devices = append(ph.Devices, Device{Disk: d.CanonicalName, Mode: ModeRDM})
			}
		}
		p.Hosts = append(p.Hosts, ph)
	}
	return p, nil
}

func nth(p netip.Prefix, n int) netip.Addr {
	a := p.Masked().Addr()
	for range n {
		a = a.Next()
	}
	return a
}
