// Package contract is the one definition of what a deployed Cairn SVM is told at
// first boot: the vApp properties of the OVA (ids, types, defaults, labels, which role
// needs which), how they are read from the OVF environment, and how they are validated.
//
// Three programs use it and nothing else defines these keys:
//   - the OVF generator (packer/tools, ovfdesc) writes Properties into the OVA's
//     ProductSection;
//   - `cairn firstboot` (appliance/internal/firstboot) parses the OVF environment with
//     ParseOVFEnv and checks it with Validate before it writes anything;
//   - the deploy engine (vcenter-plugin/internal/deploy, plan) sets exactly these keys
//     on every SVM and checks its own values with Validate before it clones anything.
//
// It is a public package of the appliance module with no dependencies beyond the
// standard library; the two other Go modules import it through a `replace` directive
// (../appliance), so a change here is seen by all three at once and their tests fail
// if one of them drifts.
package contract

import "time"

// Version is the contract version. It changes when a key is added, removed or changes
// meaning; firstboot writes it into cairn.env (CAIRN_CONTRACT).
const Version = 3

// The settings keys: the ovf:key names of the vApp properties and the keys of the
// NoCloud user-data format (appliance/internal/firstboot/seed.go).
const (
	KeyHostname     = "cairn.hostname"
	KeyMgmtAddress  = "cairn.mgmt.address"
	KeyMgmtGateway  = "cairn.mgmt.gateway"
	KeyDataAddress  = "cairn.data.address"
	KeyDNS          = "cairn.dns"
	KeyNTP          = "cairn.ntp"
	KeyRoles        = "cairn.roles"
	KeyClusterName  = "cairn.cluster.name"
	KeyMDMMembers   = "cairn.cluster.mdm_members"
	KeyGateways     = "cairn.cluster.gateways"
	KeySVMs         = "cairn.cluster.svms"
	KeyDataClients  = "cairn.cluster.data_clients"
	KeyJoinToken    = "cairn.cluster.join_token"
	KeyTargetPortID = "cairn.target.port_id"
	KeyTargetPorts  = "cairn.target.port_ids"
	KeySSHKey       = "cairn.ssh.authorized_key"
	KeySSHAllowFrom = "cairn.ssh.allow_from"
)

// Fixed ports of the appliance's daemons (packer/files/cairn-role binds them). The
// contract carries addresses only; these complete them into URLs.
const (
	MDMClientPort = 2379
	// JoinPort is the join service's (cairn pki serve), on every MDM member:
	// nodes get their certificates there with a join token.
	JoinPort    = 7443
	MDMPeerPort = 2380
	GatewayPort = 8443
	SDSPort     = 7100
	ISCSIPort   = 3260
)

// BootstrapTokenLifetime is how long the first gateway of a new system accepts the
// one-time bootstrap token (KeyJoinToken) after it created the admin user: long
// enough to bring up the other SVMs, short enough that a token read later from the
// VM's settings is useless.
const BootstrapTokenLifetime = 30 * time.Minute

// Property is one vApp property (ovf:ProductSection/ovf:Property).
type Property struct {
	Key         string
	Type        string // OVF property type; every Cairn property is a string
	Default     string
	Category    string
	Label       string
	Description string
	Qualifiers  string // OVF qualifiers, e.g. "MaxLen(253)"
	// Password hides the value in the vSphere Client. Only one-time values may be
	// passwords here: no long-lived secret ever travels as a vApp property.
	Password bool
	// RequiredFor lists the roles whose SVMs must have a non-empty value; AllRoles
	// means every SVM. Validate enforces it.
	RequiredFor []Role
}

// Required reports whether an SVM with roles must have a value for p.
func (p Property) Required(roles []Role) bool {
	for _, r := range p.RequiredFor {
		for _, have := range roles {
			if r == have {
				return true
			}
		}
	}
	return false
}

// AllRoles is RequiredFor of the settings every SVM needs.
var AllRoles = []Role{RoleMDM, RoleTiebreaker, RoleSDS, RoleTarget, RoleGateway}

// properties is the table, in the order the vSphere Client shows them.
var properties = []Property{
	{Key: KeyHostname, Category: "Identity", Label: "Host name",
		Description: "Host name of this SVM (RFC 1123: letters, digits, inner hyphens; dots for a FQDN). Required.",
		Qualifiers:  "MaxLen(253)", RequiredFor: AllRoles},
	{Key: KeyMgmtAddress, Default: "dhcp", Category: "Management network", Label: "Management address",
		Description: "\"dhcp\", or a static address with prefix length, e.g. 192.0.2.10/24. First network adapter (eth0).",
		Qualifiers:  "MaxLen(64)", RequiredFor: AllRoles},
	{Key: KeyMgmtGateway, Category: "Management network", Label: "Default gateway",
		Description: "Default gateway on the management network. Leave empty with dhcp.",
		Qualifiers:  "MaxLen(64)"},
	{Key: KeyDataAddress, Category: "Data network", Label: "Data address",
		Description: "Address of the second network adapter (eth1) for SDS and iSCSI traffic: \"dhcp\", a static address with prefix length, or empty to carry data on the management network.",
		Qualifiers:  "MaxLen(64)"},
	{Key: KeyDNS, Category: "Management network", Label: "DNS servers",
		Description: "Up to 3 DNS server addresses, comma separated. Empty: from DHCP.",
		Qualifiers:  "MaxLen(256)"},
	{Key: KeyNTP, Category: "Management network", Label: "NTP servers",
		Description: "Up to 4 NTP servers (host names or addresses), comma separated. Keep SVM clocks in step: etcd leases depend on them.",
		Qualifiers:  "MaxLen(512)"},
	{Key: KeyRoles, Default: "sds,target", Category: "Cluster", Label: "Roles",
		Description: "Comma-separated roles of this SVM: mdm (metadata manager), tiebreaker (voting MDM without control loop), sds (data server), target (iSCSI), gateway (REST API).",
		Qualifiers:  "MaxLen(64)", RequiredFor: AllRoles},
	{Key: KeyClusterName, Category: "Cluster", Label: "Cluster name",
		Description: "Name of the Cairn cluster to create or join (letters, digits, '.', '_', '-'). Required.",
		Qualifiers:  "MaxLen(63)", RequiredFor: AllRoles},
	{Key: KeyMDMMembers, Category: "Cluster", Label: "MDM members",
		Description: "Every MDM member (voters and tie-breakers) as name=address, comma separated, e.g. cairn-esx01=192.0.2.11,cairn-esx02=192.0.2.12,cairn-esx03=192.0.2.13. Names are the members' host names; addresses their management addresses. The initial etcd cluster of a new system, and where every daemon finds the MDM. Required.",
		Qualifiers:  "MaxLen(2048)", RequiredFor: AllRoles},
	{Key: KeyGateways, Category: "Cluster", Label: "Gateways",
		Description: "Management addresses of every gateway SVM, comma separated (tools fail over between them). Empty: none known.",
		Qualifiers:  "MaxLen(1024)"},
	{Key: KeySVMs, Category: "Cluster", Label: "SVM addresses",
		Description: "Management and data addresses of every SVM of the system, this one's included, comma separated. The firewall opens etcd and the SDS data port to these addresses only. Empty: to the whole management network (etcd) and data network (SDS).",
		Qualifiers:  "MaxLen(4096)"},
	{Key: KeyDataClients, Category: "Cluster", Label: "Data clients",
		Description: "Machines outside the SVMs that run Cairn data clients (cairn nbd on a Linux host): addresses or networks (address/prefix), comma separated. The firewall lets them reach etcd and the SDS data port. Empty: none.",
		Qualifiers:  "MaxLen(1024)"},
	{Key: KeyJoinToken, Category: "Cluster", Label: "Join token", Password: true,
		Description: "One-time token from the deployer. In a new system's SVMs, the deployer's bootstrap token: each SVM proves it to an MDM member's join service for its certificates, within 30 minutes of the cluster CA's creation, and the first gateway accepts it once so the deployer can set the admin credential. In an SVM added later, a join token (cj1.…) created for its roles, spent at its first boot and valid for an hour. Useless afterwards.",
		Qualifiers:  "MaxLen(512)", RequiredFor: AllRoles},
	{Key: KeyTargetPortID, Default: "1", Category: "iSCSI", Label: "Relative target port",
		Description: "This SVM's relative target port id (1-65535), unique in the system: reported in VPD page 0x83 and REPORT TARGET PORT GROUPS.",
		Qualifiers:  "MaxLen(5)", RequiredFor: []Role{RoleTarget}},
	{Key: KeyTargetPorts, Category: "iSCSI", Label: "All target ports",
		Description: "Relative target port ids of every target SVM of the system, comma separated, this one included, so every SVM answers REPORT TARGET PORT GROUPS alike. Empty: this SVM's only.",
		Qualifiers:  "MaxLen(2048)"},
	{Key: KeySSHKey, Category: "Access", Label: "SSH public key",
		Description: "OpenSSH public key for the 'cairn' admin account (ssh-ed25519 AAAA... comment). The appliance has no passwords: without a key there is no shell login.",
		Qualifiers:  "MaxLen(8192)"},
	{Key: KeySSHAllowFrom, Category: "Access", Label: "SSH allowed from",
		Description: "Networks that may connect to SSH, as address/prefix, comma separated, e.g. 192.0.2.0/24. Empty: anything that reaches the management network adapter. Without an SSH key the port stays closed.",
		Qualifiers:  "MaxLen(1024)"},
}

// Properties returns the vApp properties in descriptor order (a copy: callers may not
// change the contract).
func Properties() []Property {
	out := make([]Property, len(properties))
	for i, p := range properties {
		p.Type = "string"
		p.RequiredFor = append([]Role(nil), p.RequiredFor...)
		out[i] = p
	}
	return out
}

// Keys lists every settings key, in descriptor order.
func Keys() []string {
	out := make([]string, len(properties))
	for i, p := range properties {
		out[i] = p.Key
	}
	return out
}

// Defaults returns the default of every key that has one. An OVF environment always
// carries every property (vCenter fills in the descriptor's defaults); a NoCloud seed
// may be terse, and these fill the gaps.
func Defaults() map[string]string {
	out := map[string]string{}
	for _, p := range properties {
		if p.Default != "" {
			out[p.Key] = p.Default
		}
	}
	return out
}
