// The join token of an SVM added to a running system (Expand, Replace):
// its first boot spends it at the cluster's join service for one
// certificate per role it runs. The SVMs of an initial deployment spend the
// deployment's bootstrap token instead (plan.VAppProperties).

package deploy

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/cairn-storage/cairn/vcenter-plugin/internal/gateway"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/plan"
)

// certRoleOf is the certificate role (gateway.CertRoles) each SVM role's
// daemons present: a tie-breaker is an etcd member like any MDM.
var certRoleOf = map[string]string{
	plan.RoleMDM:        "mdm",
	plan.RoleTieBreaker: "mdm",
	plan.RoleSDS:        "sds",
	plan.RoleTarget:     "target",
	plan.RoleGateway:    "gateway",
}

// certRoles are the certificate roles h's SVM needs, each once, in the
// order of its roles.
func certRoles(h *plan.Host) []string {
	var out []string
	for _, r := range h.Roles {
		if c, ok := certRoleOf[r]; ok && !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	return out
}

// joinToken creates a fresh one-time join token for s's roles, good for
// gateway.JoinTokenTTL. It is never stored (the state file neither): a
// resumed configure step creates another, and the first one expires. Only
// its id is logged.
func (r *run) joinToken(ctx context.Context, s *svmTarget) (*gateway.JoinToken, error) {
	roles := certRoles(s.h)
	t, err := r.api.CreateJoinToken(ctx, roles, gateway.JoinTokenTTL)
	var se *gateway.StatusError
	if errors.As(err, &se) && se.Status == http.StatusConflict {
		return nil, fmt.Errorf("SVM %s cannot join system %s: the system has no cluster CA (its daemons run without certificates), so the gateway creates no join token for the new SVM's first boot (gateway: %s). "+
			"Nothing was set on the SVM. Give the system's daemons certificates first (a CA on an MDM with `cairn pki init`, its join service `cairn pki serve`, every daemon restarted with --pki), then send this request again: it resumes here",
			s.name, r.p.System, se.Message)
	}
	if err != nil {
		return nil, fmt.Errorf("SVM %s: create its join token (roles %s): %w", s.name, strings.Join(roles, ","), err)
	}
	r.info("configure", s.h.Name, "join token %s for SVM %s, roles %s, expires %s", t.ID, s.name, strings.Join(roles, ","), t.Expires.Format("15:04:05 MST"))
	return t, nil
}
