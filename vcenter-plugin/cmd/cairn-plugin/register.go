package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/session"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cairn-storage/cairn/vcenter-plugin/internal/server"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/vcsimkit"
)

func registerExtension(ctx context.Context, vc *url.URL, thumbprint, user, pass, public string, cert *server.Certificate) error {
	if user == "" || pass == "" {
		return errors.New("-register needs vCenter credentials: -vcenter-user and env CAIRN_VCENTER_PASSWORD")
	}
	sc := soap.NewClient(vc, false)
	if thumbprint != "" {
		sc.SetThumbprint(vc.Host, thumbprint)
	}
	c, err := vim25.NewClient(ctx, sc)
	if err != nil {
		return fmt.Errorf("connect to vCenter: %w", err)
	}
	sm := session.NewManager(c)
	if err := sm.Login(ctx, url.UserPassword(user, pass)); err != nil {
		return fmt.Errorf("log in to vCenter as %s: %w", user, err)
	}
	defer sm.Logout(context.WithoutCancel(ctx))
	if err := server.RegisterExtension(ctx, c, server.Extension(strings.TrimSuffix(public, "/"), cert)); err != nil {
		return fmt.Errorf("register extension %s: %w", server.ExtensionKey, err)
	}
	return nil
}

// DemoMonitorUser is the demo's vSphere user with only Cairn.Monitor.
const DemoMonitorUser = "cairn-monitor@vsphere.local"

// demoMonitorUser adds DemoMonitorUser to the simulated vCenter with a
// generated password and a "Cairn monitor" role on the cluster.
func demoMonitorUser(ctx context.Context, kit *vcsimkit.Kit) (string, string, error) {
	c, err := kit.Client(ctx)
	if err != nil {
		return "", "", err
	}
	defer c.Logout(context.WithoutCancel(ctx))
	am := object.NewAuthorizationManager(c.Client)
	role, err := am.AddRole(ctx, "Cairn monitor", []string{server.PrivMonitor})
	if err != nil {
		return "", "", fmt.Errorf("demo role: %w", err)
	}
	f := find.NewFinder(c.Client)
	cl, err := f.ClusterComputeResource(ctx, "/"+vcsimkit.Datacenter+"/host/"+vcsimkit.ClusterName)
	if err != nil {
		return "", "", err
	}
	if err := am.SetEntityPermissions(ctx, cl.Reference(), []types.Permission{{Principal: DemoMonitorUser, RoleId: role, Propagate: true}}); err != nil {
		return "", "", fmt.Errorf("demo permission: %w", err)
	}
	pass := kit.NewPassword()
	kit.AddUser(DemoMonitorUser, pass)
	return DemoMonitorUser, pass, nil
}
