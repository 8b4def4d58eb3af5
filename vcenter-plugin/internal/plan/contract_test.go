package plan

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/cairn-storage/cairn/appliance/contract"
)

// The properties the engine sets for every role pass the appliance's own validation,
// with each SVM's target port its own and the same list everywhere.
func TestVAppPropertiesFollowTheContract(t *testing.T) {
	p := &Plan{Version: 1, System: "c1", Network: Network{CIDR: "10.20.0.0/24", Gateway: "10.20.0.1"}, ISCSI: ISCSI{CIDR: "10.30.0.0/24"}}
	roles := [][]string{{"mdm", "sds", "target"}, {"mdm", "sds", "target", "gateway"}, {"tiebreaker"}, {"sds", "target", "gateway"}, {"target"}}
	for i, r := range roles {
		p.Hosts = append(p.Hosts, Host{Name: fmt.Sprintf("esx-%02d.lab", i+1), Roles: r, SVMIP: fmt.Sprintf("10.20.0.%d", 11+i)})
	}
	p.Hosts[4].TargetPortID = 2 // fixed by the plan: the others go around it
	p.Hosts[1].DataIP = "10.30.0.12"
	p.DataClients = []string{"10.40.0.5", "10.41.0.0/24"}
	want := map[string]string{"esx-01.lab": "1", "esx-02.lab": "3", "esx-04.lab": "4", "esx-05.lab": "2"}
	for i := range p.Hosts {
		h := &p.Hosts[i]
		props := p.VAppProperties(h, "0123456789abcdef0123")
		if keys := slices.Sorted(maps.Keys(props)); !slices.Equal(keys, slices.Sorted(slices.Values(contract.Keys()))) {
			t.Fatalf("%s: keys %v, contract %v", h.Name, keys, contract.Keys())
		}
		s, err := contract.Validate(props)
		if err != nil {
			t.Fatalf("%s (%v): first boot refuses: %v", h.Name, h.Roles, err)
		}
		if got := props[contract.KeyTargetPortID]; got != want[h.Name] {
			t.Errorf("%s: port %q, want %q", h.Name, got, want[h.Name])
		}
		if h.Has(RoleTarget) && props[contract.KeyTargetPorts] != "1,3,4,2" {
			t.Errorf("%s: port list %q", h.Name, props[contract.KeyTargetPorts])
		}
		if len(s.MDMMembers) != 3 || s.MDMMembers[2].Name != "cairn-esx-03" || len(s.Gateways) != 2 {
			t.Errorf("%s: members %v gateways %v", h.Name, s.MDMMembers, s.Gateways)
		}
		// The firewall's peers: every SVM's management and data addresses.
		if got := fmt.Sprint(s.SVMs); got != "[10.20.0.11 10.20.0.12 10.30.0.12 10.20.0.13 10.20.0.14 10.20.0.15]" {
			t.Errorf("%s: svms %s", h.Name, got)
		}
		if got := fmt.Sprint(s.DataClients); got != "[10.40.0.5/32 10.41.0.0/24]" {
			t.Errorf("%s: data clients %s", h.Name, got)
		}
		// Every SVM's first boot spends the token for its certificates,
		// whatever its roles.
		if props[contract.KeyJoinToken] != "0123456789abcdef0123" {
			t.Errorf("%s: join token %q on roles %v", h.Name, props[contract.KeyJoinToken], h.Roles)
		}
	}
}

// A join token of a later SVM (cj1.<id>.<secret>.<ca-sha256>, the secret
// base64url) fits the property the contract checks.
func TestJoinTokenFitsTheContract(t *testing.T) {
	p := &Plan{Version: 1, System: "c1", Network: Network{CIDR: "10.20.0.0/24", Gateway: "10.20.0.1"},
		Hosts: []Host{{Name: "esx-01", Roles: []string{"mdm", "sds", "gateway"}, SVMIP: "10.20.0.11"}, {Name: "esx-02", Roles: []string{"sds", "target"}, SVMIP: "10.20.0.12"}}}
	tok := "cj1.0123456789abcdef.Zm9vYmFyLV9iYXo-X19fX19fX19fX19fX19fX19fX18." + strings.Repeat("0f", 32)
	props := p.VAppProperties(&p.Hosts[1], tok)
	if _, err := contract.Validate(props); err != nil || props[contract.KeyJoinToken] != tok {
		t.Fatalf("join token %q: %v", props[contract.KeyJoinToken], err)
	}
}
