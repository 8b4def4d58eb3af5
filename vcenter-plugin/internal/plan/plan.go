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
	"strings"
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
	Hosts            []Host `json:"hosts"`
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

// VAppProperties are the OVF properties of the SVM on host. The keys are
// the appliance's contract (appliance/internal/firstboot settings.go and
// packer/tools/internal/ovfdesc/properties.json):
//
//	cairn.hostname            SVM host name: cairn-<host's short name>
//	cairn.mgmt.address        svm_ip/prefix of network.cidr
//	cairn.mgmt.gateway        network.gateway
//	cairn.data.address        data_ip/prefix of iscsi.cidr, or empty
//	cairn.dns, cairn.ntp      comma-separated servers
//	cairn.roles               comma-separated roles
//	cairn.cluster.name        the system name
//	cairn.cluster.join_token  generated per deployment (Secrets)
//	cairn.ssh.authorized_key  ssh_authorized_key
//
// and the OptionalProperties, set only when the template declares them.
func (p *Plan) VAppProperties(h *Host, s Secrets) map[string]string {
	mgmt, _ := netip.ParsePrefix(p.Network.CIDR)
	props := map[string]string{
		"cairn.hostname":           SVMHostname(h.Name),
		"cairn.mgmt.address":       fmt.Sprintf("%s/%d", h.SVMIP, mgmt.Bits()),
		"cairn.mgmt.gateway":       p.Network.Gateway,
		"cairn.data.address":       "",
		"cairn.dns":                strings.Join(p.Network.DNS, ","),
		"cairn.ntp":                strings.Join(p.Network.NTP, ","),
		"cairn.roles":              strings.Join(h.Roles, ","),
		"cairn.cluster.name":       p.System,
		"cairn.cluster.join_token": s.ClusterToken,
		"cairn.ssh.authorized_key": p.SSHAuthorizedKey,
	}
	if h.DataIP != "" {
		data, _ := netip.ParsePrefix(p.ISCSI.CIDR)
		props["cairn.data.address"] = fmt.Sprintf("%s/%d", h.DataIP, data.Bits())
	}
	var members []string
	for _, o := range p.Hosts {
		if o.Has(RoleMDM) || o.Has(RoleTieBreaker) {
			members = append(members, o.DataAddress())
		}
	}
	props[PropMDMMembers] = strings.Join(members, ",")
	if h.Has(RoleGateway) {
		props[PropAdminPassword] = s.AdminPassword
	}
	return props
}

// Optional vApp properties: the appliance does not define them yet (a
// proposal to it); the deploy engine sets them only on templates that
// declare them, since firstboot rejects unknown cairn.* keys.
const (
	PropMDMMembers    = "cairn.cluster.mdm_members"    // addresses of all MDM members
	PropAdminPassword = "cairn.gateway.admin_password" // initial password of the gateway's admin
)

// OptionalProperties lists them.
var OptionalProperties = []string{PropMDMMembers, PropAdminPassword}

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

// Secrets are generated once per deployment and kept in its state file.
type Secrets struct {
	ClusterToken  string `json:"cluster_token"`
	AdminPassword string `json:"admin_password"`
}

var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,31}$`)
