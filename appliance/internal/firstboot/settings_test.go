package firstboot

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// A real ed25519 public key (generated for these tests; the private half was discarded).
const testSSHKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIMusA5/KUSY+1FXP3mKoSCoib8YRCmz4mDu6Ey3cNF2m test@cairn"

func goodSettings() map[string]string {
	return map[string]string{
		KeyHostname:    "SVM-esx01.lab.example",
		KeyMgmtAddress: "192.0.2.10/24",
		KeyMgmtGateway: "192.0.2.1",
		KeyDataAddress: "198.51.100.10/24",
		KeyDNS:         "192.0.2.53, 192.0.2.54",
		KeyNTP:         "ntp1.example.org,192.0.2.123",
		KeyRoles:       "mdm, sds,target,gateway",
		KeyClusterName: "prod-cluster.1",
		KeyJoinToken:   "cj1.0123456789abcdef0123456789abcdef",
		KeySSHKey:      testSSHKey,
	}
}

func TestValidateGood(t *testing.T) {
	s, err := Validate(goodSettings())
	if err != nil {
		t.Fatal(err)
	}
	if s.Hostname != "svm-esx01.lab.example" {
		t.Errorf("hostname %q, want lower-cased", s.Hostname)
	}
	if s.Mgmt.DHCP || s.Mgmt.Prefix != netip.MustParsePrefix("192.0.2.10/24") {
		t.Errorf("mgmt %v", s.Mgmt)
	}
	if s.Gateway != netip.MustParseAddr("192.0.2.1") {
		t.Errorf("gateway %v", s.Gateway)
	}
	if s.Data.Prefix != netip.MustParsePrefix("198.51.100.10/24") {
		t.Errorf("data %v", s.Data)
	}
	if len(s.DNS) != 2 || s.DNS[1] != netip.MustParseAddr("192.0.2.54") {
		t.Errorf("dns %v", s.DNS)
	}
	if !slices.Equal(s.NTP, []string{"ntp1.example.org", "192.0.2.123"}) {
		t.Errorf("ntp %v", s.NTP)
	}
	if !slices.Equal(s.Roles, []Role{RoleMDM, RoleSDS, RoleTarget, RoleGateway}) {
		t.Errorf("roles %v", s.Roles)
	}
	if s.ClusterName != "prod-cluster.1" || s.JoinToken != "cj1.0123456789abcdef0123456789abcdef" || s.SSHKey != testSSHKey {
		t.Errorf("cluster/token/key wrong: %+v", s)
	}
}

func TestValidateDefaultsAndDHCP(t *testing.T) {
	s, err := Validate(map[string]string{
		KeyHostname: "svm1", KeyClusterName: "c1", KeyJoinToken: "abcdefghijklmnop",
	})
	if err != nil {
		t.Fatal(err)
	}
	if !s.Mgmt.DHCP || s.Data.IsSet() || s.Gateway.IsValid() {
		t.Errorf("want mgmt dhcp, no data, no gateway: %+v", s)
	}
	if !slices.Equal(s.Roles, []Role{RoleSDS, RoleTarget}) {
		t.Errorf("default roles %v", s.Roles)
	}
}

// Partial input: every missing required setting is reported, in one error.
func TestValidatePartial(t *testing.T) {
	_, err := Validate(map[string]string{KeyMgmtAddress: "dhcp", KeyRoles: ""})
	if err == nil {
		t.Fatal("accepted settings without hostname, cluster and token")
	}
	for _, k := range []string{KeyHostname, KeyClusterName, KeyJoinToken, KeyRoles} {
		if !hasKeyError([]error{err}, k) && !strings.Contains(err.Error(), k+":") {
			t.Errorf("error does not name %s:\n%v", k, err)
		}
	}
	var fe *FieldError
	if !errors.As(err, &fe) {
		t.Errorf("error is not a *FieldError join: %T", err)
	}
}

func TestValidateRejects(t *testing.T) {
	cases := []struct {
		name, key, value, want string
	}{
		{"shell in hostname", KeyHostname, "svm;rm -rf /", "not a valid host name"},
		{"command substitution", KeyHostname, "$(reboot)", "not a valid host name"},
		{"hostname label too long", KeyHostname, strings.Repeat("a", 64), "not a valid host name"},
		{"hostname too long", KeyHostname, strings.Repeat("a.", 130) + "a", "at most 253"},
		{"hostname leading hyphen", KeyHostname, "-svm", "not a valid host name"},
		{"newline injection", KeyClusterName, "c1\nCAIRN_ROLES=gateway", "control character"},
		{"NUL", KeyHostname, "svm\x00", "control character"},
		{"invalid utf8", KeyClusterName, "c\xff1", "UTF-8"},
		{"huge value", KeySSHKey, strings.Repeat("A", 1<<20), "at most 8192"},
		{"cluster metachar", KeyClusterName, "c1`id`", "use 1-63 letters"},
		{"cluster space", KeyClusterName, "my cluster", "use 1-63 letters"},
		{"token quote", KeyJoinToken, `abcdefghijklmnop"; reboot; "`, "malformed"},
		{"token short", KeyJoinToken, "short", "malformed"},
		{"mgmt no prefix", KeyMgmtAddress, "192.0.2.10", "no prefix length"},
		{"mgmt garbage", KeyMgmtAddress, "static", "neither"},
		{"mgmt loopback", KeyMgmtAddress, "127.0.0.5/8", "not a usable"},
		{"mgmt network address", KeyMgmtAddress, "192.0.2.0/24", "network or broadcast"},
		{"mgmt broadcast", KeyMgmtAddress, "192.0.2.255/24", "network or broadcast"},
		{"mgmt silly prefix", KeyMgmtAddress, "10.1.2.3/2", "not plausible"},
		{"gateway outside", KeyMgmtGateway, "203.0.113.1", "outside the management network"},
		{"gateway is self", KeyMgmtGateway, "192.0.2.10", "own management address"},
		{"gateway garbage", KeyMgmtGateway, "192.0.2.1;id", "not an IP address"},
		{"data overlaps", KeyDataAddress, "192.0.2.20/24", "overlaps"},
		{"dns garbage", KeyDNS, "192.0.2.53,evil.example", "not a DNS server"},
		{"dns too many", KeyDNS, "192.0.2.1 192.0.2.2 192.0.2.3 192.0.2.4", "at most 3"},
		{"ntp metachar", KeyNTP, "pool.ntp.org;reboot", "neither an IP address nor a host name"},
		{"ntp too many", KeyNTP, "a b c d e", "at most 4"},
		{"unknown role", KeyRoles, "sds,rootkit", "unknown role"},
		{"duplicate role", KeyRoles, "sds,sds", "given twice"},
		{"mdm and tiebreaker", KeyRoles, "mdm,tiebreaker", "exclude each other"},
		{"ssh options", KeySSHKey, `command="/bin/sh" ` + testSSHKey, "not supported"},
		{"ssh truncated", KeySSHKey, "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIMusA5/KU", "not valid base64"},
		{"ssh type mismatch", KeySSHKey, "ssh-rsa AAAAC3NzaC1lZDI1NTE5AAAAIMusA5/KUSY+1FXP3mKoSCoib8YRCmz4mDu6Ey3cNF2m", "does not hold a ssh-rsa key"},
		{"ssh two keys", KeySSHKey, testSSHKey + " " + strings.Repeat("x", 300), "longer than 256"},
		{"unknown key", "cairn.hostnmae", "svm", "unknown setting"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := goodSettings()
			in[c.key] = c.value
			s, err := Validate(in)
			if err == nil {
				t.Fatalf("accepted %q=%q: %+v", c.key, clip(c.value), s)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q does not contain %q", err, c.want)
			}
			if strings.Contains(err.Error(), strings.Repeat("A", 100)) {
				t.Errorf("error echoes a huge value: %d bytes", len(err.Error()))
			}
		})
	}
}

func TestValidateGatewayWithDHCP(t *testing.T) {
	in := goodSettings()
	in[KeyMgmtAddress] = "dhcp"
	if _, err := Validate(in); err == nil || !strings.Contains(err.Error(), "management address is dhcp") {
		t.Fatalf("got %v", err)
	}
}

func TestValidateTooManyKeys(t *testing.T) {
	in := goodSettings()
	for i := range maxSettings {
		in[fmt.Sprintf("cairn.x%d", i)] = "y"
	}
	if _, err := Validate(in); err == nil {
		t.Fatal("accepted too many settings")
	}
}

func TestTokenNeverEchoed(t *testing.T) {
	in := goodSettings()
	in[KeyJoinToken] = "secret-secret-secret with space"
	_, err := Validate(in)
	if err == nil || strings.Contains(err.Error(), "secret-secret") {
		t.Fatalf("token error missing or echoes the token: %v", err)
	}
}

// The vApp properties of the OVA (packer/tools/internal/ovfdesc/properties.json) must
// be exactly the keys first boot reads, with the same defaults.
func TestKeysMatchOVFDescriptor(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "packer", "tools", "internal", "ovfdesc", "properties.json"))
	if err != nil {
		t.Fatalf("read the descriptor's property list: %v", err)
	}
	var props []struct {
		Key     string `json:"key"`
		Default string `json:"default"`
	}
	if err := json.Unmarshal(b, &props); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, p := range props {
		keys = append(keys, p.Key)
		if p.Default != defaults[p.Key] {
			t.Errorf("%s: descriptor default %q, first boot default %q", p.Key, p.Default, defaults[p.Key])
		}
	}
	if !slices.Equal(keys, Keys) {
		t.Errorf("descriptor keys %v\nfirst boot keys %v", keys, Keys)
	}
}
