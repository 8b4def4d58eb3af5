package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/vmware/govmomi/session"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/soap"

	"github.com/cairn-storage/cairn/vcenter-plugin/internal/server"
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
