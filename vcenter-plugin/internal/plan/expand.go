package plan

import (
	"fmt"
	"reflect"
	"slices"
)

// Growing a deployed system: the edited plan is the deployed one with new
// hosts appended. Everything else is fixed at deployment (it is in every
// SVM's first-boot settings, or names objects that exist in the cluster),
// so CheckExpand refuses any other edit and says why.

// ExpandRoles are the roles a host added to a deployed system may have:
// SDS and iSCSI target, or none (an iSCSI client only). MDM members and
// gateways are not added here.
var ExpandRoles = []string{RoleSDS, RoleTarget}

// NewHosts returns the hosts of p that deployed does not have, in plan order.
func NewHosts(deployed, p *Plan) []*Host {
	var out []*Host
	for i := range p.Hosts {
		if deployed.host(p.Hosts[i].Name) == nil {
			out = append(out, &p.Hosts[i])
		}
	}
	return out
}

func (p *Plan) host(name string) *Host {
	for i := range p.Hosts {
		if p.Hosts[i].Name == name {
			return &p.Hosts[i]
		}
	}
	return nil
}

// CheckExpand checks that p only adds hosts to the deployed plan. It does
// not check p against the inventory: Validate does.
func CheckExpand(deployed, p *Plan) Problems {
	v := &validator{}
	fixed := func(field string, a, b any, why string) {
		if !reflect.DeepEqual(a, b) {
			v.errf(field, "a deployed system's %s cannot change (deployed %v, asked %v): %s", field, a, b, why)
		}
	}
	const inSVMs = "it is in every SVM's first-boot settings; keep the deployed value"
	fixed("version", deployed.Version, p.Version, "keep the deployed plan's format")
	fixed("system", deployed.System, p.System, "expand the system the plan names; a new system is a new deployment")
	fixed("datacenter", deployed.Datacenter, p.Datacenter, "a system lives in one datacenter")
	fixed("template", deployed.Template, p.Template, "new SVMs come from the template the system was deployed with, so every SVM runs one version (upgrading is not built yet)")
	fixed("protection_domain", deployed.ProtectionDomain, p.ProtectionDomain, "new SDSs join the deployed protection domain")
	fixed("storage_pool", deployed.StoragePool, p.StoragePool, "new devices join the deployed pool; change its spare with cairnctl pool set")
	fixed("network", deployed.Network, p.Network, inSVMs)
	fixed("iscsi", deployed.ISCSI, p.ISCSI, "the deployed hosts' iSCSI is wired with it; keep the deployed value")
	fixed("maintenance_mode", deployed.MaintenanceMode, p.MaintenanceMode, "change it in a plan of its own (rolling maintenance reads it), not in an expansion")
	fixed("ssh_authorized_key", deployed.SSHAuthorizedKey, p.SSHAuthorizedKey, inSVMs)

	// The deployed hosts first, in their order and unchanged: target port ids
	// are given in plan order, so a host moved or inserted before them would
	// change the ids of the SVMs that run.
	for i := range deployed.Hosts {
		d := &deployed.Hosts[i]
		f := fmt.Sprintf("hosts[%d]", i)
		if p.host(d.Name) == nil {
			v.errf(f, "host %s is deployed but missing: an expansion only adds hosts; remove a host with POST /api/v1/systems/%s/hosts/%s/remove", d.Name, deployed.System, d.Name)
			continue
		}
		if i >= len(p.Hosts) || p.Hosts[i].Name != d.Name {
			v.errf(f, "host %s moved: keep the deployed hosts first, in their deployed order, and add new hosts after them (target port ids are given in plan order)", d.Name)
			continue
		}
		if !reflect.DeepEqual(*d, p.Hosts[i]) {
			v.errf(f, "host %s is deployed and cannot change here (its SVM was configured with it): only new hosts may be added; add a device to a deployed SDS with cairnctl device create", d.Name)
		}
	}
	added := NewHosts(deployed, p)
	if len(added) == 0 && len(v.ps) == 0 {
		v.errf("hosts", "the plan adds no host: append the new hosts to the deployed plan's hosts")
	}
	for _, h := range added {
		i := slices.IndexFunc(p.Hosts, func(o Host) bool { return o.Name == h.Name })
		f := fmt.Sprintf("hosts[%d].roles", i)
		for _, r := range h.Roles {
			if !slices.Contains(ExpandRoles, r) {
				v.errf(f, "new host %s has role %s: hosts added to a deployed system are SDS and iSCSI target (%v) or iSCSI clients ([]); add an MDM member with cairnctl mdm add, and deploy gateways with the system", h.Name, r, ExpandRoles)
			}
		}
	}
	return v.ps
}

// Without returns a copy of p without host name. The remaining target
// hosts keep the port ids their SVMs run with (target_port_id is set on
// each): ids are otherwise given in plan order, and a gap would shift them.
func (p *Plan) Without(name string) *Plan {
	ports := p.TargetPorts()
	c := *p
	c.Hosts = nil
	for _, h := range p.Hosts {
		if h.Name == name {
			continue
		}
		if n, ok := ports[h.Name]; ok {
			h.TargetPortID = n
		}
		h.Devices = slices.Clone(h.Devices)
		h.Roles = slices.Clone(h.Roles)
		c.Hosts = append(c.Hosts, h)
	}
	return &c
}
