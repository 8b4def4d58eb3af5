package inventory_test

import (
	"context"
	"github.com/cairn-storage/cairn/appliance/contract"
	"testing"

	"github.com/vmware/govmomi/find"

	"github.com/cairn-storage/cairn/vcenter-plugin/internal/inventory"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/vcsimkit"
)

func TestCollect(t *testing.T) {
	ctx := context.Background()
	kit, c := vcsimkit.StartTest(t, vcsimkit.Options{Hosts: 3, DisksPerHost: 2})
	finder := find.NewFinder(c.Client)
	vdc, err := finder.DefaultDatacenter(ctx)
	if err != nil {
		t.Fatal(err)
	}
	host, err := finder.SetDatacenter(vdc).HostSystem(ctx, "esx-02.cairn.test")
	if err != nil {
		t.Fatal(err)
	}
	task, err := host.EnterMaintenanceMode(ctx, 0, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := task.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	kit.SetHostConnection("esx-03.cairn.test", false)

	inv, err := inventory.Collect(ctx, c.Client)
	if err != nil {
		t.Fatal(err)
	}
	if len(inv.Datacenters) != 1 || len(inv.Datacenters[0].Clusters) != 1 || inv.Datacenters[0].Clusters[0].Name != vcsimkit.ClusterName {
		t.Fatalf("datacenters/clusters: %+v", inv.Datacenters)
	}
	dc := inv.Datacenters[0]
	if len(dc.Hosts) != 3 || len(dc.Clusters[0].Hosts) != 3 {
		t.Fatalf("hosts: %d", len(dc.Hosts))
	}
	if tm := inv.Template("cairn-svm"); tm == nil || len(tm.Properties) != len(contract.Keys()) {
		t.Fatalf("template: %+v", tm)
	}
	h1, _ := inv.Host("esx-01.cairn.test")
	if h1.Version == "" || h1.ConnectionState != "connected" || h1.InMaintenance || h1.Cluster != vcsimkit.ClusterName {
		t.Fatalf("host 1: %+v", h1)
	}
	if len(h1.Datastores) != 1 || h1.Datastores[0].Name != "esx-01-local" || !h1.Datastores[0].Local || h1.Datastores[0].Type != "VMFS" {
		t.Fatalf("host 1 datastores: %+v", h1.Datastores)
	}
	var candidates, ssd int
	for _, d := range h1.Disks {
		if d.CanonicalName == "mpx.vmhba0:C0:T0:L0" && (d.Candidate || d.UsedBy != "datastore esx-01-local") {
			t.Fatalf("boot disk should be used by the local datastore: %+v", d)
		}
		if d.Candidate {
			candidates++
			if d.Size != 800<<30 {
				t.Fatalf("disk size %d", d.Size)
			}
			if d.SSD {
				ssd++
			}
		}
	}
	if candidates != 2 || ssd != 1 {
		t.Fatalf("candidates %d ssd %d: %+v", candidates, ssd, h1.Disks)
	}
	capable := 0
	for _, p := range h1.PCIDevices {
		if p.PassthroughCapable {
			capable++
		}
	}
	if len(h1.PCIDevices) != 3 || capable != 2 {
		t.Fatalf("pci: %+v", h1.PCIDevices)
	}
	if h2, _ := inv.Host("esx-02.cairn.test"); !h2.InMaintenance {
		t.Fatal("host 2 maintenance not reported")
	}
	if h3, _ := inv.Host("esx-03.cairn.test"); h3.ConnectionState != "disconnected" {
		t.Fatalf("host 3 state %s", h3.ConnectionState)
	}
}
