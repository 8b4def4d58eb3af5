package vcsimkit_test

import (
	"context"
	"net/url"
	"strings"
	"testing"

	"github.com/vmware/govmomi"
	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/session"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cairn-storage/cairn/vcenter-plugin/internal/vcsimkit"
)

// TestAuthorization: the kit decides privileges as vCenter does, where the
// simulator grants everything: per entity, inherited along the inventory
// only through propagating permissions, a child's permission overriding
// its parent's, a user's permission overriding its groups' on the same
// object, groups' privileges added; extension privileges exist once
// registered and the Admin role has them; System.Read is needed to ask.
func TestAuthorization(t *testing.T) {
	ctx := context.Background()
	k, admin := vcsimkit.StartTest(t, vcsimkit.Options{Hosts: 2})
	am := object.NewAuthorizationManager(admin.Client)
	f := find.NewFinder(admin.Client)
	dc, err := f.Datacenter(ctx, vcsimkit.Datacenter)
	if err != nil {
		t.Fatal(err)
	}
	f.SetDatacenter(dc)
	cl, err := f.ClusterComputeResource(ctx, vcsimkit.ClusterName)
	if err != nil {
		t.Fatal(err)
	}
	hosts, err := f.HostSystemList(ctx, "*")
	if err != nil {
		t.Fatal(err)
	}
	host := hosts[0]

	// Extension privileges do not exist before registration.
	if _, err := am.AddRole(ctx, "early", []string{"Acme.Use"}); err == nil {
		t.Fatal("a role took a privilege no extension defines")
	}
	if err := object.NewExtensionManager(admin.Client).Register(ctx, types.Extension{Key: "com.acme", Version: "1",
		PrivilegeList: []types.ExtensionPrivilegeInfo{{PrivID: "Acme.Use", PrivGroupName: "Acme"}, {PrivID: "Acme.Own", PrivGroupName: "Acme"}}}); err != nil {
		t.Fatal(err)
	}
	use, err := am.AddRole(ctx, "acme-use", []string{"Acme.Use"})
	if err != nil {
		t.Fatal(err)
	}
	own, err := am.AddRole(ctx, "acme-own", []string{"Acme.Use", "Acme.Own"})
	if err != nil {
		t.Fatal(err)
	}
	set := func(e object.Reference, ps ...types.Permission) {
		t.Helper()
		if err := am.SetEntityPermissions(ctx, e.Reference(), ps); err != nil {
			t.Fatal(err)
		}
	}
	k.AddUser("u1@vsphere.local", "pw-u1-123456", "g1", "g2")
	k.AddUser("u2@vsphere.local", "pw-u2-123456", "g1")
	k.AddUser("u3@vsphere.local", "pw-u3-123456")
	set(dc, types.Permission{Principal: "g1", Group: true, RoleId: use, Propagate: true})
	set(dc, types.Permission{Principal: "g2", Group: true, RoleId: own, Propagate: false}) // on dc only
	set(cl, types.Permission{Principal: "u2@vsphere.local", RoleId: -5, Propagate: true})  // NoAccess below dc
	set(host, types.Permission{Principal: "g2", Group: true, RoleId: own, Propagate: true})
	set(host, types.Permission{Principal: "u1@vsphere.local", RoleId: -2, Propagate: true}) // user over its groups
	// SetEntityPermissions kept g1 and g2 on dc (the simulator replaced them).
	if ps, err := am.RetrieveEntityPermissions(ctx, dc.Reference(), false); err != nil || len(ps) != 2 {
		t.Fatalf("permissions on dc: %v %v", ps, err)
	}

	login := func(user, pw string) (*govmomi.Client, string) {
		t.Helper()
		u := *k.URL
		u.User = url.UserPassword(user, pw)
		c, err := govmomi.NewClient(ctx, &u, true)
		if err != nil {
			t.Fatalf("log in as %s: %v", user, err)
		}
		t.Cleanup(func() { _ = c.Logout(context.Background()) })
		us, err := session.NewManager(c.Client).UserSession(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return c, us.Key
	}
	has := func(c *govmomi.Client, key string, e object.Reference, priv string) (bool, error) {
		t.Helper()
		res, err := methods.HasPrivilegeOnEntities(ctx, c.Client, &types.HasPrivilegeOnEntities{This: *c.Client.ServiceContent.AuthorizationManager,
			Entity: []types.ManagedObjectReference{e.Reference()}, SessionId: key, PrivId: []string{priv}})
		if err != nil {
			return false, err
		}
		return res.Returnval[0].PrivAvailability[0].IsGranted, nil
	}
	u1, k1 := login("u1@vsphere.local", "pw-u1-123456")
	u2, k2 := login("u2@vsphere.local", "pw-u2-123456")
	u3, k3 := login("u3@vsphere.local", "pw-u3-123456")
	if _, err := govmomi.NewClient(ctx, &url.URL{Scheme: k.URL.Scheme, Host: k.URL.Host, Path: k.URL.Path, User: url.UserPassword("u3@vsphere.local", "wrong")}, true); err == nil {
		t.Fatal("wrong password accepted")
	}
	for _, c := range []struct {
		c    *govmomi.Client
		key  string
		e    object.Reference
		priv string
		want bool
	}{
		{u1, k1, dc, "Acme.Own", true},    // g2 on dc itself
		{u1, k1, cl, "Acme.Own", false},   // g2's dc permission does not propagate
		{u1, k1, cl, "Acme.Use", true},    // g1 from dc
		{u1, k1, host, "Acme.Use", false}, // u1's own ReadOnly on the host overrides its groups there
		{u2, k2, dc, "Acme.Use", true},
		{u2, k2, cl, "System.Read", false}, // NoAccess: nothing; asked below
		{u3, k3, dc, "System.Read", false},
	} {
		got, err := has(c.c, c.key, c.e, c.priv)
		if c.priv == "System.Read" && !c.want {
			// Without System.Read on the entity the question itself is refused.
			if err == nil || !strings.Contains(err.Error(), "System.Read") {
				t.Errorf("%s on %s: %v %v, want NoPermission", c.priv, c.e.Reference(), got, err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%s on %s: %v %v, want %v", c.priv, c.e.Reference(), got, err, c.want)
		}
	}
	// u2 is NoAccess on the cluster and its hosts, though g1 has Use on dc.
	if _, err := has(u2, k2, host, "Acme.Use"); err == nil {
		t.Error("NoAccess on the cluster did not reach its hosts")
	}
	// The Admin role has the registered privileges; another session's id is refused.
	if ok, err := has(admin, sessionKey(t, admin), host, "Acme.Own"); err != nil || !ok {
		t.Errorf("admin Acme.Own on host: %v %v", ok, err)
	}
	if _, err := has(u1, k2, dc, "Acme.Use"); err == nil {
		t.Error("a session's privileges were answered to another session")
	}
	// FetchUserPrivilegeOnEntities lists what a named user holds.
	res, err := methods.FetchUserPrivilegeOnEntities(ctx, admin.Client, &types.FetchUserPrivilegeOnEntities{This: *admin.Client.ServiceContent.AuthorizationManager,
		Entities: []types.ManagedObjectReference{cl.Reference()}, UserName: "u1@vsphere.local"})
	if err != nil || !strings.Contains(strings.Join(res.Returnval[0].Privileges, ","), "Acme.Use") || strings.Contains(strings.Join(res.Returnval[0].Privileges, ","), "Acme.Own") {
		t.Errorf("u1's privileges on the cluster: %v %v", res, err)
	}
}

func sessionKey(t *testing.T, c *govmomi.Client) string {
	t.Helper()
	us, err := session.NewManager(c.Client).UserSession(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return us.Key
}
