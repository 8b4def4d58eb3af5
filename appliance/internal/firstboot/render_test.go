package firstboot

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cairn-storage/cairn/appliance/contract"
	"github.com/cairn-storage/cairn/appliance/internal/firewall"
)

// TestRenderCAKeepers: every MDM member (mdm or tiebreaker) keeps the CA
// and serves joins — its env says so, first boot enables cairn-join and the
// firewall opens 7443 — and only the first member of a new system (no join
// token) creates the CA; every SVM is given every member's join service,
// the first member's first.
func TestRenderCAKeepers(t *testing.T) {
	const urls = "https://192.0.2.10:7443,https://192.0.2.11:7443,https://192.0.2.12:7443"
	const bootstrap = "first-boot-token-of-the-deployer"
	const joinToken = "cj1.0123456789abcdef.c2VjcmV0.abcd"
	for _, tc := range []struct {
		name, host, addr, roles, token string
		creator, keeper                bool
	}{
		{"the first MDM member of a new system", "svm-esx01.lab.example", "192.0.2.10/24", "mdm,sds,target,gateway", bootstrap, true, true},
		{"another MDM member", "svm-esx02", "192.0.2.11/24", "mdm,sds", bootstrap, false, true},
		{"a tie-breaker member", "svm-esx03", "192.0.2.12/24", "tiebreaker", bootstrap, false, true},
		{"an SVM without an MDM role", "svm-esx04", "192.0.2.13/24", "sds,target", bootstrap, false, false},
		// Its host rebuilt, the first member joins the existing system: a new
		// CA would cut it off from every other node.
		{"the first MDM member given a join token", "svm-esx01.lab.example", "192.0.2.10/24", "mdm,sds", joinToken, false, true},
		{"an MDM member added with a join token", "svm-esx02", "192.0.2.11/24", "mdm", joinToken, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw := goodSettings()
			raw[contract.KeyHostname], raw[contract.KeyMgmtAddress], raw[contract.KeyRoles] = tc.host, tc.addr, tc.roles
			raw[contract.KeyJoinToken] = tc.token
			delete(raw, contract.KeyDataAddress)
			s, err := contract.Validate(raw)
			if err != nil {
				t.Fatal(err)
			}
			p := Render(s)
			var env, rules string
			for _, f := range p.Files {
				switch f.Path {
				case EnvFile:
					env = f.Content
				case firewall.Path:
					rules = f.Content
				}
			}
			for _, want := range []string{"CAIRN_CA_CREATOR=" + strconv.FormatBool(tc.creator), "CAIRN_CA_KEEPER=" + strconv.FormatBool(tc.keeper), "CAIRN_JOIN_URLS=" + urls} {
				if !strings.Contains(env, "\n"+want+"\n") {
					t.Errorf("env lacks %q:\n%s", want, env)
				}
			}
			if got := slices.Contains(p.Units, JoinUnit); got != tc.keeper {
				t.Errorf("%s enabled: %v, want %v (units %v)", JoinUnit, got, tc.keeper, p.Units)
			}
			if i, j := slices.Index(p.Units, CertsUnit), slices.Index(p.Units, JoinUnit); tc.keeper && (i < 0 || j < i) {
				t.Errorf("units %v: %s must come after %s", p.Units, JoinUnit, CertsUnit)
			}
			if got := strings.Contains(rules, "tcp dport 7443 accept"); got != tc.keeper {
				t.Errorf("firewall opens 7443: %v, want %v:\n%s", got, tc.keeper, rules)
			}
		})
	}
}
