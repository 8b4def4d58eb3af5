package ovfdesc_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/ovf/importer"
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cairn-storage/cairn/packer/tools/internal/ova"
	"github.com/cairn-storage/cairn/packer/tools/internal/ovfdesc"
	"github.com/cairn-storage/cairn/packer/tools/internal/testvmdk"
)

// TestImportIntoSimulator imports a generated OVA into govmomi's vCenter simulator the
// way govc import.ova does (OvfManager.CreateImportSpec, ResourcePool.ImportVApp, NFC
// upload) and checks the imported VM: every vApp property with its label, description
// and default, and the virtual hardware.
func TestImportIntoSimulator(t *testing.T) {
	dir := t.TempDir()
	vmdk, capacity := testvmdk.Make(t, dir, "streamOptimized")
	fi, err := os.Stat(vmdk)
	if err != nil {
		t.Fatal(err)
	}
	p := ovfdesc.Defaults()
	p.Version = "9.9.9-test"
	p.DiskSize, p.Capacity = fi.Size(), capacity
	desc, err := ovfdesc.Generate(p)
	if err != nil {
		t.Fatal(err)
	}
	ovaPath := filepath.Join(dir, "cairn-svm.ova")
	if err := ova.Build(ovaPath, "cairn-svm.ovf", desc, []ova.File{{Name: p.DiskFile, Path: vmdk}}, time.Unix(1700000000, 0)); err != nil {
		t.Fatal(err)
	}

	simulator.Test(func(ctx context.Context, c *vim25.Client) {
		ctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		finder := find.NewFinder(c)
		dc, err := finder.DefaultDatacenter(ctx)
		if err != nil {
			t.Fatal(err)
		}
		finder.SetDatacenter(dc)
		ds, err := finder.DefaultDatastore(ctx)
		if err != nil {
			t.Fatal(err)
		}
		pool, err := finder.ResourcePool(ctx, "DC0_C0/Resources") // the simulated cluster
		if err != nil {
			t.Fatal(err)
		}
		folders, err := dc.Folders(ctx)
		if err != nil {
			t.Fatal(err)
		}
		imp := importer.Importer{
			Client: c, Finder: finder, Datacenter: dc, Datastore: ds, ResourcePool: pool, Folder: folders.VmFolder,
			Archive: &importer.TapeArchive{Path: ovaPath, Opener: importer.Opener{Client: c}},
			// The simulator computes no upload checksums, so VerifyManifest cannot work here;
			// cairn-ova check verifies the manifest instead.
			VerifyManifest: false,
			Log:            func(msg string) (int, error) { t.Log(msg); return len(msg), nil },
		}
		name := "svm-esx01"
		ref, err := imp.Import(ctx, "*.ovf", importer.Options{
			Name: &name,
			NetworkMapping: []importer.Network{
				{Name: "Management", Network: "VM Network"},
				{Name: "Data", Network: "VM Network"},
			},
		})
		if err != nil {
			t.Fatalf("import: %v", err)
		}

		var vm mo.VirtualMachine
		if err := object.NewVirtualMachine(c, *ref).Properties(ctx, *ref, []string{"name", "config"}, &vm); err != nil {
			t.Fatal(err)
		}
		if vm.Name != name {
			t.Errorf("vm name %q", vm.Name)
		}
		cfg := vm.Config
		if cfg.Hardware.NumCPU != 2 || cfg.Hardware.MemoryMB != 2048 {
			t.Errorf("hardware: %d vCPU %d MB", cfg.Hardware.NumCPU, cfg.Hardware.MemoryMB)
		}
		if cfg.GuestId != p.OSType {
			t.Errorf("guest id %q", cfg.GuestId)
		}
		var pvscsi, vmxnet3, disks int
		for _, d := range cfg.Hardware.Device {
			switch dev := d.(type) {
			case *types.ParaVirtualSCSIController:
				pvscsi++
			case *types.VirtualVmxnet3:
				vmxnet3++
			case *types.VirtualDisk:
				disks++
				if dev.CapacityInKB != capacity/1024 {
					t.Errorf("disk capacity %d KB, want %d", dev.CapacityInKB, capacity/1024)
				}
			}
		}
		if pvscsi != 2 || vmxnet3 != 2 || disks != 1 {
			t.Errorf("devices: %d PVSCSI, %d vmxnet3, %d disks; want 2, 2, 1", pvscsi, vmxnet3, disks)
		}

		if cfg.VAppConfig == nil {
			t.Fatal("imported VM has no vApp config")
		}
		vapp := cfg.VAppConfig.GetVmConfigInfo()
		if len(vapp.Product) != 1 || vapp.Product[0].Version != p.Version {
			t.Errorf("product %+v", vapp.Product)
		}
		got := map[string]types.VAppPropertyInfo{}
		for _, prop := range vapp.Property {
			got[prop.Id] = prop
		}
		want := ovfdesc.Properties()
		if len(got) != len(want) {
			t.Errorf("VM shows %d vApp properties, descriptor has %d", len(got), len(want))
		}
		for _, w := range want {
			g, ok := got[w.Key]
			switch {
			case !ok:
				t.Errorf("vApp property %s missing on the imported VM", w.Key)
			case g.Label != w.Label || g.Description != w.Description || g.DefaultValue != w.Default:
				t.Errorf("vApp property %s: label %q description %q default %q; want %q %q %q",
					w.Key, g.Label, g.Description, g.DefaultValue, w.Label, w.Description, w.Default)
			case g.Type != "string" || g.UserConfigurable == nil || !*g.UserConfigurable:
				t.Errorf("vApp property %s: type %q userConfigurable %v", w.Key, g.Type, g.UserConfigurable)
			}
		}
	})
}
