package contract

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
)

// A real ed25519 public key (generated for these tests; the private half was discarded).
const testSSHKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIMusA5/KUSY+1FXP3mKoSCoib8YRCmz4mDu6Ey3cNF2m test@cairn"

func goodSettings() map[string]string {
	return map[string]string{
		KeyHostname:     "SVM-esx01.lab.example",
		KeyMgmtAddress:  "192.0.2.10/24",
		KeyMgmtGateway:  "192.0.2.1",
		KeyDataAddress:  "198.51.100.10/24",
		KeyDNS:          "192.0.2.53, 192.0.2.54",
		KeyNTP:          "ntp1.example.org,192.0.2.123",
		KeyRoles:        "mdm, sds,target,gateway",
		KeyClusterName:  "prod-cluster.1",
		KeyJoinToken:    "cj1.0123456789abcdef0123456789abcdef",
		KeyMDMMembers:   "svm-esx01.lab.example=192.0.2.10,svm-esx02=192.0.2.11,svm-esx03=192.0.2.12",
		KeyGateways:     "192.0.2.10,192.0.2.11",
		KeySVMs:         "192.0.2.10,198.51.100.10,192.0.2.11,198.51.100.11",
		KeyDataClients:  "203.0.113.7, 203.0.113.64/26,2001:db8::/64",
		KeySSHAllowFrom: "203.0.113.9/28",
		KeyTargetPortID: "2",
		KeyTargetPorts:  "1,2,3",
		KeySSHKey:       testSSHKey,
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
	if len(s.SVMs) != 4 || s.SVMs[3] != netip.MustParseAddr("198.51.100.11") {
		t.Errorf("svms %v", s.SVMs)
	}
	if fmt.Sprint(s.DataClients) != "[203.0.113.7/32 203.0.113.64/26 2001:db8::/64]" {
		t.Errorf("data clients %v", s.DataClients)
	}
	if fmt.Sprint(s.SSHAllowFrom) != "[203.0.113.0/28]" {
		t.Errorf("ssh allow_from %v, want the masked network", s.SSHAllowFrom)
	}
}

func TestValidateDefaultsAndDHCP(t *testing.T) {
	s, err := Validate(map[string]string{
		KeyHostname: "svm1", KeyClusterName: "c1", KeyMDMMembers: "m1=10.0.0.1", KeyJoinToken: "bootstrap-token-0123456789",
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
	for _, k := range []string{KeyHostname, KeyClusterName, KeyRoles} {
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
		{"gateway without token", KeyJoinToken, "", "cairn.cluster.join_token: required on SVMs with roles mdm,sds,target,gateway"},
		{"no members", KeyMDMMembers, "", "cairn.cluster.mdm_members: required"},
		{"member not name=address", KeyMDMMembers, "192.0.2.10", "not name=address"},
		{"member bad name", KeyMDMMembers, "svm;x=192.0.2.10", "not a valid host name"},
		{"member bad address", KeyMDMMembers, "svm-esx01.lab.example=192.0.2.300", "not a usable IP address"},
		{"member loopback", KeyMDMMembers, "svm-esx01.lab.example=127.0.0.1", "not a usable IP address"},
		{"member twice", KeyMDMMembers, "svm-esx01.lab.example=192.0.2.10,b=192.0.2.10", "repeats"},
		{"mdm not a member", KeyMDMMembers, "a=192.0.2.11,b=192.0.2.12,c=192.0.2.13", "not among the members"},
		{"member address not own", KeyMDMMembers, "svm-esx01.lab.example=192.0.2.99", "management address is 192.0.2.10"},
		{"too many members", KeyMDMMembers, "svm-esx01.lab.example=192.0.2.10,a=10.0.0.1,b=10.0.0.2,c=10.0.0.3,d=10.0.0.4,e=10.0.0.5,f=10.0.0.6,g=10.0.0.7", "at most 7"},
		{"gateway list garbage", KeyGateways, "192.0.2.10,gw.example", "not a gateway address"},
		{"gateway twice", KeyGateways, "192.0.2.10 192.0.2.10", "given twice"},
		{"svm garbage", KeySVMs, "192.0.2.10,svm.example", "not an SVM address"},
		{"svm twice", KeySVMs, "192.0.2.10 192.0.2.10", "given twice"},
		{"svm loopback", KeySVMs, "127.0.0.1", "not an SVM address"},
		{"data clients everything", KeyDataClients, "0.0.0.0/0", "opens etcd and the data path to every address"},
		{"data clients garbage", KeyDataClients, "203.0.113.0/33", "not a network"},
		{"ssh everything", KeySSHAllowFrom, "::/0", "opens SSH to every address"},
		{"ssh twice", KeySSHAllowFrom, "192.0.2.1/24,192.0.2.7/24", "given twice"},
		{"port zero", KeyTargetPortID, "0", "not a relative target port id"},
		{"port too big", KeyTargetPortID, "65536", "not a relative target port id"},
		{"port garbage", KeyTargetPortID, "1;2", "not a relative target port id"},
		{"ports twice", KeyTargetPorts, "1,2,2", "given twice"},
		{"ports without own", KeyTargetPorts, "1,3", "does not include this SVM's own port 2"},
		{"ports garbage", KeyTargetPorts, "1,x", "not a relative target port id"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := goodSettings()
			in[c.key] = c.value
			s, err := Validate(in)
			if err == nil {
				t.Fatalf("accepted %q=%q: %+v", c.key, Clip(c.value), s)
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
	for i := range MaxSettings {
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

// Every role gets exactly what the property table says it needs: every SVM needs
// its join token (its certificates come from it), and nothing needs a target port
// but a target.
func TestRequiredPerRole(t *testing.T) {
	base := map[string]string{KeyHostname: "svm1", KeyClusterName: "c1", KeyMDMMembers: "m1=10.0.0.1"}
	for _, roles := range []string{"sds", "gateway", "target", "mdm", "tiebreaker"} {
		base[KeyRoles] = roles
		if _, err := Validate(base); err == nil || !strings.Contains(err.Error(), KeyJoinToken+": required") {
			t.Fatalf("%s SVM without token: %v", roles, err)
		}
	}
	base[KeyJoinToken], base[KeyRoles] = "bootstrap-token-0123456789", "sds"
	if _, err := Validate(base); err != nil {
		t.Fatalf("sds SVM with its token rejected: %v", err)
	}
	for _, p := range Properties() {
		if p.Password && p.Key != KeyJoinToken {
			t.Errorf("%s is a password property: only the one-time token may be", p.Key)
		}
		if p.Type != "string" || p.Label == "" || p.Description == "" || p.Category == "" {
			t.Errorf("%s: incomplete definition %+v", p.Key, p)
		}
	}
}

// Validate interprets every key of the table: an invalid value of any key is
// reported under that key (a key in the table that first boot ignored would pass).
func TestEveryKeyInterpreted(t *testing.T) {
	for _, k := range Keys() {
		in := goodSettings()
		in[k] = "!!bad value!!"
		_, err := Validate(in)
		if err == nil {
			t.Errorf("%s: an invalid value was accepted", k)
			continue
		}
		var fe *FieldError
		if !errors.As(err, &fe) || !strings.Contains(err.Error(), k+":") {
			t.Errorf("%s: error does not name the key: %v", k, err)
		}
	}
}
