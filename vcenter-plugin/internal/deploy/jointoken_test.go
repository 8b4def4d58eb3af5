package deploy

import (
	"slices"
	"testing"

	"github.com/cairn-storage/cairn/vcenter-plugin/internal/gateway"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/plan"
)

// An SVM's join token names each certificate role its daemons present
// once: a tie-breaker is an MDM, an iSCSI client only SVM has none.
func TestCertRoles(t *testing.T) {
	for _, c := range []struct{ roles, want []string }{
		{[]string{"sds", "target"}, []string{"sds", "target"}},
		{[]string{"mdm", "sds", "target", "gateway"}, []string{"mdm", "sds", "target", "gateway"}},
		{[]string{"tiebreaker"}, []string{"mdm"}},
		{[]string{"mdm", "tiebreaker", "gateway"}, []string{"mdm", "gateway"}},
		{nil, nil},
	} {
		got := certRoles(&plan.Host{Roles: c.roles})
		if !slices.Equal(got, c.want) {
			t.Errorf("roles %v: certificate roles %v, want %v", c.roles, got, c.want)
		}
		for _, r := range got {
			if !slices.Contains(gateway.CertRoles, r) {
				t.Errorf("roles %v: %q is no certificate role", c.roles, r)
			}
		}
	}
}
