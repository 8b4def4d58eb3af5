// Package firewall derives an SVM's nftables ruleset from its deployment settings
// (appliance/contract): each Cairn port is open only when this SVM runs the role that
// serves it, and only to the peers or the network that need it. It is a pure
// function of the validated settings and of the peers the system model knows;
// `cairn firstboot` writes its output to /etc/nftables.conf (no model peers yet),
// which the image's nftables.service loads at every boot, and `cairn peersync`
// (appliance/internal/peersync) rewrites and reloads it as SVMs join and leave.
//
// The table (docs/architecture.md, "Security: who may talk to whom", has it for
// readers):
//
//	port      role            who may connect                        why
//	22/tcp    (any, with key) SSH allow_from networks, else eth0     admin shell; without a key nobody can log in
//	2379/tcp  mdm, tiebreaker SVM addresses + MDM members + gateways every daemon (sds, target, gateway, mdm) uses etcd
//	                          + data clients                         cairn nbd outside the SVMs reads the model
//	2380/tcp  mdm, tiebreaker MDM members, on eth0                   etcd peer traffic between members only
//	7100/tcp  sds             SVM addresses + MDM members + gateways frontends (target), SDS peers, gateway and MDM
//	                          + data clients                         cairn nbd outside the SVMs
//	3260/tcp  target          the iSCSI network (data NIC/subnet)    the ESXi software initiators' vmknics
//	8443/tcp  gateway         anything on the management NIC         vCenter plugin, installer, cairnctl, Ansible
//	7443/tcp  mdm, tiebreaker the management NIC + data clients      join service: certificates for a join token
//
// Without cluster.svms the etcd client port is open to the management network and
// the SDS port to the data network (the network a daemon's peers reach it on):
// NIC, plus the subnet when the address is static. Everything else inbound is
// dropped (default deny), except replies (established, related), loopback, ICMP
// and, on a DHCP-configured NIC, DHCP replies. NBD is not served on the SVM, so its
// port is never opened.
package firewall

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/cairn-storage/cairn/appliance/contract"
)

// Interface names of the image (net.ifnames=0): the OVF descriptor's Management
// network is the first NIC, Data the second.
const (
	MgmtInterface = "eth0"
	DataInterface = "eth1"
)

// Path is where first boot writes the ruleset: the file nftables.service loads
// (Debian; the Rocky image's /etc/sysconfig/nftables.conf includes it).
const Path = "/etc/nftables.conf"

// SSHPort is sshd's port (not part of the contract: no Cairn daemon serves it).
const SSHPort = 22

// Rule opens one TCP port. An empty Iface means any interface; empty From means
// any source (on Iface). A rule with neither is never produced.
type Rule struct {
	Port    uint16
	Service string
	Iface   string
	From    []netip.Prefix
	Why     string
}

// Peers is what the system model says about the SVMs beyond the deployment
// settings (cairn peersync computes it; first boot has none: Peers{}).
type Peers struct {
	// Known are the addresses of the SVMs and SDSs the model holds now: they
	// are admitted to etcd and the SDS port like cluster.svms.
	Known []netip.Addr
	// Removed are addresses that the model held once and no longer does (their
	// SVM was removed): they leave the peer set even when the settings list
	// them. This SVM's own addresses are never removed.
	Removed []netip.Addr
}

// Rules lists what s opens, given the model's peers p, in a fixed order (by
// port, then rule).
func Rules(s *contract.Settings, p Peers) []Rule {
	var out []Rule
	mgmtNet := network(MgmtInterface, s.Mgmt)
	dataNet := mgmtNet // no data NIC: data traffic uses the management network
	if s.Data.IsSet() {
		dataNet = network(DataInterface, s.Data)
	}
	// Every address a Cairn daemon of this system connects from. Members and
	// gateways are SVMs too, whether or not the deployer listed them in svms.
	var peers []netip.Prefix
	if len(s.SVMs) > 0 {
		for _, a := range s.SVMs {
			peers = addHost(peers, a)
		}
		for _, m := range s.MDMMembers {
			peers = addHost(peers, m.Addr)
		}
		for _, g := range s.Gateways {
			peers = addHost(peers, g)
		}
		peers = slices.DeleteFunc(peers, func(h netip.Prefix) bool {
			return slices.Contains(p.Removed, h.Addr()) && !own(s, h.Addr())
		})
	}
	// The model's peers join the settings' list; without one (open to whole
	// networks) they get rules of their own, for an SVM outside those networks.
	var known []netip.Prefix
	for _, a := range p.Known {
		known = addHost(known, a)
	}
	if len(s.SVMs) > 0 {
		for _, k := range known {
			peers = addHost(peers, k.Addr())
		}
		known = nil
	}
	// Data clients outside the SVMs (cairn nbd on a Linux host) need etcd and the
	// data path, whatever else is open.
	clients := slices.Clone(s.DataClients)

	if s.SSHKey != "" {
		r := Rule{Port: SSHPort, Service: "ssh", Why: "admin shell"}
		if len(s.SSHAllowFrom) > 0 {
			r.From = slices.Clone(s.SSHAllowFrom)
			r.Why += ", from cairn.ssh.allow_from"
		} else {
			r.Iface = MgmtInterface
			r.Why += ", via the management NIC"
		}
		out = append(out, r)
	}
	mdm := s.HasRole(contract.RoleMDM) || s.HasRole(contract.RoleTiebreaker)
	if mdm {
		r := Rule{Port: contract.MDMClientPort, Service: "etcd-client", Why: "every Cairn daemon"}
		if len(peers) > 0 {
			r.From = peers
			r.Why += ": the SVMs"
		} else {
			r.Iface, r.From = mgmtNet.iface, mgmtNet.from
			r.Why += ": the management network (no cluster.svms)"
		}
		out = append(out, r)
		if len(known) > 0 {
			out = append(out, Rule{Port: contract.MDMClientPort, Service: "etcd-client", From: known, Why: "the SVMs the system model knows"})
		}
		if len(clients) > 0 {
			out = append(out, Rule{Port: contract.MDMClientPort, Service: "etcd-client", From: clients, Why: "data clients (cluster.data_clients)"})
		}
		var members []netip.Prefix
		for _, m := range s.MDMMembers {
			members = addHost(members, m.Addr)
		}
		if len(members) > 0 {
			out = append(out, Rule{Port: contract.MDMPeerPort, Service: "etcd-peer", Iface: MgmtInterface, From: members,
				Why: "raft between the MDM members"})
		}
	}
	if s.Keeper() {
		// Every MDM member keeps the CA and serves joins. Token-authenticated
		// (one-time tokens, each refusal paused and an event): new SVMs,
		// whose addresses no peer knows yet, and data clients' hosts reach it.
		out = append(out, Rule{Port: contract.JoinPort, Service: "join", Iface: MgmtInterface,
			Why: "join service (nodes with a join token), via the management NIC"})
		if len(clients) > 0 {
			out = append(out, Rule{Port: contract.JoinPort, Service: "join", From: clients, Why: "data clients (cluster.data_clients)"})
		}
	}
	if s.HasRole(contract.RoleSDS) {
		r := Rule{Port: contract.SDSPort, Service: "sds", Why: "frontends, SDS peers, gateway, MDM"}
		if len(peers) > 0 {
			r.From = peers
			r.Why += ": the SVMs"
		} else {
			r.Iface, r.From = dataNet.iface, dataNet.from
			r.Why += ": the data network (no cluster.svms)"
		}
		out = append(out, r)
		if len(known) > 0 {
			out = append(out, Rule{Port: contract.SDSPort, Service: "sds", From: known, Why: "the SVMs the system model knows"})
		}
		if len(clients) > 0 {
			out = append(out, Rule{Port: contract.SDSPort, Service: "sds", From: clients, Why: "data clients (cluster.data_clients)"})
		}
	}
	if s.HasRole(contract.RoleTarget) {
		out = append(out, Rule{Port: contract.ISCSIPort, Service: "iscsi", Iface: dataNet.iface, From: dataNet.from,
			Why: "ESXi initiators: the iSCSI (data) network"})
	}
	if s.HasRole(contract.RoleGateway) {
		out = append(out, Rule{Port: contract.GatewayPort, Service: "gateway", Iface: MgmtInterface,
			Why: "REST API: plugin, installer, tools, via the management NIC"})
	}
	return out
}

type netSpec struct {
	iface string
	from  []netip.Prefix // the subnet of a static address; nil with DHCP
}

func network(iface string, a contract.Address) netSpec {
	n := netSpec{iface: iface}
	if a.Prefix.IsValid() {
		n.from = []netip.Prefix{a.Prefix.Masked()}
	}
	return n
}

// own reports whether a is one of this SVM's static addresses.
func own(s *contract.Settings, a netip.Addr) bool {
	for _, n := range []contract.Address{s.Mgmt, s.Data} {
		if n.Prefix.IsValid() && n.Prefix.Addr().Unmap() == a.Unmap() {
			return true
		}
	}
	return false
}

func addHost(ps []netip.Prefix, a netip.Addr) []netip.Prefix {
	p := netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen())
	if slices.Contains(ps, p) {
		return ps
	}
	return append(ps, p)
}

// Ruleset renders the nftables ruleset for s and the model's peers p: the file
// nft -f loads, replacing the whole ruleset in one transaction. Every value in it
// is an address, prefix, port or interface name from validated settings, a
// netip.Addr or a constant, so nothing needs quoting.
func Ruleset(s *contract.Settings, p Peers) string {
	var b strings.Builder
	b.WriteString(`#!/usr/sbin/nft -f
# Cairn SVM firewall, written by cairn firstboot from the deployment settings and
# kept current by cairn peersync from the system model (appliance/internal/
# firewall, peersync; docs/architecture.md has the port table). Do not edit.
# Inbound is dropped except replies, loopback, ICMP, DHCP replies and the rules
# below: each Cairn port only for this SVM's roles, and only from who needs it.
flush ruleset

table inet cairn {
	chain input {
		type filter hook input priority filter; policy drop;
		ct state established,related accept
		ct state invalid drop
		iifname "lo" accept
		meta l4proto { 1, 58 } accept comment "ICMP, ICMPv6 (ping, path MTU, IPv6 neighbour discovery)"
`)
	for _, d := range []struct {
		iface string
		a     contract.Address
	}{{MgmtInterface, s.Mgmt}, {DataInterface, s.Data}} {
		if d.a.DHCP {
			fmt.Fprintf(&b, "\t\tiifname %q udp sport 67 udp dport 68 accept comment \"DHCPv4 replies\"\n", d.iface)
			fmt.Fprintf(&b, "\t\tiifname %q udp sport 547 udp dport 546 accept comment \"DHCPv6 replies\"\n", d.iface)
		}
	}
	for _, r := range Rules(s, p) {
		var match strings.Builder
		if r.Iface != "" {
			fmt.Fprintf(&match, "iifname %q ", r.Iface)
		}
		comment := fmt.Sprintf("comment %q", fmt.Sprintf("%d %s: %s", r.Port, r.Service, r.Why))
		if len(r.From) == 0 {
			fmt.Fprintf(&b, "\t\t%stcp dport %d accept %s\n", match.String(), r.Port, comment)
			continue
		}
		var v4, v6 []string
		for _, p := range r.From {
			if p.Addr().Is4() {
				v4 = append(v4, prefixString(p))
			} else {
				v6 = append(v6, prefixString(p))
			}
		}
		for _, fam := range []struct {
			kw    string
			elems []string
		}{{"ip", v4}, {"ip6", v6}} {
			if len(fam.elems) == 0 {
				continue
			}
			fmt.Fprintf(&b, "\t\t%s%s saddr { %s } tcp dport %d accept %s\n", match.String(), fam.kw,
				strings.Join(fam.elems, ", "), r.Port, comment)
		}
	}
	b.WriteString(`	}

	chain forward {
		type filter hook forward priority filter; policy drop;
	}

	chain output {
		type filter hook output priority filter; policy accept;
	}
}
`)
	return b.String()
}

// prefixString writes a host prefix as a bare address (nft lists it so).
func prefixString(p netip.Prefix) string {
	if p.IsSingleIP() {
		return p.Addr().String()
	}
	return p.String()
}
