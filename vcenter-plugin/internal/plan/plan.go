// Package plan defines the Cairn deployment plan — the JSON document the
// UI wizard produces and the deploy engine executes — and validates it
// against the vCenter inventory with messages that say what to fix.
//
// Format version 1 (schema.json beside this file, served by the plugin at
// /api/v1/plan/schema):
//
//	{
//	  "version": 1,
//	  "system": "cairn1",                        // cluster name, [a-z0-9-]{1,32}
//	  "datacenter": "DC0",
//	  "template": "cairn-svm",                    // SVM template (uploaded OVA)
//	  "protection_domain": "pd1",
//	  "storage_pool": {"name": "pool1", "spare_percent": 10},
//	  "network": {"portgroup": "VM Network", "cidr": "10.20.0.0/24", "gateway": "10.20.0.1", "dns": ["10.20.0.2"]},
//	  "iscsi": {"portgroup": "iSCSI", "vswitch": "vSwitch0", "cidr": "10.30.0.0/24", "create_vmkernel": true},
//	  "maintenance_mode": "instant",               // SDS maintenance during rolling patches: instant | protected
//	  "hosts": [{
//	    "name": "esx-01.cairn.test",
//	    "roles": ["mdm", "sds", "target", "gateway"], // mdm | tiebreaker | sds | target | gateway; [] = iSCSI client only
//	    "fault_set": "rack1",                         // optional; all SDS hosts or none
//	    "svm_ip": "10.20.0.11",                       // SVM address on network.cidr
//	    "vmkernel_ip": "10.30.0.101",                 // host's iSCSI vmkernel port, on iscsi.cidr
//	    "devices": [{"disk": "naa.5000c500...", "mode": "rdm"}, {"pci": "0000:3b:00.0", "mode": "passthrough"}]
//	  }]
//	}
//
// The SVM's vApp properties (the OVA contract) are derived from the plan by
// Plan.VAppProperties.
package plan

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/cairn-storage/cairn/appliance/contract"
)

// Version is the plan format this package reads and writes.
const Version = 1

// Schema is the JSON Schema (2020-12) of format Version.
//
//go:embed schema.json
var Schema []byte

// Roles a host's SVM can have.
const (
	RoleMDM        = "mdm"
	RoleTieBreaker = "tiebreaker"
	RoleSDS        = "sds"
	RoleTarget     = "target"
	RoleGateway    = "gateway"
)

// Device modes.
const (
	ModeRDM         = "rdm"
	ModePassthrough = "passthrough"
)

type Plan struct {
	Version          int         `json:"version"`
	System           string      `json:"system"`
	Datacenter       string      `json:"datacenter"`
	Template         string      `json:"template"`
	ProtectionDomain string      `json:"protection_domain"`
	StoragePool      StoragePool `json:"storage_pool"`
	Network          Network     `json:"network"`
	ISCSI            ISCSI       `json:"iscsi"`
	MaintenanceMode  string      `json:"maintenance_mode,omitempty"`
	// SSHAuthorizedKey is the OpenSSH public key of the SVMs' "cairn"
	// account (the appliance has no passwords).
	SSHAuthorizedKey string `json:"ssh_authorized_key,omitempty"`
	// DataClients are machines outside the SVMs that run Cairn data clients
	// (cairn nbd on a Linux host), as addresses or networks: the SVMs'
	// firewalls let them reach etcd and the SDS data port.
	DataClients []string `json:"data_clients,omitempty"`
	Hosts       []Host   `json:"hosts"`
}

type StoragePool struct {
	Name         string `json:"name"`
	SparePercent int    `json:"spare_percent"`
}

type Network struct {
	Portgroup string   `json:"portgroup"`
	CIDR      string   `json:"cidr"`
	Gateway   string   `json:"gateway,omitempty"`
	DNS       []string `json:"dns,omitempty"`
	NTP       []string `json:"ntp,omitempty"`
}

type ISCSI struct {
	Portgroup      string `json:"portgroup"`
	VSwitch        string `json:"vswitch,omitempty"` // default vSwitch0
	CIDR           string `json:"cidr"`
	CreateVmkernel bool   `json:"create_vmkernel,omitempty"`
}

type Host struct {
	Name     string   `json:"name"`
	Roles    []string `json:"roles"`
	FaultSet string   `json:"fault_set,omitempty"`
	SVMIP    string   `json:"svm_ip"`
	// DataIP, on iscsi.cidr, is the SVM's second NIC (on the iSCSI port
	// group) for SDS and iSCSI traffic; empty: data uses svm_ip.
	DataIP     string   `json:"data_ip,omitempty"`
	VmkernelIP string   `json:"vmkernel_ip,omitempty"`
	Devices    []Device `json:"devices,omitempty"`
	// TargetPortID, optional, fixes the SVM's relative target port id (1-65535);
	// otherwise Plan.TargetPorts assigns one.
	TargetPortID int `json:"target_port_id,omitempty"`
}

type Device struct {
	Disk string `json:"disk,omitempty"` // canonical name, for mode rdm
	PCI  string `json:"pci,omitempty"`  // PCI id, for mode passthrough
	Mode string `json:"mode"`
}

// DataAddress is where the host's SVM serves SDS and iSCSI traffic.
func (h *Host) DataAddress() string {
	if h.DataIP != "" {
		return h.DataIP
	}
	return h.SVMIP
}

// HasSVM reports whether the host runs an SVM; a host without roles is an
// iSCSI client only (its initiator is wired to the cluster).
func (h *Host) HasSVM() bool { return len(h.Roles) > 0 }

// Has reports whether the host has role r.
func (h *Host) Has(r string) bool { return slices.Contains(h.Roles, r) }

// MaxSize bounds a plan document (a large plan is a few tens of KiB).
const MaxSize = 1 << 20

// Parse decodes a plan; unknown fields are errors (a typo must not be
// silently ignored in an installer).
func Parse(r io.Reader) (*Plan, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxSize+1))
	if err != nil {
		return nil, fmt.Errorf("read plan: %w", err)
	}
	if len(data) > MaxSize {
		return nil, fmt.Errorf("plan is larger than %d bytes", MaxSize)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var p Plan
	if err := dec.Decode(&p); err != nil {
		return nil, fmt.Errorf("plan is not valid JSON for format %d: %w", Version, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("plan: trailing data after the JSON object")
	}
	return &p, nil
}

// SVMName is the VM name of the SVM on host: cairn-<system>-<host's short name>.
func (p *Plan) SVMName(host string) string {
	short, _, _ := strings.Cut(host, ".")
	return "cairn-" + p.System + "-" + short
}

// MDMMembers returns the SVM addresses of the MDM members (voters and
// tie-breakers), in plan order.
func (p *Plan) MDMMembers() []string {
	var out []string
	for _, h := range p.Hosts {
		if h.Has(RoleMDM) || h.Has(RoleTieBreaker) {
			out = append(out, h.SVMIP)
		}
	}
	return out
}

// FaultSets returns the distinct fault set names, sorted.
func (p *Plan) FaultSets() []string {
	seen := map[string]bool{}
	var out []string
	for _, h := range p.Hosts {
		if h.FaultSet != "" && !seen[h.FaultSet] {
			seen[h.FaultSet] = true
			out = append(out, h.FaultSet)
		}
	}
	sort.Strings(out)
	return out
}

// Gateway returns the first host with the gateway role.
func (p *Plan) Gateway() *Host {
	for i := range p.Hosts {
		if p.Hosts[i].Has(RoleGateway) {
			return &p.Hosts[i]
		}
	}
	return nil
}

// VAppProperties are the OVF properties of the SVM on host: exactly the keys of the
// appliance's contract (appliance/contract; a test checks every key is set and that
// contract.Validate accepts the result for every role):
//
//	cairn.hostname             SVM host name: cairn-<host's short name>
//	cairn.mgmt.address         svm_ip/prefix of network.cidr
//	cairn.mgmt.gateway         network.gateway
//	cairn.data.address         data_ip/prefix of iscsi.cidr, or empty
//	cairn.dns, cairn.ntp       comma-separated servers
//	cairn.roles                comma-separated roles
//	cairn.cluster.name         the system name
//	cairn.cluster.mdm_members  <SVM host name>=<svm_ip> of every MDM member
//	cairn.cluster.gateways     svm_ip of every gateway
//	cairn.cluster.join_token   joinToken (below)
//	cairn.target.port_id       this SVM's relative target port (TargetPorts)
//	cairn.target.port_ids      every target SVM's
//	cairn.cluster.svms         svm_ip and data_ip of every SVM (the firewall's peers)
//	cairn.cluster.data_clients data_clients
//	cairn.ssh.authorized_key   ssh_authorized_key
//	cairn.ssh.allow_from       empty: SSH from the management network
//
// joinToken is what the SVM's first boot spends for its certificates: in an
// initial deployment the deployment's one-time bootstrap token, on every SVM
// whatever its roles (the first gateway also takes it for the admin
// password); for an SVM added to a running system (expand, replace) a fresh
// join token (cj1.<id>.<secret>.<ca-sha256>) the gateway created for its
// roles. Both are good once and expire: neither is kept in a plan.
func (p *Plan) VAppProperties(h *Host, joinToken string) map[string]string {
	mgmt, _ := netip.ParsePrefix(p.Network.CIDR)
	var members, gateways, ports, svms []string
	portOf := p.TargetPorts()
	for _, o := range p.Hosts {
		svms = append(svms, o.SVMIP)
		if o.DataIP != "" {
			svms = append(svms, o.DataIP)
		}
		if o.Has(RoleMDM) || o.Has(RoleTieBreaker) {
			members = append(members, SVMHostname(o.Name)+"="+o.SVMIP)
		}
		if o.Has(RoleGateway) {
			gateways = append(gateways, o.SVMIP)
		}
		if n, ok := portOf[o.Name]; ok {
			ports = append(ports, strconv.Itoa(n))
		}
	}
	props := map[string]string{
		contract.KeyHostname:     SVMHostname(h.Name),
		contract.KeyMgmtAddress:  fmt.Sprintf("%s/%d", h.SVMIP, mgmt.Bits()),
		contract.KeyMgmtGateway:  p.Network.Gateway,
		contract.KeyDataAddress:  "",
		contract.KeyDNS:          strings.Join(p.Network.DNS, ","),
		contract.KeyNTP:          strings.Join(p.Network.NTP, ","),
		contract.KeyRoles:        strings.Join(h.Roles, ","),
		contract.KeyClusterName:  p.System,
		contract.KeyMDMMembers:   strings.Join(members, ","),
		contract.KeyGateways:     strings.Join(gateways, ","),
		contract.KeyJoinToken:    joinToken,
		contract.KeyTargetPortID: "",
		contract.KeyTargetPorts:  "",
		contract.KeySSHKey:       p.SSHAuthorizedKey,
		contract.KeySVMs:         strings.Join(svms, ","),
		contract.KeyDataClients:  strings.Join(p.DataClients, ","),
		contract.KeySSHAllowFrom: "",
	}
	if h.DataIP != "" {
		data, _ := netip.ParsePrefix(p.ISCSI.CIDR)
		props[contract.KeyDataAddress] = fmt.Sprintf("%s/%d", h.DataIP, data.Bits())
	}
	if n, ok := portOf[h.Name]; ok {
		props[contract.KeyTargetPortID] = strconv.Itoa(n)
		props[contract.KeyTargetPorts] = strings.Join(ports, ",")
	}
	return props
}

// TargetPorts assigns every host with the target role its relative target port id:
// the host's target_port_id when the plan sets one, else the lowest id no other host
// has, in plan order. Ids are stable as long as the hosts before it keep theirs.
func (p *Plan) TargetPorts() map[string]int {
	out := map[string]int{}
	used := map[int]bool{}
	for _, h := range p.Hosts {
		if h.Has(RoleTarget) && h.TargetPortID > 0 {
			out[h.Name] = h.TargetPortID
			used[h.TargetPortID] = true
		}
	}
	next := 1
	for _, h := range p.Hosts {
		if !h.Has(RoleTarget) || h.TargetPortID > 0 {
			continue
		}
		for used[next] {
			next++
		}
		out[h.Name] = next
		used[next] = true
	}
	return out
}

// SVMHostname is the guest host name of the SVM on an ESXi host.
func SVMHostname(host string) string {
	short, _, _ := strings.Cut(strings.ToLower(host), ".")
	b := []byte("cairn-" + short)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			b[i] = '-'
		}
	}
	return strings.TrimRight(string(b), "-")
}

// Secrets are generated once per deployment and kept in its state file (0600). The
// bootstrap token is the only one that leaves the plugin server, in the vApp
// property cairn.cluster.join_token of every SVM of the initial deployment, and it
// is good for minutes; the admin password goes to the gateway over TLS. The join
// tokens of SVMs added later are not secrets of the deployment: each is created
// for one SVM when it is configured and is never stored here.
type Secrets struct {
	BootstrapToken string `json:"bootstrap_token"`
	AdminPassword  string `json:"admin_password"`
	// ServiceUsers are the passwords of the gateway users the plugin calls
	// the system as for vSphere users, by gateway role (deploy.ServiceUser).
	ServiceUsers map[string]string `json:"service_users,omitempty"`
}

var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,31}$`)
