package datastore_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/vmware/govmomi"
	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cairn-storage/cairn/vcenter-plugin/internal/datastore"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/deploy"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/gateway"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/gatewayfake"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/hoststorage"
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
		// The whole LUN (less the 1 MiB partition offset), not the first
		// layout the host offered (half of it).
		for _, ds := range h.Datastores {
			if ds.Name == "vol1" && ds.Capacity != 16<<30-1<<20 {
				t.Fatalf("datastore capacity %d, want the whole 16 GiB LUN less 1 MiB", ds.Capacity)
			}
		}
		if d := h.Disk("naa." + res.WWN); d == nil || d.Candidate || d.UsedBy != "datastore vol1" {
			t.Fatalf("host %s LUN %+v", name, d)
		}
	}
	// Every host reaches the LUN round robin through the 3 SVMs.
	for _, name := range kit.HostNames() {
		hs, _ := find.NewFinder(c.Client).HostSystem(ctx, name)
		paths, err := hoststorage.New(c.Client, hs).CairnPaths(ctx)
		if err != nil || len(paths) != 1 || paths[0].Policy != hoststorage.PolicyRoundRobin || paths[0].Paths != 3 || paths[0].Working != 3 {
			t.Fatalf("host %s multipath %+v %v", name, paths, err)
		}
	}
	checkMultipathStrict(t, c, kit.HostNames()[0], array)
	calls := len(array.Calls())
	if _, err := eng.Create(ctx, req); err != nil {
		t.Fatalf("re-run: %v", err)
	}
	if len(array.Calls()) != calls {
		t.Fatalf("re-run changed the cluster: %v", array.Calls()[calls:])
	}

	checkGrow(t, c, eng, array, kit.HostNames())

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

// checkMultipathStrict: a LUN ESXi discovers is MRU with one working path
// (VMW_SATP_ALUA's default) until set otherwise, keeps its policy across
// rescans, and the kit refuses what ESXi refuses: an unknown path
// selection policy or LU id.
func checkMultipathStrict(t *testing.T, c *govmomi.Client, host string, array *gatewayfake.Array) {
	t.Helper()
	ctx := context.Background()
	hs, _ := find.NewFinder(c.Client).HostSystem(ctx, host)
	h := hoststorage.New(c.Client, hs)
	vol, err := array.CreateVolume(ctx, gateway.VolumeSpec{Name: "fresh", Pool: "pool1", Size: 8 << 30, Thin: true})
	if err != nil {
		t.Fatal(err)
	}
	gh, err := array.GetHost(ctx, host)
	if err != nil {
		t.Fatal(err)
	}
	if err := array.MapVolume(ctx, vol.ID, gh.ID); err != nil {
		t.Fatal(err)
	}
	if err := h.Rescan(ctx); err != nil {
		t.Fatal(err)
	}
	fresh := func() hoststorage.LUNPaths {
		paths, err := h.CairnPaths(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range paths {
			if p.Canonical == "naa."+strings.ToLower(vol.WWN) {
				return p
			}
		}
		t.Fatalf("host %s does not see the fresh LUN: %+v", host, paths)
		return hoststorage.LUNPaths{}
	}
	if p := fresh(); p.Policy != "VMW_PSP_MRU" || p.Working != 1 || p.Paths != 3 {
		t.Fatalf("fresh LUN %+v, want MRU with 1 working path of 3", p)
	}
	ss, _ := hs.ConfigManager().StorageSystem(ctx)
	set := func(id, policy string) error {
		_, err := methods.SetMultipathLunPolicy(ctx, c.Client, &types.SetMultipathLunPolicy{This: ss.Reference(), LunId: id,
			Policy: &types.HostMultipathInfoLogicalUnitPolicy{Policy: policy}})
		return err
	}
	if err := set(fresh().LUID, "VMW_PSP_BOGUS"); err == nil || !strings.Contains(err.Error(), "no path selection plug-in") {
		t.Fatalf("unknown policy: %v", err)
	}
	if err := set("0200000000deadbeef", hoststorage.PolicyRoundRobin); err == nil || !strings.Contains(err.Error(), "no logical unit") {
		t.Fatalf("unknown LU: %v", err)
	}
	if n, err := h.EnsureRoundRobin(ctx, ""); err != nil || n != 1 {
		t.Fatalf("EnsureRoundRobin changed %d: %v", n, err)
	}
	if err := h.Rescan(ctx); err != nil {
		t.Fatal(err)
	}
	if p := fresh(); p.Policy != hoststorage.PolicyRoundRobin || p.Working != 3 {
		t.Fatalf("after round robin and a rescan: %+v", p)
	}
}

// A host whose ATS probe of the LUN failed (hardware acceleration
// unsupported) would lock the VMFS with SCSI-2 reservations: the job says
// so, names the host and the fix, and passes once the probe succeeds.
func TestDatastoreNeedsATS(t *testing.T) {
	ctx := context.Background()
	array := gatewayfake.New()
	kit, c := vcsimkit.StartTest(t, vcsimkit.Options{Hosts: 3, LUNs: array, Guest: array.Hooks(nil)})
	inv, err := inventory.Collect(ctx, c.Client)
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.Suggest(inv, vcsimkit.Datacenter, "cairn1", "cairn-svm", "10.20.0.0/24", "10.30.0.0/24")
	if err != nil {
		t.Fatal(err)
	}
	dep := &deploy.Engine{VC: c.Client, StateDir: t.TempDir(), ReadyTimeout: 3 * time.Second, PollInterval: 10 * time.Millisecond,
		Gateway: func(gateway.Config) (gateway.API, error) { return array, nil }}
	if err := dep.Deploy(ctx, p); err != nil {
		t.Fatal(err)
	}
	vol, err := array.CreateVolume(ctx, gateway.VolumeSpec{Name: "vmfs-ats", Pool: "pool1", Size: 8 << 30, Thin: true})
	if err != nil {
		t.Fatal(err)
	}
	bad := kit.HostNames()[1]
	canonical := "naa." + strings.ToLower(vol.WWN)
	kit.SetVAAIProbeFailed(bad, canonical, true)
	eng := &datastore.Engine{VC: c.Client, API: array, RescanTimeout: time.Second, PollInterval: 10 * time.Millisecond}
	req := datastore.Request{Datacenter: vcsimkit.Datacenter, Volume: "vmfs-ats", Hosts: kit.HostNames()}
	_, err = eng.Create(ctx, req)
	if err == nil || !strings.Contains(err.Error(), "not supported on "+bad+" (vStorageUnsupported)") || !strings.Contains(err.Error(), "lockmode set --ats -l vmfs-ats") {
		t.Fatalf("ATS probe failed on %s: %v", bad, err)
	}
	kit.SetVAAIProbeFailed(bad, canonical, false)
	if _, err := eng.Create(ctx, req); err != nil {
		t.Fatalf("after the probe succeeds: %v", err)
	}
}

// checkGrow: the kit offers a VMFS expansion only once a host rescanned
// after its LUN grew and refuses a spec for a disk size the host does not
// see; Grow grows the volume, the datastore over the whole LUN on every
// host, refuses to shrink and changes nothing when run again.
func checkGrow(t *testing.T, c *govmomi.Client, eng *datastore.Engine, array *gatewayfake.Array, hosts []string) {
	t.Helper()
	ctx := context.Background()
	hs, _ := find.NewFinder(c.Client).HostSystem(ctx, hosts[0])
	h := hoststorage.New(c.Client, hs)
	size := int64(24 << 30)
	if _, err := array.UpdateVolume(ctx, "vol1", gateway.VolumeUpdate{Size: &size}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.ExpandVMFS(ctx, "vol1"); err == nil || !strings.Contains(err.Error(), "offers no free space") {
		t.Fatalf("expand before the host rescanned: %v", err)
	}
	if err := h.Rescan(ctx); err != nil {
		t.Fatal(err)
	}
	ds, err := h.Datastore(ctx, "vol1")
	if err != nil || ds == nil {
		t.Fatalf("datastore vol1 on %s: %v", hosts[0], err)
	}
	dss, _ := hs.ConfigManager().DatastoreSystem(ctx)
	opts, err := methods.QueryVmfsDatastoreExpandOptions(ctx, c.Client, &types.QueryVmfsDatastoreExpandOptions{This: dss.Reference(), Datastore: ds.Reference()})
	if err != nil || len(opts.Returnval) != 1 {
		t.Fatalf("expand options after the rescan: %+v %v", opts, err)
	}
	stale := *opts.Returnval[0].Spec.(*types.VmfsDatastoreExpandSpec)
	stale.Partition.TotalSectors = (16 << 30) / 512 // the disk as it was before the rescan
	if _, err := methods.ExpandVmfsDatastore(ctx, c.Client, &types.ExpandVmfsDatastore{This: dss.Reference(), Datastore: ds.Reference(), Spec: stale}); err == nil ||
		!strings.Contains(err.Error(), "as the host sees it") {
		t.Fatalf("a spec for the old disk size: %v", err)
	}

	req := datastore.GrowRequest{Datacenter: vcsimkit.Datacenter, Volume: "vol1", SizeGiB: 32, Hosts: hosts}
	capacity, err := eng.Grow(ctx, req)
	if err != nil || capacity != 32<<30-1<<20 {
		t.Fatalf("grow to 32 GiB: %d %v", capacity, err)
	}
	if v, _ := array.GetVolume(ctx, "vol1"); v.Size != 32<<30 {
		t.Fatalf("volume size %d after the grow", v.Size)
	}
	inv, _ := inventory.Collect(ctx, c.Client)
	for _, name := range hosts {
		ih, _ := inv.Host(name)
		for _, d := range ih.Datastores {
			if d.Name == "vol1" && d.Capacity != 32<<30-1<<20 {
				t.Fatalf("host %s sees datastore vol1 at %d bytes", name, d.Capacity)
			}
		}
	}
	calls := len(array.Calls())
	if _, err := eng.Grow(ctx, req); err != nil || len(array.Calls()) != calls {
		t.Fatalf("grow again: %v, calls %v", err, array.Calls()[calls:])
	}
	req.SizeGiB = 16
	if _, err := eng.Grow(ctx, req); err == nil || !strings.Contains(err.Error(), "only grows") {
		t.Fatalf("shrink: %v", err)
	}
}
