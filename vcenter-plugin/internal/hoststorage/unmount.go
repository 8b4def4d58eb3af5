package hoststorage

// Taking a VMFS datastore off a host the way vSphere does: the virtual
// machines on it, unmount of the VMFS, detach of its LUN, and the inverse
// (attach, mount) for a host that gets the LUN back.

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/vmware/govmomi/property"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"
)

// VMsOn returns the names of the virtual machines and templates with files
// on ds ("name (template)" for templates), those registered on this host
// only when onHost is set. Sorted.
func (h *Host) VMsOn(ctx context.Context, ds *mo.Datastore, onHost bool) ([]string, error) {
	if len(ds.Vm) == 0 {
		return nil, nil
	}
	var vms []mo.VirtualMachine
	if err := property.DefaultCollector(h.c).Retrieve(ctx, ds.Vm, []string{"name", "config.template", "runtime.host"}, &vms); err != nil {
		return nil, fmt.Errorf("datastore %s: read its virtual machines: %w", ds.Name, err)
	}
	var out []string
	for _, vm := range vms {
		if onHost && (vm.Runtime.Host == nil || *vm.Runtime.Host != h.obj.Reference()) {
			continue
		}
		name := vm.Name
		if vm.Config != nil && vm.Config.Template {
			name += " (template)"
		}
		out = append(out, name)
	}
	sort.Strings(out)
	return out, nil
}

func vmfsUUID(ds *mo.Datastore) (string, error) {
	info, ok := ds.Info.(*types.VmfsDatastoreInfo)
	if !ok || info.Vmfs == nil || info.Vmfs.Uuid == "" {
		return "", fmt.Errorf("datastore %s is not VMFS (%T): Cairn only manages the VMFS datastores it made", ds.Name, ds.Info)
	}
	return info.Vmfs.Uuid, nil
}

// UnmountVMFS unmounts datastore ds on the host (UnmountVmfsVolume).
func (h *Host) UnmountVMFS(ctx context.Context, ds *mo.Datastore) error {
	uuid, err := vmfsUUID(ds)
	if err != nil {
		return err
	}
	ss, err := h.storageSystem(ctx)
	if err != nil {
		return err
	}
	if _, err := methods.UnmountVmfsVolume(ctx, h.c, &types.UnmountVmfsVolume{This: ss.Reference(), VmfsUuid: uuid}); err != nil {
		return fmt.Errorf("host %s: unmount datastore %s: %w", h.Name, ds.Name, err)
	}
	return nil
}

// MountVMFS mounts an unmounted datastore ds on the host again.
func (h *Host) MountVMFS(ctx context.Context, ds *mo.Datastore) error {
	uuid, err := vmfsUUID(ds)
	if err != nil {
		return err
	}
	ss, err := h.storageSystem(ctx)
	if err != nil {
		return err
	}
	if _, err := methods.MountVmfsVolume(ctx, h.c, &types.MountVmfsVolume{This: ss.Reference(), VmfsUuid: uuid}); err != nil {
		return fmt.Errorf("host %s: mount datastore %s: %w", h.Name, ds.Name, err)
	}
	return nil
}

// LUN returns the host's disk naa.<wwn>, nil when it does not see it.
func (h *Host) LUN(ctx context.Context, wwn string) (*types.HostScsiDisk, error) {
	disks, err := h.Disks(ctx)
	if err != nil {
		return nil, err
	}
	want := "naa." + strings.ToLower(wwn)
	for i := range disks {
		if disks[i].CanonicalName == want {
			return &disks[i], nil
		}
	}
	return nil, nil
}

// Detached reports whether the disk is detached on its host.
func Detached(d *types.HostScsiDisk) bool {
	for _, s := range d.OperationalState {
		if s == string(types.ScsiLunStateOff) {
			return true
		}
	}
	return false
}

// DetachLUN detaches d on the host (DetachScsiLun): ESXi stops using it
// and keeps it detached across rescans and reboots.
func (h *Host) DetachLUN(ctx context.Context, d *types.HostScsiDisk) error {
	return h.lunCall(ctx, "detach", d, func(ss types.ManagedObjectReference) error {
		_, err := methods.DetachScsiLun(ctx, h.c, &types.DetachScsiLun{This: ss, LunUuid: d.Uuid})
		return err
	})
}

// AttachLUN attaches a detached d on the host again.
func (h *Host) AttachLUN(ctx context.Context, d *types.HostScsiDisk) error {
	return h.lunCall(ctx, "attach", d, func(ss types.ManagedObjectReference) error {
		_, err := methods.AttachScsiLun(ctx, h.c, &types.AttachScsiLun{This: ss, LunUuid: d.Uuid})
		return err
	})
}

// lunCall runs call against the host's storage system, naming host, verb
// and disk in its error.
func (h *Host) lunCall(ctx context.Context, verb string, d *types.HostScsiDisk, call func(ss types.ManagedObjectReference) error) error {
	ss, err := h.storageSystem(ctx)
	if err != nil {
		return err
	}
	if err := call(ss.Reference()); err != nil {
		return fmt.Errorf("host %s: %s %s: %w", h.Name, verb, d.CanonicalName, err)
	}
	return nil
}
