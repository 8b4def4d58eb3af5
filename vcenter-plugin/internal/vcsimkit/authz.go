package vcsimkit

import (
	"fmt"
	"sort"
	"strings"

	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"
)

// Privileges as vCenter checks them. govmomi's simulator (v0.56.0) keeps
// permissions but grants everything: HasPrivilegeOnEntity(ies) and
// HasUserPrivilegeOnEntities answer true for any privilege,
// FetchUserPrivilegeOnEntities answers the Admin role's privileges for
// anyone, SetEntityPermissions replaces every permission of the entity
// (vCenter adds or updates the given principals' only), roles cannot hold
// an extension's privileges, and any user name logs in. The kit replaces
// the AuthorizationManager with one that decides as vCenter does
// (vSphere Security, "Hierarchical Inheritance of Permissions"):
//
//   - A user's privileges on an entity come from the permissions nearest
//     to it: those defined on the entity itself, else the propagating ones
//     of its parent, and so on up to the root folder. A permission on a
//     child overrides what the parent propagates (a NoAccess permission
//     there takes everything away).
//   - On one entity, a permission naming the user overrides those of the
//     user's groups; without one the user gets the union of its groups'.
//   - A virtual machine inherits from its folder and its resource pool;
//     the privileges of both are added.
//   - The Admin role has every privilege, those that registered
//     extensions define (Extension.privilegeList) included; any role may be
//     given an extension's privileges.
//   - HasPrivilegeOnEntities needs System.Read on the entities for the
//     caller, and the kit answers it for the caller's own session only
//     (what the plugin asks), refusing other session ids rather than
//     guessing.
//
// Users: the kit's own user has the Admin role on the root folder (as
// administrator@vsphere.local has); others are added with AddUser and
// have no permission until one is set (SetEntityPermissions). Principals
// are matched with the session's user name, case-insensitively.

// adminRoleID, noAccessRoleID are vCenter's system role ids.
const (
	adminRoleID    = -1
	noAccessRoleID = -5
)

// kitUser is a user the kit's SessionManager accepts.
type kitUser struct {
	password string
	groups   []string
}

// authz is the kit's AuthorizationManager.
type authz struct {
	*simulator.AuthorizationManager
	kit *Kit
}

// AddUser lets name log in with password (SDK and vSphere Client session
// token alike) as a member of groups. It has no permission anywhere until
// one is given to it or to one of its groups (SetPermission).
func (k *Kit) AddUser(name, password string, groups ...string) {
	k.usersMu.Lock()
	defer k.usersMu.Unlock()
	k.users[strings.ToLower(name)] = kitUser{password: password, groups: groups}
}

// validLogin is the SessionManager's check of a user name and password.
func (k *Kit) validLogin(req *types.Login) bool {
	k.usersMu.Lock()
	defer k.usersMu.Unlock()
	u, ok := k.users[strings.ToLower(req.UserName)]
	return ok && req.Password != "" && u.password == req.Password
}

func (k *Kit) groupsOf(user string) []string {
	k.usersMu.Lock()
	defer k.usersMu.Unlock()
	return k.users[strings.ToLower(user)].groups
}

// installAuthz puts the strict AuthorizationManager and login check in
// place and gives the kit's user the Admin role on the root folder.
func (k *Kit) installAuthz() {
	reg := k.model.Map()
	k.users = map[string]kitUser{}
	k.AddUser(k.opts.Username, k.opts.Password)
	reg.SessionManager().ValidLogin = k.validLogin
	content := reg.Get(vim25.ServiceInstance).(*simulator.ServiceInstance).Content
	am := reg.Get(*content.AuthorizationManager).(*simulator.AuthorizationManager)
	root := content.RootFolder
	// Only the kit's user: the simulator's default root/admin principals
	// are not users of the kit.
	am.SetEntityPermissions(&types.SetEntityPermissions{Entity: root, Permission: []types.Permission{
		{Entity: &root, Principal: k.opts.Username, RoleId: adminRoleID, Propagate: true}}})
	reg.Put(&authz{AuthorizationManager: am, kit: k})
}

// extensionPrivileges are the privileges registered extensions define
// (an id not of the form <privGroupName>.<name> is not one: vCenter
// refuses such a registration).
func extensionPrivileges(ctx *simulator.Context) map[string]bool {
	out := map[string]bool{}
	em := ctx.Map.ExtensionManager()
	ctx.WithLock(em, func() {
		for _, x := range em.ExtensionList {
			for _, p := range x.PrivilegeList {
				if p.PrivGroupName != "" && !strings.Contains(p.PrivGroupName, ".") && strings.HasPrefix(p.PrivID, p.PrivGroupName+".") {
					out[p.PrivID] = true
				}
			}
		}
	})
	return out
}

// roleByID returns the role's privileges (Admin: all, extensions' too).
func (m *authz) rolePrivileges(ctx *simulator.Context, id int32) map[string]bool {
	out := map[string]bool{}
	for _, r := range m.RoleList {
		if r.RoleId != id {
			continue
		}
		for _, p := range r.Privilege {
			out[p] = true
		}
	}
	if id == adminRoleID {
		for p := range extensionPrivileges(ctx) {
			out[p] = true
		}
	}
	return out
}

func (m *authz) permissionsOn(ctx *simulator.Context, e types.ManagedObjectReference) []types.Permission {
	body := m.AuthorizationManager.RetrieveEntityPermissions(ctx, &types.RetrieveEntityPermissions{Entity: e}).(*methods.RetrieveEntityPermissionsBody)
	if body.Res == nil {
		return nil
	}
	return body.Res.Returnval
}

// parents are the entities e inherits from: its parent, and a VM's
// resource pool.
func parents(ctx *simulator.Context, e types.ManagedObjectReference) []types.ManagedObjectReference {
	obj := ctx.Map.Get(e)
	ent, ok := obj.(mo.Entity)
	if !ok {
		return nil
	}
	var out []types.ManagedObjectReference
	if p := ent.Entity().Parent; p != nil {
		out = append(out, *p)
	}
	if vm, ok := obj.(*simulator.VirtualMachine); ok && vm.ResourcePool != nil {
		out = append(out, *vm.ResourcePool)
	}
	return out
}

// privileges computes user's privileges on e as vCenter does (see the top
// of this file).
func (m *authz) privileges(ctx *simulator.Context, user string, e types.ManagedObjectReference) map[string]bool {
	groups := m.kit.groupsOf(user)
	member := func(p types.Permission) bool {
		if !p.Group {
			return strings.EqualFold(p.Principal, user)
		}
		for _, g := range groups {
			if strings.EqualFold(p.Principal, g) {
				return true
			}
		}
		return false
	}
	var walk func(e types.ManagedObjectReference, own bool, seen map[types.ManagedObjectReference]bool) map[string]bool
	walk = func(e types.ManagedObjectReference, own bool, seen map[types.ManagedObjectReference]bool) map[string]bool {
		if seen[e] {
			return nil
		}
		seen[e] = true
		var userPerm *types.Permission
		var groupPerms []types.Permission
		for _, p := range m.permissionsOn(ctx, e) {
			if (!own && !p.Propagate) || !member(p) {
				continue
			}
			if !p.Group {
				userPerm = &p
			} else {
				groupPerms = append(groupPerms, p)
			}
		}
		switch {
		case userPerm != nil:
			return m.rolePrivileges(ctx, userPerm.RoleId)
		case len(groupPerms) > 0:
			out := map[string]bool{}
			for _, p := range groupPerms {
				for id := range m.rolePrivileges(ctx, p.RoleId) {
					out[id] = true
				}
			}
			return out
		}
		out := map[string]bool{}
		for _, p := range parents(ctx, e) {
			for id := range walk(p, false, seen) {
				out[id] = true
			}
		}
		return out
	}
	return walk(e, true, map[types.ManagedObjectReference]bool{})
}

func noPermission(e types.ManagedObjectReference, priv string) *soap.Fault {
	return simulator.Fault(fmt.Sprintf("Permission to perform this operation was denied: %s on %s", priv, e), &types.NoPermission{
		Object: &e, PrivilegeId: priv})
}

func (m *authz) entityExists(ctx *simulator.Context, e types.ManagedObjectReference) bool {
	_, ok := ctx.Map.Get(e).(mo.Entity)
	return ok
}

// HasPrivilegeOnEntities answers for the caller's own session.
func (m *authz) HasPrivilegeOnEntities(ctx *simulator.Context, req *types.HasPrivilegeOnEntities) soap.HasFault {
	body := &methods.HasPrivilegeOnEntitiesBody{}
	if ctx.Session == nil || req.SessionId != ctx.Session.Key {
		body.Fault_ = simulator.Fault("vcsimkit answers HasPrivilegeOnEntities for the caller's own session only", &types.InvalidArgument{InvalidProperty: "sessionId"})
		return body
	}
	res := &types.HasPrivilegeOnEntitiesResponse{}
	for _, e := range req.Entity {
		if !m.entityExists(ctx, e) {
			body.Fault_ = simulator.Fault("", &types.ManagedObjectNotFound{Obj: e})
			return body
		}
		have := m.privileges(ctx, ctx.Session.UserName, e)
		if !have["System.Read"] {
			body.Fault_ = noPermission(e, "System.Read")
			return body
		}
		ep := types.EntityPrivilege{Entity: e}
		for _, id := range req.PrivId {
			ep.PrivAvailability = append(ep.PrivAvailability, types.PrivilegeAvailability{PrivId: id, IsGranted: have[id]})
		}
		res.Returnval = append(res.Returnval, ep)
	}
	body.Res = res
	return body
}

// HasPrivilegeOnEntity is the one-entity form.
func (m *authz) HasPrivilegeOnEntity(ctx *simulator.Context, req *types.HasPrivilegeOnEntity) soap.HasFault {
	body := &methods.HasPrivilegeOnEntityBody{}
	r := m.HasPrivilegeOnEntities(ctx, &types.HasPrivilegeOnEntities{Entity: []types.ManagedObjectReference{req.Entity}, SessionId: req.SessionId, PrivId: req.PrivId}).(*methods.HasPrivilegeOnEntitiesBody)
	if r.Fault_ != nil {
		body.Fault_ = r.Fault_
		return body
	}
	body.Res = &types.HasPrivilegeOnEntityResponse{}
	for _, a := range r.Res.Returnval[0].PrivAvailability {
		body.Res.Returnval = append(body.Res.Returnval, a.IsGranted)
	}
	return body
}

// userQuery checks the caller may ask about other users (System.View on
// each entity) and that they exist.
func (m *authz) userQuery(ctx *simulator.Context, entities []types.ManagedObjectReference) *soap.Fault {
	for _, e := range entities {
		if !m.entityExists(ctx, e) {
			return simulator.Fault("", &types.ManagedObjectNotFound{Obj: e})
		}
		if ctx.Session == nil || !m.privileges(ctx, ctx.Session.UserName, e)["System.View"] {
			return noPermission(e, "System.View")
		}
	}
	return nil
}

// HasUserPrivilegeOnEntities answers for a named user.
func (m *authz) HasUserPrivilegeOnEntities(ctx *simulator.Context, req *types.HasUserPrivilegeOnEntities) soap.HasFault {
	body := &methods.HasUserPrivilegeOnEntitiesBody{}
	if f := m.userQuery(ctx, req.Entities); f != nil {
		body.Fault_ = f
		return body
	}
	body.Res = &types.HasUserPrivilegeOnEntitiesResponse{}
	for _, e := range req.Entities {
		have := m.privileges(ctx, req.UserName, e)
		ep := types.EntityPrivilege{Entity: e}
		for _, id := range req.PrivId {
			ep.PrivAvailability = append(ep.PrivAvailability, types.PrivilegeAvailability{PrivId: id, IsGranted: have[id]})
		}
		body.Res.Returnval = append(body.Res.Returnval, ep)
	}
	return body
}

// FetchUserPrivilegeOnEntities lists a named user's privileges.
func (m *authz) FetchUserPrivilegeOnEntities(ctx *simulator.Context, req *types.FetchUserPrivilegeOnEntities) soap.HasFault {
	body := &methods.FetchUserPrivilegeOnEntitiesBody{}
	if f := m.userQuery(ctx, req.Entities); f != nil {
		body.Fault_ = f
		return body
	}
	body.Res = &types.FetchUserPrivilegeOnEntitiesResponse{}
	for _, e := range req.Entities {
		var ids []string
		for id := range m.privileges(ctx, req.UserName, e) {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		body.Res.Returnval = append(body.Res.Returnval, types.UserPrivilegeResult{Entity: e, Privileges: ids})
	}
	return body
}

// SetEntityPermissions adds or updates the given principals' permissions
// on the entity, keeping the others (the simulator replaced them all); an
// unknown role is refused.
func (m *authz) SetEntityPermissions(ctx *simulator.Context, req *types.SetEntityPermissions) soap.HasFault {
	body := &methods.SetEntityPermissionsBody{}
	if !m.entityExists(ctx, req.Entity) {
		body.Fault_ = simulator.Fault("", &types.ManagedObjectNotFound{Obj: req.Entity})
		return body
	}
	merged := m.permissionsOn(ctx, req.Entity)
	for _, p := range req.Permission {
		known := false
		for _, r := range m.RoleList {
			known = known || r.RoleId == p.RoleId
		}
		if !known {
			body.Fault_ = simulator.Fault(fmt.Sprintf("role %d does not exist", p.RoleId), &types.NotFound{})
			return body
		}
		e := req.Entity
		p.Entity = &e
		replaced := false
		for i, q := range merged {
			if q.Group == p.Group && strings.EqualFold(q.Principal, p.Principal) {
				merged[i], replaced = p, true
			}
		}
		if !replaced {
			merged = append(merged, p)
		}
	}
	m.AuthorizationManager.SetEntityPermissions(&types.SetEntityPermissions{Entity: req.Entity, Permission: merged})
	body.Res = &types.SetEntityPermissionsResponse{}
	return body
}

// AddAuthorizationRole also takes privileges registered extensions define
// (the simulator knows only its built-in list).
func (m *authz) AddAuthorizationRole(ctx *simulator.Context, req *types.AddAuthorizationRole) soap.HasFault {
	ext := extensionPrivileges(ctx)
	var builtin, own []string
	for _, id := range req.PrivIds {
		if ext[id] {
			own = append(own, id)
		} else {
			builtin = append(builtin, id)
		}
	}
	r := *req
	r.PrivIds = builtin
	body := m.AuthorizationManager.AddAuthorizationRole(&r).(*methods.AddAuthorizationRoleBody)
	if body.Fault_ != nil {
		return body
	}
	for i := range m.RoleList {
		if m.RoleList[i].Name == req.Name {
			m.RoleList[i].Privilege = append(m.RoleList[i].Privilege, own...)
			body.Res.Returnval = m.RoleList[i].RoleId
		}
	}
	return body
}

// NewPassword returns a random password for AddUser.
func (k *Kit) NewPassword() string { return randomHex(12) }
