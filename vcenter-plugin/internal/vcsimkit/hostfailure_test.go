package vcsimkit_test

import (
	"context"
	"strings"
	"testing"

	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cairn-storage/cairn/vcenter-plugin/internal/hoststorage"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/vcsimkit"
)

// A failed host reads as vCenter shows it, and what needs the host fails;
// the other hosts go on.
func TestFailHost(t *testing.T) {
	ctx := context.Background()
	kit, c := vcsimkit.StartTest(t, vcsimkit.Options{Hosts: 2, DisksPerHost: 1})
	finder := find.NewFinder(c.Client)
	dc, err := finder.Datacenter(ctx, vcsimkit.Datacenter)
	if err != nil {
		t.Fatal(err)
	}
	finder.SetDatacenter(dc)
	names := kit.HostNames()
	if err := kit.FailHost("esx-99"); err == nil {
		t.Fatal("failed a host the kit does not have")
	}
	if err := kit.FailHost(names[1]); err != nil {
		t.Fatal(err)
	}
	failed, err := finder.HostSystem(ctx, names[1])
	if err != nil {
		t.Fatal(err)
	}
	var hm mo.HostSystem
	if err := failed.Properties(ctx, failed.Reference(), []string{"runtime"}, &hm); err != nil {
		t.Fatalf("reading a failed host's properties (vCenter's inventory answers): %v", err)
	}
	if hm.Runtime.ConnectionState != types.HostSystemConnectionStateNotResponding {
		t.Fatalf("connection state %s", hm.Runtime.ConnectionState)
	}
	err = hoststorage.New(c.Client, failed).Rescan(ctx)
	if err == nil || !strings.Contains(err.Error(), "HostNotConnected") {
		t.Fatalf("rescan of a failed host: %v", err)
	}
	ok, err := finder.HostSystem(ctx, names[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := hoststorage.New(c.Client, ok).Rescan(ctx); err != nil {
		t.Fatalf("rescan of a host that answers: %v", err)
	}
}
