package firewall

import (
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cairn-storage/cairn/appliance/contract"
)

// A valid ed25519 public key (the firstboot fixtures' one).
const sshKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIMusA5/KUSY+1FXP3mKoSCoib8YRCmz4mDu6Ey3cNF2m test@cairn"

func settings(t testing.TB, over map[string]string) *contract.Settings {
	t.Helper()
	raw := map[string]string{
		contract.KeyHostname:     "svm1",
		contract.KeyMgmtAddress:  "192.0.2.10/24",
		contract.KeyDataAddress:  "198.51.100.10/24",
		contract.KeyRoles:        "mdm,sds,target,gateway",
		contract.KeyClusterName:  "c1",
		contract.KeyMDMMembers:   "svm1=192.0.2.10,svm2=192.0.2.11,svm3=192.0.2.12",
		contract.KeyGateways:     "192.0.2.10",
		contract.KeySVMs:         "192.0.2.10,198.51.100.10,192.0.2.11,198.51.100.11,192.0.2.12,198.51.100.12,192.0.2.13,198.51.100.13",
		contract.KeyJoinToken:    "0123456789abcdef0123",
		contract.KeyTargetPortID: "1",
		contract.KeySSHKey:       sshKey,
	}
	for k, v := range over {
		if v == "-" {
			delete(raw, k)
		} else {
			raw[k] = v
		}
	}
	s, err := contract.Validate(raw)
	if err != nil {
		t.Fatalf("settings: %v", err)
	}
	return s
}

// allowed flattens rules to "port iface from,from" lines.
func allowed(rs []Rule) []string {
	var out []string
	for _, r := range rs {
		var from []string
		for _, p := range r.From {
			from = append(from, prefixString(p))
		}
		iface := r.Iface
		if iface == "" {
			iface = "any"
		}
		src := strings.Join(from, ",")
		if src == "" {
			src = "any"
		}
		out = append(out, strings.Join([]string{strconv.Itoa(int(r.Port)), iface, src}, " "))
	}
	return out
}

const allSVMs = "192.0.2.10,198.51.100.10,192.0.2.11,198.51.100.11,192.0.2.12,198.51.100.12,192.0.2.13,198.51.100.13"

func TestRulesPerRole(t *testing.T) {
	for _, tc := range []struct {
		name string
		over map[string]string
		want []string
	}{
		{"all roles", nil, []string{
			"22 eth0 any",
			"2379 any " + allSVMs,
			"2380 eth0 192.0.2.10,192.0.2.11,192.0.2.12",
			"7443 eth0 any",
			"7100 any " + allSVMs,
			"3260 eth1 198.51.100.0/24",
			"8443 eth0 any",
		}},
		{"sds only: no etcd, no iSCSI, no gateway", map[string]string{contract.KeyRoles: "sds", contract.KeyHostname: "svm4", contract.KeyMgmtAddress: "192.0.2.13/24", contract.KeyDataAddress: "198.51.100.13/24"}, []string{
			"22 eth0 any",
			"7100 any " + allSVMs,
		}},
		{"target only: iSCSI from the data network", map[string]string{contract.KeyRoles: "target", contract.KeyHostname: "svm4", contract.KeyMgmtAddress: "192.0.2.13/24", contract.KeyDataAddress: "198.51.100.13/24"}, []string{
			"22 eth0 any",
			"3260 eth1 198.51.100.0/24",
		}},
		{"tiebreaker: etcd ports, and the join service as every MDM member", map[string]string{contract.KeyRoles: "tiebreaker", contract.KeyHostname: "svm3", contract.KeyMgmtAddress: "192.0.2.12/24"}, []string{
			"22 eth0 any",
			"2379 any " + allSVMs,
			"2380 eth0 192.0.2.10,192.0.2.11,192.0.2.12",
			"7443 eth0 any",
		}},
		{"an MDM member not the first: the join service too (it keeps a copy of the CA)", map[string]string{contract.KeyRoles: "mdm,sds", contract.KeyHostname: "svm2", contract.KeyMgmtAddress: "192.0.2.11/24", contract.KeyDataAddress: "198.51.100.11/24"}, []string{
			"22 eth0 any",
			"2379 any " + allSVMs,
			"2380 eth0 192.0.2.10,192.0.2.11,192.0.2.12",
			"7443 eth0 any",
			"7100 any " + allSVMs,
		}},
		{"gateway only", map[string]string{contract.KeyRoles: "gateway", contract.KeyHostname: "svm4", contract.KeyMgmtAddress: "192.0.2.13/24"}, []string{
			"22 eth0 any",
			"8443 eth0 any",
		}},
		{"no svms list: networks; members and gateways still counted only via networks", map[string]string{contract.KeySVMs: "-"}, []string{
			"22 eth0 any",
			"2379 eth0 192.0.2.0/24",
			"2380 eth0 192.0.2.10,192.0.2.11,192.0.2.12",
			"7443 eth0 any",
			"7100 eth1 198.51.100.0/24",
			"3260 eth1 198.51.100.0/24",
			"8443 eth0 any",
		}},
		{"no data network: data ports on the management network", map[string]string{contract.KeySVMs: "-", contract.KeyDataAddress: "-"}, []string{
			"22 eth0 any",
			"2379 eth0 192.0.2.0/24",
			"2380 eth0 192.0.2.10,192.0.2.11,192.0.2.12",
			"7443 eth0 any",
			"7100 eth0 192.0.2.0/24",
			"3260 eth0 192.0.2.0/24",
			"8443 eth0 any",
		}},
		{"dhcp: the NIC only", map[string]string{contract.KeySVMs: "-", contract.KeyMgmtAddress: "dhcp", contract.KeyDataAddress: "dhcp", contract.KeyRoles: "sds,target,gateway"}, []string{
			"22 eth0 any",
			"7100 eth1 any",
			"3260 eth1 any",
			"8443 eth0 any",
		}},
		{"svms list lacks members and gateways: they are added", map[string]string{contract.KeySVMs: "192.0.2.13", contract.KeyGateways: "192.0.2.20"}, []string{
			"22 eth0 any",
			"2379 any 192.0.2.13,192.0.2.10,192.0.2.11,192.0.2.12,192.0.2.20",
			"2380 eth0 192.0.2.10,192.0.2.11,192.0.2.12",
			"7443 eth0 any",
			"7100 any 192.0.2.13,192.0.2.10,192.0.2.11,192.0.2.12,192.0.2.20",
			"3260 eth1 198.51.100.0/24",
			"8443 eth0 any",
		}},
		{"data clients: etcd and the data path, nothing else", map[string]string{contract.KeyDataClients: "203.0.113.5,203.0.113.64/26"}, []string{
			"22 eth0 any",
			"2379 any " + allSVMs,
			"2379 any 203.0.113.5,203.0.113.64/26",
			"2380 eth0 192.0.2.10,192.0.2.11,192.0.2.12",
			"7443 eth0 any",
			"7443 any 203.0.113.5,203.0.113.64/26",
			"7100 any " + allSVMs,
			"7100 any 203.0.113.5,203.0.113.64/26",
			"3260 eth1 198.51.100.0/24",
			"8443 eth0 any",
		}},
		{"no SSH key: SSH closed", map[string]string{contract.KeySSHKey: "-", contract.KeyRoles: "gateway"}, []string{
			"8443 eth0 any",
		}},
		{"SSH from named networks, any NIC", map[string]string{contract.KeySSHAllowFrom: "203.0.113.0/28, 2001:db8::/64,203.0.113.77", contract.KeyRoles: "gateway"}, []string{
			"22 any 203.0.113.0/28,2001:db8::/64,203.0.113.77",
			"8443 eth0 any",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := allowed(Rules(settings(t, tc.over), Peers{}))
			if !slices.Equal(got, tc.want) {
				t.Fatalf("rules:\n  got  %q\n  want %q", got, tc.want)
			}
		})
	}
}

// TestRulesPeers: what the system model says moves the etcd and SDS rules only:
// a known SVM is admitted, a removed one leaves even when the settings list it,
// and this SVM's own addresses never leave.
func TestRulesPeers(t *testing.T) {
	addrs := func(ss ...string) []netip.Addr {
		var out []netip.Addr
		for _, s := range ss {
			out = append(out, netip.MustParseAddr(s))
		}
		return out
	}
	const rest = "192.0.2.11,198.51.100.11,192.0.2.12,198.51.100.12,192.0.2.13"
	for _, tc := range []struct {
		name  string
		over  map[string]string
		peers Peers
		want  []string
	}{
		{"a new SVM joins the settings' list", nil, Peers{Known: addrs("192.0.2.20", "198.51.100.20", "192.0.2.11")}, []string{
			"22 eth0 any",
			"2379 any " + allSVMs + ",192.0.2.20,198.51.100.20",
			"2380 eth0 192.0.2.10,192.0.2.11,192.0.2.12",
			"7443 eth0 any",
			"7100 any " + allSVMs + ",192.0.2.20,198.51.100.20",
			"3260 eth1 198.51.100.0/24",
			"8443 eth0 any",
		}},
		{"a removed SVM leaves; own addresses and MDM raft stay", nil, Peers{Removed: addrs("198.51.100.13", "192.0.2.10", "198.51.100.10")}, []string{
			"22 eth0 any",
			"2379 any 192.0.2.10,198.51.100.10," + rest,
			"2380 eth0 192.0.2.10,192.0.2.11,192.0.2.12",
			"7443 eth0 any",
			"7100 any 192.0.2.10,198.51.100.10," + rest,
			"3260 eth1 198.51.100.0/24",
			"8443 eth0 any",
		}},
		{"no svms list: the networks, and the model's SVMs beside them", map[string]string{contract.KeySVMs: "-", contract.KeyRoles: "mdm,sds"},
			Peers{Known: addrs("203.0.113.7", "2001:db8::7")}, []string{
				"22 eth0 any",
				"2379 eth0 192.0.2.0/24",
				"2379 any 203.0.113.7,2001:db8::7",
				"2380 eth0 192.0.2.10,192.0.2.11,192.0.2.12",
				"7443 eth0 any",
				"7100 eth1 198.51.100.0/24",
				"7100 any 203.0.113.7,2001:db8::7",
			}},
		{"no etcd or SDS role: peers open nothing", map[string]string{contract.KeyRoles: "target", contract.KeyHostname: "svm4", contract.KeyMgmtAddress: "192.0.2.13/24", contract.KeyDataAddress: "198.51.100.13/24"},
			Peers{Known: addrs("192.0.2.20")}, []string{
				"22 eth0 any",
				"3260 eth1 198.51.100.0/24",
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := allowed(Rules(settings(t, tc.over), tc.peers))
			if !slices.Equal(got, tc.want) {
				t.Fatalf("rules:\n  got  %q\n  want %q", got, tc.want)
			}
			checkRuleset(t, Ruleset(settings(t, tc.over), tc.peers))
		})
	}
}

func TestRulesetText(t *testing.T) {
	s := settings(t, map[string]string{contract.KeySSHAllowFrom: "203.0.113.0/28,2001:db8::/64", contract.KeyMgmtAddress: "dhcp",
		contract.KeyMDMMembers: "svm1=192.0.2.10,svm2=2001:db8:1::2", contract.KeyHostname: "svm2"})
	rs := Ruleset(s, Peers{})
	for _, want := range []string{
		"flush ruleset\n",
		"type filter hook input priority filter; policy drop;",
		"ct state established,related accept",
		`iifname "lo" accept`,
		`iifname "eth0" udp sport 67 udp dport 68 accept`,
		`ip saddr { 203.0.113.0/28 } tcp dport 22 accept`,
		`ip6 saddr { 2001:db8::/64 } tcp dport 22 accept`,
		`iifname "eth0" ip saddr { 192.0.2.10 } tcp dport 2380 accept`,
		`iifname "eth0" ip6 saddr { 2001:db8:1::2 } tcp dport 2380 accept`,
		`iifname "eth1" ip saddr { 198.51.100.0/24 } tcp dport 3260 accept`,
		`iifname "eth0" tcp dport 8443 accept`,
		"type filter hook forward priority filter; policy drop;",
	} {
		if !strings.Contains(rs, want) {
			t.Errorf("ruleset lacks %q:\n%s", want, rs)
		}
	}
	if strings.Contains(rs, `iifname "eth1" udp sport 67`) {
		t.Errorf("DHCP replies accepted on the static data NIC:\n%s", rs)
	}
	// No port that no role serves: NBD (10809) never, 2379 only with an MDM role.
	gw := Ruleset(settings(t, map[string]string{contract.KeyRoles: "gateway", contract.KeyHostname: "svm4", contract.KeyMgmtAddress: "192.0.2.13/24"}), Peers{})
	for _, port := range []string{"2379", "2380", "7100", "3260", "10809"} {
		if strings.Contains(gw, "dport "+port) {
			t.Errorf("gateway-only SVM opens %s:\n%s", port, gw)
		}
	}
}

// ruleLine is every line Ruleset may write inside the input chain: a settings value
// that escaped validation would show here as something else.
var ruleLine = regexp.MustCompile(`^\t\t(iifname "eth[01]" )?((ip|ip6) saddr \{ [0-9a-f.:/, ]+ \} )?tcp dport [0-9]+ accept comment "[0-9]+ [a-z-]+: [A-Za-z0-9 ().,:_]+"$`)

func checkRuleset(t *testing.T, rs string) {
	t.Helper()
	if len(rs) > 64<<10 {
		t.Fatalf("ruleset is %d bytes long", len(rs))
	}
	in := false
	for _, l := range strings.Split(rs, "\n") {
		switch {
		case strings.HasPrefix(l, "\tchain input"):
			in = true
		case in && l == "\t}":
			in = false
		case in && strings.HasPrefix(l, "\t\t") && strings.Contains(l, "tcp dport"):
			if c := l[strings.Index(l, "comment ")+len("comment "):]; len(c) > 128+2 {
				t.Fatalf("comment longer than nft's 128 characters: %s", c)
			}
			if !ruleLine.MatchString(l) {
				t.Fatalf("unexpected rule line %q in\n%s", l, rs)
			}
		}
	}
	if !strings.Contains(rs, "policy drop;") || strings.Count(rs, "{") != strings.Count(rs, "}") {
		t.Fatalf("malformed ruleset:\n%s", rs)
	}
}

// FuzzRuleset feeds raw settings (the OVF environment's values, within the contract's
// bounds) through Validate and Ruleset: whatever validation accepts renders to a
// ruleset of known line shapes, bounded in size.
func FuzzRuleset(f *testing.F) {
	f.Add("mdm,sds,target,gateway", "192.0.2.10/24", "198.51.100.10/24", "svm1=192.0.2.10,svm2=192.0.2.11", "192.0.2.10", allSVMs, "", "", sshKey)
	f.Add("sds", "dhcp", "dhcp", "m=2001:db8::1", "", "2001:db8::5,::ffff:192.0.2.1", "203.0.113.0/24", "10.0.0.0/8,2001:db8::/32", sshKey)
	f.Add("tiebreaker", "2001:db8::10/64", "", "svm1=2001:db8::10", "2001:db8::10", "", "2001:db8:5::/48,192.0.2.7", "192.0.2.1", "")
	f.Fuzz(func(t *testing.T, roles, mgmt, data, members, gateways, svms, clients, sshFrom, key string) {
		raw := map[string]string{
			contract.KeyHostname: "svm1", contract.KeyClusterName: "c1", contract.KeyJoinToken: "0123456789abcdef0123",
			contract.KeyRoles: roles, contract.KeyMgmtAddress: mgmt, contract.KeyDataAddress: data,
			contract.KeyMDMMembers: members, contract.KeyGateways: gateways, contract.KeySVMs: svms, contract.KeyDataClients: clients,
			contract.KeySSHAllowFrom: sshFrom, contract.KeySSHKey: key,
		}
		s, err := contract.Validate(raw)
		if err != nil {
			return
		}
		checkRuleset(t, Ruleset(s, Peers{}))
	})
}

// TestRulesetLoads has nft check the generated rulesets (root only: nft needs
// netlink even for --check).
func TestRulesetLoads(t *testing.T) {
	nft, err := exec.LookPath("nft")
	if err != nil || os.Geteuid() != 0 {
		t.Skip("needs root and nft (tests/security/firewall.sh loads it for real)")
	}
	for _, over := range []map[string]string{nil, {contract.KeySVMs: "-", contract.KeyMgmtAddress: "dhcp", contract.KeyDataAddress: "dhcp"},
		{contract.KeySSHAllowFrom: "203.0.113.0/28,2001:db8::/64", contract.KeyMDMMembers: "svm1=192.0.2.10,svm2=2001:db8:1::2", contract.KeyDataClients: "203.0.113.5,2001:db8:9::/64"}} {
		rs := Ruleset(settings(t, over), Peers{})
		checkRuleset(t, rs)
		p := filepath.Join(t.TempDir(), "nftables.conf")
		if err := os.WriteFile(p, []byte(rs), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command(nft, "-c", "-f", p).CombinedOutput(); err != nil {
			t.Fatalf("nft -c rejects the ruleset: %v\n%s\n%s", err, out, rs)
		}
	}
}
