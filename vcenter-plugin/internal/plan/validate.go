package plan

import (
	"github.com/cairn-storage/cairn/appliance/contract"

	"fmt"
	"net/netip"
	"strings"

	"github.com/cairn-storage/cairn/vcenter-plugin/internal/inventory"
)

// Severity of a Problem: errors block a deployment, warnings do not.
const (
	Error   = "error"
	Warning = "warning"
)

// Problem is one validation finding. Field is a JSON path into the plan
// ("hosts[2].devices[0].disk") so the UI can point at it.
type Problem struct {
	Severity string `json:"severity"`
	Field    string `json:"field"`
	Message  string `json:"message"`
}

func (p Problem) String() string { return p.Severity + ": " + p.Field + ": " + p.Message }

// Problems is the result of Validate.
type Problems []Problem

// Err returns nil when there is no error-severity problem, else an error
// listing them all.
func (ps Problems) Err() error {
	var msgs []string
	for _, p := range ps {
		if p.Severity == Error {
			msgs = append(msgs, p.Field+": "+p.Message)
		}
	}
	if len(msgs) == 0 {
		return nil
	}
	return fmt.Errorf("the plan has %d error(s):\n  %s", len(msgs), strings.Join(msgs, "\n  "))
}

type validator struct {
	ps Problems
}

func (v *validator) errf(field, format string, args ...any) {
	v.ps = append(v.ps, Problem{Severity: Error, Field: field, Message: fmt.Sprintf(format, args...)})
}

func (v *validator) warnf(field, format string, args ...any) {
	v.ps = append(v.ps, Problem{Severity: Warning, Field: field, Message: fmt.Sprintf(format, args...)})
}

// Validate checks the plan on its own and against the inventory. A disk or
// PCI device already used by this plan's own SVM is not "in use" (so a
// resumed deployment validates).
func Validate(p *Plan, inv *inventory.Inventory) Problems {
	v := &validator{}
	if p.Version != Version {
		v.errf("version", "format version %d is not supported: set \"version\": %d", p.Version, Version)
	}
	if !nameRE.MatchString(p.System) {
		v.errf("system", "system name %q: use 1-32 lowercase letters, digits and dashes, starting with a letter or digit", p.System)
	}
	if p.ProtectionDomain == "" {
		v.errf("protection_domain", "name the protection domain")
	}
	if p.StoragePool.Name == "" {
		v.errf("storage_pool.name", "name the storage pool")
	}
	if p.StoragePool.SparePercent < 0 || p.StoragePool.SparePercent > 50 {
		v.errf("storage_pool.spare_percent", "spare %d%%: give 0 to 50", p.StoragePool.SparePercent)
	}
	switch p.MaintenanceMode {
	case "", "instant", "protected":
	default:
		v.errf("maintenance_mode", "%q: give instant or protected", p.MaintenanceMode)
	}

	var dc *inventory.Datacenter
	for i := range inv.Datacenters {
		if inv.Datacenters[i].Name == p.Datacenter {
			dc = &inv.Datacenters[i]
		}
	}
	if dc == nil {
		v.errf("datacenter", "datacenter %q not found in vCenter", p.Datacenter)
	}
	if p.Template == "" {
		v.errf("template", "name the SVM template (the uploaded Cairn OVA)")
	} else if t := inv.Template(p.Template); t == nil {
		v.errf("template", "SVM template %q not found in vCenter: upload the Cairn OVA as a template (cairn-install upload-template) or fix the name", p.Template)
	} else {
		for _, want := range contract.Keys() {
			found := false
			for _, have := range t.Properties {
				found = found || have == want
			}
			if !found {
				v.errf("template", "template %q lacks vApp property %s: it is not a Cairn SVM OVA of this version", p.Template, want)
				break
			}
		}
	}

	svmNet := v.prefix("network.cidr", p.Network.CIDR)
	iscsiNet := svmNet
	if p.ISCSI.CIDR != "" {
		iscsiNet = v.prefix("iscsi.cidr", p.ISCSI.CIDR)
	}
	gw := netip.Addr{}
	if p.Network.Gateway != "" {
		gw = v.addr("network.gateway", p.Network.Gateway, svmNet)
	}
	if p.ISCSI.CIDR != "" && svmNet.IsValid() && iscsiNet.IsValid() && svmNet.Overlaps(iscsiNet) && svmNet != iscsiNet {
		v.errf("iscsi.cidr", "%s overlaps network.cidr %s: use a separate subnet, or the same one", iscsiNet, svmNet)
	}
	for i, c := range p.DataClients {
		pf, err := netip.ParsePrefix(c)
		if err != nil {
			a, aerr := netip.ParseAddr(c)
			if aerr != nil {
				v.errf(fmt.Sprintf("data_clients[%d]", i), "%q is neither an IP address nor a network (address/prefix)", c)
				continue
			}
			pf = netip.PrefixFrom(a, a.BitLen())
		}
		if pf.Bits() == 0 {
			v.errf(fmt.Sprintf("data_clients[%d]", i), "%s would open etcd and the data path to every address: name the client machines or their networks", c)
		}
	}
	for i, d := range p.Network.DNS {
		if _, err := netip.ParseAddr(d); err != nil {
			v.errf(fmt.Sprintf("network.dns[%d]", i), "%q is not an IP address", d)
		}
	}
	if p.Network.Portgroup == "" {
		v.errf("network.portgroup", "name the port group the SVMs connect to")
	}
	if p.ISCSI.Portgroup == "" {
		v.errf("iscsi.portgroup", "name the port group of the hosts' iSCSI vmkernel ports")
	}
	if dc != nil && p.Network.Portgroup != "" {
		found := false
		for _, n := range dc.Networks {
			found = found || n.Name == p.Network.Portgroup
		}
		if !found {
			v.errf("network.portgroup", "network %q not found in datacenter %s", p.Network.Portgroup, dc.Name)
		}
	}

	// Hosts and roles.
	if len(p.Hosts) == 0 {
		v.errf("hosts", "choose the ESXi hosts that run an SVM")
	}
	seenHost := map[string]int{}
	addrs := map[netip.Addr]string{}
	if gw.IsValid() {
		addrs[gw] = "network.gateway"
	}
	var mdm, tie, sds, gateways int
	sdsByFS := map[string]int{}
	withFS, withoutFS := 0, 0
	portHolder := map[int]string{}
	for i, h := range p.Hosts {
		f := fmt.Sprintf("hosts[%d]", i)
		if j, dup := seenHost[h.Name]; dup {
			v.errf(f+".name", "host %s is listed twice (also hosts[%d]): one SVM per host", h.Name, j)
		}
		seenHost[h.Name] = i
		roles := map[string]bool{}
		for _, r := range h.Roles {
			switch r {
			case RoleMDM, RoleTieBreaker, RoleSDS, RoleTarget, RoleGateway:
			default:
				v.errf(f+".roles", "unknown role %q: use mdm, tiebreaker, sds, target or gateway", r)
			}
			if roles[r] {
				v.errf(f+".roles", "role %s given twice", r)
			}
			roles[r] = true
		}
		if roles[RoleMDM] && roles[RoleTieBreaker] {
			v.errf(f+".roles", "a host is an MDM voter or a tie-breaker, not both")
		}
		if roles[RoleMDM] {
			mdm++
		}
		if roles[RoleTieBreaker] {
			tie++
		}
		if roles[RoleGateway] {
			gateways++
		}
		if roles[RoleSDS] {
			sds++
			sdsByFS[h.FaultSet]++
			if h.FaultSet != "" {
				withFS++
			} else {
				withoutFS++
			}
			if len(h.Devices) == 0 {
				v.errf(f+".devices", "host %s has the sds role but no device: choose at least one local disk or passthrough device", h.Name)
			}
		} else if len(h.Devices) > 0 {
			v.errf(f+".devices", "host %s has devices but not the sds role: add the role or remove the devices", h.Name)
		}
		if h.FaultSet != "" && !nameRE.MatchString(h.FaultSet) {
			v.errf(f+".fault_set", "fault set name %q: use lowercase letters, digits and dashes", h.FaultSet)
		}
		if h.HasSVM() {
			if a := v.addr(f+".svm_ip", h.SVMIP, svmNet); a.IsValid() {
				v.unique(addrs, a, f+".svm_ip")
			}
		} else if h.SVMIP != "" {
			v.errf(f+".svm_ip", "host %s has no role, so no SVM: remove svm_ip or give it roles", h.Name)
		}
		if h.DataIP != "" {
			if !h.HasSVM() {
				v.errf(f+".data_ip", "host %s has no SVM: remove data_ip", h.Name)
			} else if p.ISCSI.CIDR == "" {
				v.errf(f+".data_ip", "data_ip needs iscsi.cidr, a subnet apart from network.cidr")
			} else if a := v.addr(f+".data_ip", h.DataIP, iscsiNet); a.IsValid() {
				v.unique(addrs, a, f+".data_ip")
			}
		}
		if h.VmkernelIP != "" {
			if a := v.addr(f+".vmkernel_ip", h.VmkernelIP, iscsiNet); a.IsValid() {
				v.unique(addrs, a, f+".vmkernel_ip")
			}
		} else if p.ISCSI.CreateVmkernel {
			v.errf(f+".vmkernel_ip", "iscsi.create_vmkernel is set: give host %s a vmkernel_ip on %s", h.Name, p.ISCSI.CIDR)
		}
		if h.TargetPortID != 0 {
			switch {
			case !h.Has(RoleTarget):
				v.errf(f+".target_port_id", "host %s has no target role: remove target_port_id", h.Name)
			case h.TargetPortID < 1 || h.TargetPortID > 65535:
				v.errf(f+".target_port_id", "%d is not a relative target port id: use 1-65535", h.TargetPortID)
			case portHolder[h.TargetPortID] != "":
				v.errf(f+".target_port_id", "port id %d is already host %s's: every target SVM needs its own", h.TargetPortID, portHolder[h.TargetPortID])
			default:
				portHolder[h.TargetPortID] = h.Name
			}
		}
		v.host(p, f, &h, inv)
	}
	members := mdm + tie
	switch {
	case members == 0:
		v.errf("hosts", "no MDM member: give 3 (or 5) hosts the mdm or tiebreaker role")
	case members%2 == 0:
		v.errf("hosts", "%d MDM members is an even number: a split vote could stall the cluster; use 3 or 5", members)
	case members != 3 && members != 5:
		v.errf("hosts", "%d MDM members: use 3 or 5", members)
	}
	if members > 0 && tie >= members-tie {
		v.errf("hosts", "%d tie-breakers for %d voting MDMs: tie-breakers must be fewer than voters (3 = 2+1 or 3+0, 5 = 3+2 or better)", tie, mdm)
	}
	if gateways == 0 {
		v.errf("hosts", "no host has the gateway role: give it to at least one (two for availability)")
	}
	if withFS > 0 && withoutFS > 0 {
		v.errf("hosts", "%d SDS hosts have a fault set and %d do not: give every SDS host a fault set, or none", withFS, withoutFS)
	}
	domains := sds // without fault sets every SDS is its own failure domain
	if withFS > 0 {
		domains = len(sdsByFS)
	}
	switch {
	case domains < 2 && withFS > 0:
		v.errf("hosts", "%d fault set(s) with SDSs: two copies need at least 2 fault sets, better 3", domains)
	case domains < 2:
		v.errf("hosts", "%d SDS host(s): two copies need at least 2 SDS hosts, better 3", sds)
	case domains == 2:
		v.warnf("hosts", "only 2 failure domains: after one fails the data has a single copy and cannot be rebuilt until it returns; add a third")
	}
	if domains >= 2 && p.StoragePool.SparePercent*domains < 100 && p.StoragePool.SparePercent > 0 {
		v.warnf("storage_pool.spare_percent", "%d%% spare cannot hold a failed failure domain's data among %d domains: use at least %d%%", p.StoragePool.SparePercent, domains, (100+domains-1)/domains)
	}
	return v.ps
}

func (v *validator) prefix(field, s string) netip.Prefix {
	if s == "" {
		v.errf(field, "give the subnet in CIDR form, e.g. 10.20.0.0/24")
		return netip.Prefix{}
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		v.errf(field, "%q is not a subnet in CIDR form (e.g. 10.20.0.0/24)", s)
		return netip.Prefix{}
	}
	if p.Masked() != p {
		v.errf(field, "%s has host bits set: did you mean %s?", s, p.Masked())
	}
	return p.Masked()
}

func (v *validator) addr(field, s string, subnet netip.Prefix) netip.Addr {
	a, err := netip.ParseAddr(s)
	if err != nil {
		v.errf(field, "%q is not an IP address", s)
		return netip.Addr{}
	}
	if subnet.IsValid() {
		if !subnet.Contains(a) {
			v.errf(field, "%s is outside the subnet %s", s, subnet)
			return a
		}
		if a == subnet.Addr() {
			v.errf(field, "%s is the network address of %s: pick a host address", s, subnet)
		}
		if a.Is4() && subnet.Bits() < 31 && a == broadcast(subnet) {
			v.errf(field, "%s is the broadcast address of %s: pick a host address", s, subnet)
		}
	}
	return a
}

func broadcast(p netip.Prefix) netip.Addr {
	b := p.Addr().As4()
	host := 32 - p.Bits()
	for i := 3; i >= 0 && host > 0; i-- {
		n := min(host, 8)
		b[i] |= byte(1<<n - 1)
		host -= n
	}
	return netip.AddrFrom4(b)
}

func (v *validator) unique(seen map[netip.Addr]string, a netip.Addr, field string) {
	if other, dup := seen[a]; dup {
		v.errf(field, "address %s is also used by %s: every SVM, vmkernel port and the gateway need their own", a, other)
		return
	}
	seen[a] = field
}

func (v *validator) host(p *Plan, f string, h *Host, inv *inventory.Inventory) {
	ih, _ := inv.Host(h.Name)
	if ih == nil {
		v.errf(f+".name", "host %q not found in vCenter", h.Name)
		return
	}
	if ih.ConnectionState != "connected" {
		v.errf(f+".name", "host %s is %s: reconnect it in vCenter first", h.Name, ih.ConnectionState)
	}
	if ih.InMaintenance {
		v.errf(f+".name", "host %s is in maintenance mode: exit maintenance mode first", h.Name)
	}
	hasLocal := false
	for _, ds := range ih.Datastores {
		hasLocal = hasLocal || ds.Local
	}
	if !hasLocal && h.HasSVM() {
		v.errf(f+".name", "host %s has no local datastore for its SVM: create one (VMFS on a local disk)", h.Name)
	}
	own := "vm " + p.SVMName(h.Name)
	seen := map[string]bool{}
	for j, d := range h.Devices {
		df := fmt.Sprintf("%s.devices[%d]", f, j)
		switch d.Mode {
		case ModeRDM:
			if d.Disk == "" || d.PCI != "" {
				v.errf(df, "an rdm device names a disk (canonical name) and no pci id")
				continue
			}
			if seen[d.Disk] {
				v.errf(df+".disk", "disk %s is listed twice", d.Disk)
			}
			seen[d.Disk] = true
			disk := ih.Disk(d.Disk)
			switch {
			case disk == nil:
				v.errf(df+".disk", "host %s has no disk %s: rescan the host or pick one from the inventory", h.Name, d.Disk)
			case disk.UsedBy != "" && disk.UsedBy != own:
				v.errf(df+".disk", "disk %s on host %s is in use by %s: pick a free disk", d.Disk, h.Name, disk.UsedBy)
			case !disk.Local:
				v.errf(df+".disk", "disk %s on host %s is not local (shared or SAN): Cairn pools local disks only", d.Disk, h.Name)
			case !disk.RDMCapable && disk.UsedBy != own:
				v.errf(df+".disk", "disk %s on host %s cannot be an RDM (ESXi does not offer it for raw mapping: a local disk without a unique serial): pass its controller through instead, or pick another disk", d.Disk, h.Name)
			}
		case ModePassthrough:
			if d.PCI == "" || d.Disk != "" {
				v.errf(df, "a passthrough device names a pci id and no disk")
				continue
			}
			if seen[d.PCI] {
				v.errf(df+".pci", "PCI device %s is listed twice", d.PCI)
			}
			seen[d.PCI] = true
			pci := ih.PCI(d.PCI)
			switch {
			case pci == nil:
				v.errf(df+".pci", "host %s has no PCI device %s", h.Name, d.PCI)
			case !pci.PassthroughCapable:
				v.errf(df+".pci", "PCI device %s on host %s cannot be passed through: use its disks as RDMs instead", d.PCI, h.Name)
			case !pci.PassthroughEnabled:
				v.errf(df+".pci", "PCI device %s on host %s is not enabled for passthrough: enable it (host reboot needed) first", d.PCI, h.Name)
			case pci.UsedBy != "" && pci.UsedBy != own:
				v.errf(df+".pci", "PCI device %s on host %s is in use by %s", d.PCI, h.Name, pci.UsedBy)
			}
		default:
			v.errf(df+".mode", "mode %q: use rdm or passthrough", d.Mode)
		}
	}
}
