package firstboot

import (
	"github.com/cairn-storage/cairn/appliance/contract"
	"github.com/cairn-storage/cairn/appliance/internal/firewall"
	"github.com/cairn-storage/cairn/appliance/internal/update"
	"net/netip"
	"strconv"

	"fmt"
	"io/fs"
	"maps"
	"strings"
)

// File is one file first boot writes, relative to the target root.
type File struct {
	Path    string // absolute path inside the appliance, e.g. /etc/hostname
	Mode    fs.FileMode
	Owner   string // user name that owns the file ("" = root); its directory too
	Content string
}

// Plan is everything first boot changes: files to write and units to start. It is
// computed entirely before anything is written, so invalid settings change nothing.
type Plan struct {
	Files []File
	Units []string // systemd units to enable and start, in order
}

// Interface names: the image boots with net.ifnames=0, so the first NIC (the OVF
// descriptor's "Management" network) is eth0 and the second ("Data") is eth1.
const (
	mgmtInterface = "eth0"
	dataInterface = "eth1"
)

// AdminUser is the account that receives the SSH key. It exists in the image with a
// locked password and sudo rights (packer/scripts/10-base.sh).
const AdminUser = "cairn"

// Paths of the files first boot writes. EnvFile is read by every Cairn unit
// (EnvironmentFile=); its variables are the daemons' configuration interface.
const (
	EnvFile       = "/etc/cairn/cairn.env"
	JoinTokenFile = "/etc/cairn/join-token"
	// SettingsFile keeps the settings first boot applied, in the user-data format
	// (ParseUserData; root only), for the daemons that recompute what first boot
	// derived from them (cairn peersync: the firewall). The SSH key is kept without
	// its comment, and the one-time bootstrap token not at all (SettingsFileContent).
	SettingsFile = "/etc/cairn/settings"
	DoneFile     = "/var/lib/cairn/firstboot.done"
	// PKIDir holds the SVM's certificates, one directory per role (cairn-certs).
	PKIDir    = "/etc/cairn/pki"
	ReadyFile = "/run/cairn/ready"
)

// UnitForRole maps a role to the systemd unit that runs it. The tiebreaker is an MDM
// started with CAIRN_MDM_TIEBREAKER=true.
func UnitForRole(r contract.Role) string {
	switch r {
	case contract.RoleMDM, contract.RoleTiebreaker:
		return "cairn-mdm.service"
	case contract.RoleSDS:
		return "cairn-sds.service"
	case contract.RoleTarget:
		return "cairn-target.service"
	case contract.RoleGateway:
		return "cairn-gateway.service"
	}
	return ""
}

// PeerSyncUnit runs on every SVM, whatever its roles: it keeps the firewall admitting
// the SVMs the system model knows (cairn peersync).
const PeerSyncUnit = "cairn-peersync.service"

// ReadyUnit reports readiness after the role units are up (see ReportReady).
const ReadyUnit = "cairn-ready.service"

// CertsUnit gives the SVM a certificate per role before its daemons start: the
// first MDM member creates the cluster CA and issues its own; every other SVM
// joins with its join token, and every other MDM member then fetches its copy
// of the CA (cairn-role certs). JoinUnit runs the join service on every MDM
// member (cairn pki serve), each a CA keeper.
const (
	CertsUnit = "cairn-certs.service"
	JoinUnit  = "cairn-join.service"
)

// Render turns validated settings into a Plan. It performs no I/O.
func Render(s *contract.Settings) *Plan {
	p := &Plan{}
	add := func(path string, mode fs.FileMode, owner, content string) {
		p.Files = append(p.Files, File{Path: path, Mode: mode, Owner: owner, Content: content})
	}

	add("/etc/hostname", 0o644, "", s.Hostname+"\n")
	hosts := "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"
	short, _, _ := strings.Cut(s.Hostname, ".")
	names := s.Hostname
	if short != s.Hostname {
		names += " " + short
	}
	if s.Mgmt.Prefix.IsValid() {
		hosts += s.Mgmt.Prefix.Addr().String() + "\t" + names + "\n"
	} else {
		hosts += "127.0.1.1\t" + names + "\n"
	}
	add("/etc/hosts", 0o644, "", hosts)

	var mgmt strings.Builder
	fmt.Fprintf(&mgmt, "# Written by cairn firstboot from the deployment settings.\n[Match]\nName=%s\n\n[Network]\n", mgmtInterface)
	if s.Mgmt.DHCP {
		mgmt.WriteString("DHCP=yes\n")
	} else {
		fmt.Fprintf(&mgmt, "Address=%s\n", s.Mgmt.Prefix)
		if s.Gateway.IsValid() {
			fmt.Fprintf(&mgmt, "Gateway=%s\n", s.Gateway)
		}
	}
	for _, d := range s.DNS {
		fmt.Fprintf(&mgmt, "DNS=%s\n", d)
	}
	if s.Mgmt.DHCP && len(s.DNS) > 0 {
		// Explicit DNS servers win over the DHCP-provided ones.
		mgmt.WriteString("\n[DHCPv4]\nUseDNS=no\n")
	}
	add("/etc/systemd/network/10-cairn-mgmt.network", 0o644, "", mgmt.String())

	if s.Data.IsSet() {
		var data strings.Builder
		fmt.Fprintf(&data, "# Written by cairn firstboot from the deployment settings.\n[Match]\nName=%s\n\n[Network]\n", dataInterface)
		if s.Data.DHCP {
			// The data network must not take over the default route or DNS.
			data.WriteString("DHCP=yes\n\n[DHCPv4]\nUseGateway=no\nUseDNS=no\nUseNTP=no\n")
		} else {
			fmt.Fprintf(&data, "Address=%s\n", s.Data.Prefix)
		}
		add("/etc/systemd/network/20-cairn-data.network", 0o644, "", data.String())
	}

	if len(s.NTP) > 0 {
		var ntp strings.Builder
		ntp.WriteString("# Written by cairn firstboot from the deployment settings.\n")
		for _, n := range s.NTP {
			fmt.Fprintf(&ntp, "server %s iburst\n", n)
		}
		add("/etc/chrony/sources.d/cairn.sources", 0o644, "", ntp.String())
	}

	var env strings.Builder
	fmt.Fprintf(&env, "# cairn.env v2: Cairn daemon settings, written by cairn firstboot (systemd EnvironmentFile)\n"+
		"# from the deployment contract v%d (appliance/contract).\n", contract.Version)
	roles := make([]string, len(s.Roles))
	for i, r := range s.Roles {
		roles[i] = string(r)
	}
	var mdmURLs, initial []string
	for _, m := range s.MDMMembers {
		mdmURLs = append(mdmURLs, m.ClientURL())
		initial = append(initial, m.Name+"="+m.PeerURL())
	}
	var gateways []string
	for _, g := range s.Gateways {
		gateways = append(gateways, "https://"+netip.AddrPortFrom(g, contract.GatewayPort).String())
	}
	port := s.TargetPortID
	if port == 0 {
		port = 1
	}
	ports := s.TargetPorts
	if len(ports) == 0 {
		ports = []uint16{port}
	}
	portList := make([]string, len(ports))
	for i, p := range ports {
		portList[i] = strconv.Itoa(int(p))
	}
	vars := [][2]string{
		{"CAIRN_CONTRACT", strconv.Itoa(contract.Version)},
		{"CAIRN_HOSTNAME", s.Hostname},
		{"CAIRN_CLUSTER_NAME", s.ClusterName},
		{"CAIRN_ROLES", strings.Join(roles, ",")},
		{"CAIRN_MDM_TIEBREAKER", fmt.Sprint(s.HasRole(contract.RoleTiebreaker))},
		{"CAIRN_MGMT_ADDRESS", hostAddr(s.Mgmt)},
		{"CAIRN_DATA_ADDRESS", hostAddr(s.Data)},
		// Every daemon's --mdm, and the MDMs' initial etcd cluster (names are the
		// members' host names, which `cairn mdm --name` uses).
		{"CAIRN_MDM", strings.Join(mdmURLs, ",")},
		{"CAIRN_MDM_INITIAL_CLUSTER", strings.Join(initial, ",")},
		{"CAIRN_GATEWAYS", strings.Join(gateways, ",")},
		{"CAIRN_TARGET_PORT_NUMBER", strconv.Itoa(int(port))},
		{"CAIRN_TARGET_GROUP_PORTS", strings.Join(portList, ",")},
		// Certificates (cairn-role certs): the first MDM member creates the CA;
		// every MDM member keeps a copy and serves joins; every SVM joins at the
		// first of the members' join services that answers.
		{"CAIRN_PKI", PKIDir},
		{"CAIRN_CA_CREATOR", fmt.Sprint(s.CreatesCA())},
		{"CAIRN_CA_KEEPER", fmt.Sprint(s.Keeper())},
		{"CAIRN_JOIN_URLS", strings.Join(s.JoinURLs(), ",")},
	}
	if s.JoinToken != "" {
		vars = append(vars, [2]string{"CAIRN_JOIN_TOKEN_FILE", JoinTokenFile})
	}
	for _, v := range vars {
		// Values are validated to hold no quotes, spaces or control characters.
		fmt.Fprintf(&env, "%s=%s\n", v[0], v[1])
	}
	add(EnvFile, 0o644, "", env.String())
	if s.JoinToken != "" {
		add(JoinTokenFile, 0o600, "", s.JoinToken+"\n")
	}

	// The firewall: each Cairn port only for this SVM's roles and only from who needs
	// it. nftables.service loads this file at every boot; apply loads it now.
	add(firewall.Path, 0o755, "", firewall.Ruleset(s, firewall.Peers{}))

	if s.SSHKey != "" {
		add("/home/"+AdminUser+"/.ssh/authorized_keys", 0o600, AdminUser, s.SSHKey+"\n")
	}

	p.Units = append(p.Units, CertsUnit)
	if s.Keeper() {
		p.Units = append(p.Units, JoinUnit)
	}
	seen := map[string]bool{}
	for _, r := range s.Roles {
		if u := UnitForRole(r); !seen[u] {
			seen[u] = true
			p.Units = append(p.Units, u)
		}
	}
	// Every SVM runs peer sync and the updater, whatever its roles: the
	// firewall follows the model (cairn peersync), and the gateway's upgrade
	// orders reach an SVM only through the updater (internal/update).
	p.Units = append(p.Units, PeerSyncUnit, update.UpdaterUnit, ReadyUnit)
	return p
}

// hostAddr is the address a daemon binds: the static address, "dhcp" (the daemon takes
// the interface's address at start), or empty for "not configured".
func hostAddr(a contract.Address) string {
	if a.Prefix.IsValid() {
		return a.Prefix.Addr().String()
	}
	return a.String()
}

// TokenNotKept stands for the bootstrap token in SettingsFile: a well-formed
// token that is no token (nothing stores it; it only satisfies the
// contract's rule that every SVM was given one).
const TokenNotKept = "not-kept-after-first-boot"

// SettingsFileContent is SettingsFile's content for the raw settings first boot
// validated: every value as given but the bootstrap token (left out) and the SSH key without its comment (its type and
// key data are what matters to the firewall and to validation, and a free-text
// comment may hold both quote characters, which the format cannot carry).
func SettingsFileContent(raw map[string]string) (string, error) {
	kept := maps.Clone(raw)
	// Nobody after first boot needs the join token (cairn-certs, the gateway
	// and the join service read JoinTokenFile): a copy kept for years is a copy
	// to leak. The contract requires one on every SVM, so a placeholder stands in.
	if _, ok := kept[contract.KeyJoinToken]; ok {
		kept[contract.KeyJoinToken] = TokenNotKept
	}
	if k, ok := kept[contract.KeySSHKey]; ok {
		if f := strings.Fields(k); len(f) >= 2 {
			kept[contract.KeySSHKey] = f[0] + " " + f[1]
		}
	}
	doc, err := EncodeUserData(kept)
	if err != nil {
		return "", fmt.Errorf("%s: %w", SettingsFile, err)
	}
	header, rest, _ := strings.Cut(string(doc), "\n")
	return header + "\n# The settings cairn firstboot applied (read by cairn peersync). Do not edit.\n" + rest, nil
}
