// Rights: the plugin's own vCenter privileges, checked for the signed-in
// vSphere user on the system's cluster at each request, and the gateway
// service user a request is then made as (naming the vSphere user).
//
// The plugin registers three privileges in its extension (privilege
// group "Cairn"): Cairn.Monitor (read a system), Cairn.Operate (volumes,
// QoS, growing, rolling maintenance) and Cairn.Administer (deploy). A
// vCenter administrator puts them into roles and gives those roles on
// the clusters (or a parent) as for any vCenter privilege; the Admin role
// has them all. A request on a system asks vCenter, with the user's own
// session, whether the user holds the privilege on every cluster (or
// standalone host) of the system's hosts (AuthorizationManager.
// HasPrivilegeOnEntities: vCenter resolves groups and inheritance), and
// answers 403 naming the privilege and the object when not. The gateway
// is then called as the service user of the matching role (deploy.
// ServiceUser: monitor, operator, admin), which names the vSphere user in
// X-Cairn-On-Behalf-Of so the gateway's audit event says who it was.

package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cairn-storage/cairn/vcenter-plugin/internal/deploy"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/gateway"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/inventory"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/plan"
)

// PrivilegeGroup is the privilege group the plugin registers.
const PrivilegeGroup = "Cairn"

// The plugin's privileges.
const (
	PrivMonitor    = "Cairn.Monitor"
	PrivOperate    = "Cairn.Operate"
	PrivAdminister = "Cairn.Administer"
)

// Privilege is one of the plugin's privileges: its id, how the vSphere
// Client's role editor labels it, and the gateway role it maps to.
type Privilege struct {
	ID      string `json:"id"`
	Label   string `json:"label"`
	Summary string `json:"summary"`
	Role    string `json:"gateway_role"`
}

// Privileges are the plugin's privileges, least first. A higher one
// covers the lower ones (a user with Cairn.Operate may also read).
var Privileges = []Privilege{
	{ID: PrivMonitor, Label: "Monitor", Summary: "See Cairn systems: health, capacity, SDSs, devices, volumes", Role: gateway.RoleMonitor},
	{ID: PrivOperate, Label: "Operate", Summary: "Create and grow volumes and their datastores, change QoS limits, run rolling maintenance", Role: gateway.RoleOperator},
	{ID: PrivAdminister, Label: "Administer", Summary: "Deploy Cairn systems", Role: gateway.RoleAdmin},
}

func privilegeByID(id string) Privilege {
	for _, p := range Privileges {
		if p.ID == id {
			return p
		}
	}
	panic("unknown privilege " + id)
}

// Forbidden is a refusal for want of a privilege (403).
type Forbidden struct {
	User, Privilege, Object, Action string
}

func (f *Forbidden) Error() string {
	return fmt.Sprintf("vSphere user %s needs the privilege %s (Cairn > %s) on %s to %s: ask a vCenter administrator to give you a role with it there (Administration > Access Control > Roles; the object's Permissions tab)",
		f.User, f.Privilege, privilegeByID(f.Privilege).Label, f.Object, f.Action)
}

// writeRightsError answers a refusal with 403 and what is needed, other
// failures as they are.
func writeRightsError(w http.ResponseWriter, err error) {
	var f *Forbidden
	if errors.As(err, &f) {
		writeJSON(w, http.StatusForbidden, map[string]string{"error": f.Error(), "privilege": f.Privilege, "object": f.Object})
		return
	}
	var se *gateway.StatusError
	if errors.As(err, &se) {
		writeGatewayError(w, err)
		return
	}
	writeError(w, http.StatusConflict, "%v", err)
}

// systemEntities are the clusters (or standalone hosts' compute
// resources) that hold p's hosts, as the user sees them, with their names.
func systemEntities(ctx context.Context, us *userSession, p *plan.Plan) ([]types.ManagedObjectReference, []string, error) {
	var names []string
	for _, h := range p.Hosts {
		names = append(names, h.Name)
	}
	loc, err := inventory.Locate(ctx, us.client, p.Datacenter, names)
	if err != nil {
		// A user who cannot see the hosts holds nothing on them.
		return nil, nil, &Forbidden{User: us.user, Privilege: PrivMonitor, Object: fmt.Sprintf("the hosts of system %s (datacenter %s)", p.System, p.Datacenter), Action: "see them"}
	}
	seen := map[types.ManagedObjectReference]bool{}
	var refs []types.ManagedObjectReference
	for _, n := range names {
		var h mo.HostSystem
		if err := loc.Hosts[n].Properties(ctx, loc.Hosts[n].Reference(), []string{"parent"}, &h); err != nil {
			return nil, nil, fmt.Errorf("read host %s in vCenter: %w", n, err)
		}
		if h.Parent != nil && !seen[*h.Parent] {
			seen[*h.Parent] = true
			refs = append(refs, *h.Parent)
		}
	}
	labels := make([]string, len(refs))
	for i, r := range refs {
		name, err := object.NewCommon(us.client, r).ObjectName(ctx)
		if err != nil {
			name = r.Value
		}
		kind := "cluster"
		if r.Type != "ClusterComputeResource" {
			kind = "host"
		}
		labels[i] = kind + " " + name
	}
	return refs, labels, nil
}

// checkPrivilege says whether the user holds need (or a higher plugin
// privilege) on every one of the system's clusters; a *Forbidden when not.
func (s *Server) checkPrivilege(ctx context.Context, us *userSession, p *plan.Plan, need, action string) error {
	key := us.key + "\x00" + p.System + "\x00" + need
	s.mu.Lock()
	until, ok := s.granted[key]
	s.mu.Unlock()
	if ok && time.Now().Before(until) {
		return nil
	}
	if err := s.askPrivilege(ctx, us, p, need, action); err != nil {
		return err
	}
	s.mu.Lock()
	for k, t := range s.granted {
		if time.Now().After(t) {
			delete(s.granted, k)
		}
	}
	s.granted[key] = time.Now().Add(GrantCacheTTL)
	s.mu.Unlock()
	return nil
}

// GrantCacheTTL is how long a granted privilege is remembered for a
// session and system: a permission taken away in vCenter holds for at most
// this long (a refusal is never remembered).
const GrantCacheTTL = 10 * time.Second

func (s *Server) askPrivilege(ctx context.Context, us *userSession, p *plan.Plan, need, action string) error {
	refs, labels, err := systemEntities(ctx, us, p)
	if err != nil {
		return err
	}
	ids := []string{}
	rank := 0
	for i, pr := range Privileges {
		if pr.ID == need {
			rank = i
		}
	}
	for _, pr := range Privileges[rank:] {
		ids = append(ids, pr.ID)
	}
	req := types.HasPrivilegeOnEntities{This: *us.client.ServiceContent.AuthorizationManager, Entity: refs, SessionId: us.key, PrivId: ids}
	res, err := methods.HasPrivilegeOnEntities(ctx, us.client, &req)
	if err != nil {
		if f, ok := soapFault(err).(*types.NoPermission); ok {
			// Not even System.Read there.
			obj := labels[0]
			for i, r := range refs {
				if f.Object != nil && *f.Object == r {
					obj = labels[i]
				}
			}
			return &Forbidden{User: us.user, Privilege: need, Object: obj, Action: action}
		}
		return fmt.Errorf("ask vCenter for %s's privileges: %w", us.user, err)
	}
	for i, ep := range res.Returnval {
		granted := false
		for _, a := range ep.PrivAvailability {
			granted = granted || a.IsGranted
		}
		if !granted {
			obj := ep.Entity.Value
			for j, r := range refs {
				if r == ep.Entity {
					obj = labels[j]
				}
			}
			_ = i
			return &Forbidden{User: us.user, Privilege: need, Object: obj, Action: action}
		}
	}
	return nil
}

func soapFault(err error) types.AnyType {
	if soap.IsSoapFault(err) {
		return soap.ToSoapFault(err).VimFault()
	}
	if soap.IsVimFault(err) {
		return soap.ToVimFault(err)
	}
	return nil
}

// systemFor checks that the user holds need on system's clusters and
// connects to its gateway as the service user of need's role, naming the
// user. action completes "needs ... to ACTION" in a refusal.
func (s *Server) systemFor(ctx context.Context, us *userSession, system, need, action string) (gateway.API, *plan.Plan, error) {
	p, err := s.savedPlan(system)
	if err != nil {
		return nil, nil, err
	}
	if err := s.checkPrivilege(ctx, us, p, need, action); err != nil {
		return nil, p, err
	}
	st, err := deploy.LoadState(s.cfg.StateDir, p)
	if err != nil {
		return nil, p, err
	}
	if !st.Completed {
		return nil, p, fmt.Errorf("system %s is not fully deployed: finish the deployment first", system)
	}
	cfg, err := deploy.GatewayConfig(p, st, 0)
	if err != nil {
		return nil, p, err
	}
	role := privilegeByID(need).Role
	if err := s.ensureServiceUser(ctx, p, st, cfg, role); err != nil {
		return nil, p, err
	}
	scfg, err := deploy.ServiceGatewayConfig(cfg, st, role, us.user)
	if err != nil {
		return nil, p, err
	}
	api, err := s.cfg.Gateway(scfg)
	return api, p, err
}

// ensureServiceUser creates role's service user of a system deployed
// before the plugin had them, with the deployment's admin credential,
// once (serialised: the state file is rewritten).
func (s *Server) ensureServiceUser(ctx context.Context, p *plan.Plan, st *deploy.State, cfg gateway.Config, role string) error {
	if st.Secrets.ServiceUsers[role] != "" {
		return nil
	}
	s.svcMu.Lock()
	defer s.svcMu.Unlock()
	fresh, err := deploy.LoadState(s.cfg.StateDir, p)
	if err != nil {
		return err
	}
	if pw := fresh.Secrets.ServiceUsers[role]; pw != "" {
		st.Secrets.ServiceUsers = fresh.Secrets.ServiceUsers
		return nil
	}
	admin, err := s.cfg.Gateway(cfg) // the deployment's admin
	if err != nil {
		return err
	}
	if err := deploy.EnsureServiceUser(ctx, admin, fresh, role, func() error { return fresh.Save(s.cfg.StateDir) }); err != nil {
		return fmt.Errorf("create the gateway's %s user for vSphere users of system %s: %w", role, p.System, err)
	}
	s.cfg.Logger.Info("gateway service user created", "system", p.System, "user", deploy.ServiceUser(role))
	st.Secrets.ServiceUsers = fresh.Secrets.ServiceUsers
	return nil
}
