// The join token of an SVM added to a running system (Expand, Replace):
// its first boot spends it at the cluster's join service for one
// certificate per role it runs. The SVMs of an initial deployment spend the
// deployment's bootstrap token instead (plan.VAppProperties).
//
// The token is made at the SVM's configure step and lives an hour
// (gateway.JoinTokenTTL), but a run may stop between configure and
// power-on (a failure, the plugin restarted) and be resumed much later, or
// the token may be revoked meanwhile. So the power-on step, on every run
// that reaches it with the SVM off, asks the gateway about the token the
// SVM carries (renewJoinToken): one the gateway no longer lists (spent,
// revoked, pruned), expired, or good for less than joinTokenMargin is
// replaced by a fresh one in the SVM's vApp property, and revoked. An SVM
// that was powered on before is left as it is: its first boot may have
// spent its token, and it keeps the certificates it got.
//
// Secrets: the state records a token's id only (State.JoinTokenIDs), the
// log too; the token itself is in the SVM's vApp properties only.

package deploy

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/vmware/govmomi/event"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cairn-storage/cairn/appliance/contract"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/gateway"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/plan"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/progress"
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
// gateway.JoinTokenTTL, logged under event. The token itself is never
// stored (the state file keeps its id): a resumed configure step creates
// another, and the first one expires. Only its id is logged.
func (r *run) joinToken(ctx context.Context, s *svmTarget, event string) (*gateway.JoinToken, error) {
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
	r.info(event, s.h.Name, "join token %s for SVM %s, roles %s, expires %s", t.ID, s.name, strings.Join(roles, ","), t.Expires.Format("15:04:05 MST"))
	return t, nil
}

// joinTokenMargin is how long a joining SVM's token must still be good when
// the SVM is powered on. The SVM spends it early in its first boot
// (cairn-role certs, before its daemons start), normally minutes after
// power-on; the engine waits ReadyTimeout for it to report ready, which it
// does only once joined, so a token that outlives that wait serves every
// join the engine waits for. At least 15 minutes: a slow first boot, and
// the clock of the plugin (which compares the gateway's expiry with its
// own) a few minutes behind the cluster's. At most half the token's
// lifetime, so a token this run's configure step just made is kept.
func (r *run) joinTokenMargin() time.Duration {
	return min(max(r.ReadyTimeout, 15*time.Minute), gateway.JoinTokenTTL/2)
}

// joinTokenID is the id part of a join token (cj1.<id>.<secret>.<ca>), ""
// for anything else (the bootstrap token, none).
func joinTokenID(token string) string {
	rest, ok := strings.CutPrefix(token, gateway.JoinTokenPrefix)
	if !ok {
		return ""
	}
	id, _, ok := strings.Cut(rest, ".")
	if !ok {
		return ""
	}
	return id
}

// staleJoinToken says why the token an SVM carries (id carried; recorded:
// the id the state holds, "" for a state written before ids were kept)
// cannot be trusted for its first boot, or "" when it can: listed by the
// gateway, not partly spent, good for margin at least.
func staleJoinToken(listed []gateway.JoinTokenInfo, carried, recorded string, now time.Time, margin time.Duration) string {
	if carried == "" {
		return "the SVM carries no join token"
	}
	if recorded != "" && recorded != carried {
		return fmt.Sprintf("the SVM carries join token %s, the state records %s", carried, recorded)
	}
	i := slices.IndexFunc(listed, func(t gateway.JoinTokenInfo) bool { return t.ID == carried })
	if i < 0 {
		return fmt.Sprintf("the gateway no longer lists join token %s (spent, revoked, or pruned after it expired)", carried)
	}
	switch t := listed[i]; {
	case t.Expired || !now.Before(t.Expires):
		return fmt.Sprintf("join token %s expired at %s", carried, t.Expires.UTC().Format(time.RFC3339))
	case t.Name != "":
		return fmt.Sprintf("join token %s was partly spent by %s", carried, t.Name)
	case t.Expires.Sub(now) < margin:
		return fmt.Sprintf("join token %s is good for %s only, less than the %s its first boot may take", carried, t.Expires.Sub(now).Round(time.Second), margin)
	}
	return ""
}

// poweredOnBefore answers when vCenter saw vm powered on, zero if never
// (its events: a powered-off VM keeps no trace of its boots otherwise).
func poweredOnBefore(ctx context.Context, c *vim25.Client, vm *object.VirtualMachine) (time.Time, error) {
	evs, err := event.NewManager(c).QueryEvents(ctx, types.EventFilterSpec{
		Entity:      &types.EventFilterSpecByEntity{Entity: vm.Reference(), Recursion: types.EventFilterSpecRecursionOptionSelf},
		EventTypeId: []string{"VmPoweredOnEvent"}})
	if err != nil {
		return time.Time{}, err
	}
	var first time.Time
	for _, e := range evs {
		if t := e.GetEvent().CreatedTime; first.IsZero() || t.Before(first) {
			first = t
		}
	}
	return first, nil
}

// renewJoinToken runs before the power-on of a joining SVM that is off: it
// keeps the token the SVM carries when the gateway still accepts it for
// joinTokenMargin, else gives the SVM a fresh one and revokes the old. It
// answers what it did, for the step's detail.
func (r *run) renewJoinToken(ctx context.Context, s *svmTarget) (string, error) {
	resume := "nothing was powered on; send the request again: it resumes at this SVM's power-on"
	booted, err := poweredOnBefore(ctx, r.VC, s.vm)
	if err != nil {
		return "", fmt.Errorf("SVM %s: read its vCenter events (was it powered on before?): %w — %s", s.name, err, resume)
	}
	if !booted.IsZero() {
		r.Log.Emit(r.job, progress.Warn, "power-on", s.h.Name, "SVM %s was powered on before (%s): its join token is left as it is (its first boot may have spent it); if it does not report ready, open its console and check `journalctl -u 'cairn*'`",
			s.name, booted.UTC().Format(time.RFC3339))
		return "powered on before, join token left as it is", nil
	}
	cfg, err := readConfig(ctx, s.vm)
	if err != nil {
		return "", fmt.Errorf("SVM %s: read its vApp properties: %w — %s", s.name, err, resume)
	}
	var carried string
	if cfg.vapp != nil {
		for _, p := range cfg.vapp.Property {
			if p.Id == contract.KeyJoinToken {
				carried = joinTokenID(p.Value)
			}
		}
	}
	r.mu.Lock()
	recorded := r.st.JoinTokenIDs[s.h.Name]
	r.mu.Unlock()
	listed, err := r.api.ListJoinTokens(ctx)
	if err != nil {
		return "", fmt.Errorf("SVM %s: ask the gateway whether join token %s is still good (GET /api/v1/system/join-tokens): %w — %s once the gateway answers", s.name, carried, err, resume)
	}
	now := time.Now()
	why := staleJoinToken(listed, carried, recorded, now, r.joinTokenMargin())
	if why == "" {
		i := slices.IndexFunc(listed, func(t gateway.JoinTokenInfo) bool { return t.ID == carried })
		return fmt.Sprintf("join token %s good for %s", carried, listed[i].Expires.Sub(now).Round(time.Minute)), nil
	}
	r.info("power-on", s.h.Name, "SVM %s gets a new join token: %s", s.name, why)
	t, err := r.joinToken(ctx, s, "power-on")
	if err != nil {
		return "", err
	}
	var tvapp *types.VmConfigInfo
	props := r.p.VAppProperties(s.h, t.Token)
	if _, err := contract.Validate(props); err != nil {
		return "", fmt.Errorf("the plan gives SVM %s settings its first boot would refuse: %w", s.name, err)
	}
	tmpl, err := r.finder.VirtualMachine(ctx, r.p.Template)
	if err == nil {
		var tcfg *vmConfig
		if tcfg, err = readConfig(ctx, tmpl); err == nil {
			tvapp = tcfg.vapp
		}
	}
	if err != nil {
		return "", fmt.Errorf("SVM %s: read the vApp property definitions of template %s: %w — the new join token %s expires unspent; check the template is in vCenter, then %s", s.name, r.p.Template, err, t.ID, strings.TrimPrefix(resume, "nothing was powered on; "))
	}
	// Only the token differs from what configure set: vappSpec edits the
	// properties whose value changes.
	vapp, err := vappSpec(cfg.vapp, tvapp, props)
	if err != nil {
		return "", err
	}
	task, err := s.vm.Reconfigure(ctx, types.VirtualMachineConfigSpec{VAppConfig: vapp})
	if err == nil {
		err = task.Wait(ctx)
	}
	if err != nil {
		return "", fmt.Errorf("SVM %s: set its new join token %s: %w — the token expires unspent; %s", s.name, t.ID, err, resume)
	}
	// Recorded once the SVM carries it: a run stopped before this line
	// finds the SVM's token differs from the state's and renews again.
	r.mu.Lock()
	if r.st.JoinTokenIDs == nil {
		r.st.JoinTokenIDs = map[string]string{}
	}
	r.st.JoinTokenIDs[s.h.Name] = t.ID
	err = r.st.Save(r.StateDir)
	r.mu.Unlock()
	if err != nil {
		return "", err
	}
	// The old tokens go: one still good must not outlive its use.
	var revoked []string
	for _, id := range slices.Compact([]string{carried, recorded}) {
		if id == "" || !slices.ContainsFunc(listed, func(t gateway.JoinTokenInfo) bool { return t.ID == id }) {
			continue
		}
		if err := r.api.RevokeJoinToken(ctx, id); err != nil && !errors.Is(err, gateway.ErrNotFound) {
			r.Log.Emit(r.job, progress.Warn, "power-on", s.h.Name, "could not revoke the old join token %s of SVM %s (%v): revoke it as the gateway's admin (cairnctl join-token rm %s), or let it expire", id, s.name, err, id)
			continue
		}
		revoked = append(revoked, id)
	}
	detail := fmt.Sprintf("new join token %s (%s)", t.ID, why)
	if len(revoked) > 0 {
		detail += ", revoked " + strings.Join(revoked, ",")
	}
	return detail, nil
}
