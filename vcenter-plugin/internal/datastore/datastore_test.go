package datastore_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/cairn-storage/cairn/vcenter-plugin/internal/datastore"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/deploy"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/gateway"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/gatewayfake"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/inventory"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/plan"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/vcsimkit"
)

func TestVolumeToDatastore(t *testing.T) {
	ctx := context.Background()
	array := gatewayfake.New()
	kit, c := vcsimkit.StartTest(t, vcsimkit.Options{Hosts: 4, LUNs: array, Guest: array.Hooks(nil)})
	inv, err := inventory.Collect(ctx, c.Client)
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.Suggest(inv, vcsimkit.Datacenter, "cairn1", "cairn-svm", "10.20.0.0/24", "10.30.0.0/24")
	if err != nil {
		t.Fatal(err)
	}
	// Host 4 is a client only: no SVM, but its iSCSI is wired.
	p.Hosts[3].Roles, p.Hosts[3].Devices, p.Hosts[3].SVMIP, p.Hosts[3].FaultSet = nil, nil, "", ""
	dep := &deploy.Engine{VC: c.Client, StateDir: t.TempDir(), ReadyTimeout: 3 * time.Second, PollInterval: 10 * time.Millisecond,
		Gateway: func(gateway.Config) (gateway.API, error) { return array, nil }}
	if err := dep.Deploy(ctx, p); err != nil {
		t.Fatal(err)
	}
	eng := &datastore.Engine{VC: c.Client, API: array, RescanTimeout: time.Second, PollInterval: 10 * time.Millisecond}
	req := datastore.Request{Datacenter: vcsimkit.Datacenter, Volume: "vol1", Pool: "pool1", SizeGiB: 16, Thin: true, Hosts: kit.HostNames()}
	res, err := eng.Create(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if res.Datastore != "vol1" || len(res.Hosts) != 4 || len(res.WWN) != 32 {
		t.Fatalf("result %+v", res)
	}
	// Every host mounts it, as seen by a fresh inventory.
	inv, _ = inventory.Collect(ctx, c.Client)
	for _, name := range kit.HostNames() {
		h, _ := inv.Host(name)
		found := false
		for _, ds := range h.Datastores {
			found = found || (ds.Name == "vol1" && ds.Type == "VMFS" && !ds.Local)
		}
		if !found {
			t.Fatalf("host %s datastores %+v", name, h.Datastores)
		}
		if d := h.Disk("naa." + res.WWN); d == nil || d.Candidate || d.UsedBy != "datastore vol1" {
			t.Fatalf("host %s LUN %+v", name, d)
		}
	}
	calls := len(array.Calls())
	if _, err := eng.Create(ctx, req); err != nil {
		t.Fatalf("re-run: %v", err)
	}
	if len(array.Calls()) != calls {
		t.Fatalf("re-run changed the cluster: %v", array.Calls()[calls:])
	}

	// A volume that exists needs no size; one that does not, does.
	if _, err := eng.Create(ctx, datastore.Request{Datacenter: vcsimkit.Datacenter, Volume: "vol2", Pool: "pool1", Hosts: kit.HostNames()}); err == nil || !strings.Contains(err.Error(), "give its size") {
		t.Fatalf("missing size: %v", err)
	}
}

func TestHostWithoutISCSI(t *testing.T) {
	ctx := context.Background()
	array := gatewayfake.New()
	kit, c := vcsimkit.StartTest(t, vcsimkit.Options{Hosts: 2, LUNs: array})
	eng := &datastore.Engine{VC: c.Client, API: array, RescanTimeout: 200 * time.Millisecond, PollInterval: 10 * time.Millisecond}
	_, err := eng.Create(ctx, datastore.Request{Datacenter: vcsimkit.Datacenter, Volume: "v", Pool: "pool1", SizeGiB: 1, Hosts: kit.HostNames()})
	if err == nil || !strings.Contains(err.Error(), "has no software iSCSI") {
		t.Fatalf("got %v", err)
	}
	if calls := array.Calls(); len(calls) != 0 {
		t.Fatalf("created things before failing: %v", calls)
	}
}
