package deploy

import (
	"context"
	"strings"
	"testing"

	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cairn-storage/cairn/vcenter-plugin/internal/plan"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/vcsimkit"
)

// pciBacking takes the system id from QueryConfigTarget, not the BIOS
// UUID; checkRDMs refuses a disk the host does not offer for raw mapping,
// names it and says what to do, and does not ask again about disks the
// SVM already maps.
func TestHostDevicesFromConfigTarget(t *testing.T) {
	ctx := context.Background()
	kit, c := vcsimkit.StartTest(t, vcsimkit.Options{Hosts: 1, DisksPerHost: 2})
	name := kit.HostNames()[0]
	host, err := find.NewFinder(c.Client).HostSystem(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	var hm mo.HostSystem
	if err := host.Properties(ctx, host.Reference(), []string{"hardware.systemInfo"}, &hm); err != nil {
		t.Fatal(err)
	}
	b, err := pciBacking(ctx, host, "0000:3b:00.0")
	if err != nil {
		t.Fatal(err)
	}
	pb := b.(*types.VirtualPCIPassthroughDeviceBackingInfo)
	if pb.SystemId != vcsimkit.SystemID(name) || pb.SystemId == hm.Hardware.SystemInfo.Uuid {
		t.Fatalf("systemId %q; want the config target's %q, not the BIOS UUID %q", pb.SystemId, vcsimkit.SystemID(name), hm.Hardware.SystemInfo.Uuid)
	}
	if _, err := pciBacking(ctx, host, "0000:3d:00.0"); err == nil || !strings.Contains(err.Error(), "enable passthrough") {
		t.Fatalf("a NIC that cannot be passed through: %v", err)
	}

	good := kit.LocalDisks(name)[0].CanonicalName
	h := &plan.Host{Name: name, Devices: []plan.Device{{Disk: good, Mode: plan.ModeRDM}, {Disk: vcsimkit.NonRDMDisk, Mode: plan.ModeRDM}}}
	err = checkRDMs(ctx, host, &vmConfig{}, h)
	if err == nil || !strings.Contains(err.Error(), "does not offer disk "+vcsimkit.NonRDMDisk+" for raw mapping") || !strings.Contains(err.Error(), "choose another disk") {
		t.Fatalf("non-RDM disk: %v", err)
	}
	h.Devices = h.Devices[:1]
	if err := checkRDMs(ctx, host, &vmConfig{}, h); err != nil {
		t.Fatalf("candidate disk: %v", err)
	}
}
