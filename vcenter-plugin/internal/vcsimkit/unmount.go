package vcsimkit

// Unmounting and removing a VMFS datastore from a host, as ESXi does it:
// UnmountVmfsVolume, DetachScsiLun and their inverses MountVmfsVolume and
// AttachScsiLun (vcsim implements none of them). The kit refuses what ESXi
// refuses:
//   - UnmountVmfsVolume while a virtual machine or template registered on
//     the host has files on the datastore (ESXi: ResourceInUse, the
//     volume's files are open or the VM would lose its disks);
//   - DetachScsiLun while a VMFS on the LUN is still mounted on the host
//     (ResourceInUse: unmount it first);
//   - MountVmfsVolume on a LUN that is detached or not visible.
// Both states survive rescans. A rescan drops an unmounted datastore from
// the host once its LUN is detached or gone, and vCenter drops the
// datastore when no host has it any more.

import (
	"fmt"

	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"
)

// VMFSUUID is the VMFS UUID the kit gives datastore name
// (HostVmfsVolume.Uuid, the argument of UnmountVmfsVolume).
func VMFSUUID(name string) string { return fmt.Sprintf("%08x-cairn", fnvString(name)) }

func (s *storageSystem) isDetached(canonical string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.detached[canonical]
}

func (s *storageSystem) isUnmounted(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.unmounted[name]
}

// hostDatastore returns the datastore of VMFS uuid in this host's list.
func (s *storageSystem) hostDatastore(ctx *simulator.Context, uuid string) (*simulator.Datastore, *vmfsVolume) {
	h := s.kit.hosts[s.Host.Self]
	if h == nil {
		return nil, nil
	}
	s.kit.mu.Lock()
	var vol *vmfsVolume
	for _, v := range s.kit.vmfs {
		if VMFSUUID(v.name) == uuid {
			c := *v
			vol = &c
		}
	}
	s.kit.mu.Unlock()
	if vol == nil {
		return nil, nil
	}
	for _, ref := range h.datastores.Datastore {
		if ds, ok := ctx.Map.Get(ref).(*simulator.Datastore); ok && ds.Name == vol.name {
			return ds, vol
		}
	}
	return nil, vol
}

// mount returns this host's mount entry of ds.
func mountOf(ds *simulator.Datastore, host types.ManagedObjectReference) *types.DatastoreHostMount {
	for i := range ds.Host {
		if ds.Host[i].Key == host {
			return &ds.Host[i]
		}
	}
	return nil
}

// IsMounted reports whether a host mount entry is mounted (unset: yes).
func IsMounted(m types.DatastoreHostMount) bool {
	return m.MountInfo.Mounted == nil || *m.MountInfo.Mounted
}

func (s *storageSystem) setMounted(ctx *simulator.Context, ds *simulator.Datastore, mounted bool) {
	ctx.WithLock(ds, func() {
		if m := mountOf(ds, s.Host.Self); m != nil {
			m.MountInfo.Mounted = types.NewBool(mounted)
			m.MountInfo.Accessible = types.NewBool(mounted)
		}
	})
	ctx.Update(ds, []types.PropertyChange{{Name: "host", Val: ds.Host}})
}

func (s *storageSystem) UnmountVmfsVolume(ctx *simulator.Context, req *types.UnmountVmfsVolume) soap.HasFault {
	body := &methods.UnmountVmfsVolumeBody{}
	ds, vol := s.hostDatastore(ctx, req.VmfsUuid)
	if ds == nil {
		body.Fault_ = simulator.Fault("no VMFS volume "+req.VmfsUuid+" on host "+s.Host.Name, &types.NotFound{})
		return body
	}
	if m := mountOf(ds, s.Host.Self); m == nil || !IsMounted(*m) {
		body.Fault_ = simulator.Fault("VMFS volume "+vol.name+" is not mounted on host "+s.Host.Name, &types.InvalidState{})
		return body
	}
	for _, ref := range ds.Vm {
		vm, ok := ctx.Map.Get(ref).(*simulator.VirtualMachine)
		if ok && vm.Runtime.Host != nil && *vm.Runtime.Host == s.Host.Self {
			body.Fault_ = simulator.Fault(fmt.Sprintf("cannot unmount %s on %s: virtual machine %s has files on it", vol.name, s.Host.Name, vm.Name),
				&types.ResourceInUse{Type: "VirtualMachine", Name: vm.Name})
			return body
		}
	}
	s.mu.Lock()
	if s.unmounted == nil {
		s.unmounted = map[string]bool{}
	}
	s.unmounted[vol.name] = true
	s.mu.Unlock()
	s.setMounted(ctx, ds, false)
	body.Res = &types.UnmountVmfsVolumeResponse{}
	return body
}

func (s *storageSystem) MountVmfsVolume(ctx *simulator.Context, req *types.MountVmfsVolume) soap.HasFault {
	body := &methods.MountVmfsVolumeBody{}
	ds, vol := s.hostDatastore(ctx, req.VmfsUuid)
	if ds == nil {
		body.Fault_ = simulator.Fault("no VMFS volume "+req.VmfsUuid+" on host "+s.Host.Name, &types.NotFound{})
		return body
	}
	visible := false
	for _, d := range s.luns() {
		visible = visible || d.CanonicalName == vol.disk
	}
	if !visible || s.isDetached(vol.disk) {
		body.Fault_ = simulator.Fault(fmt.Sprintf("cannot mount %s on %s: its device %s is detached or not visible", vol.name, s.Host.Name, vol.disk), &types.HostConfigFault{})
		return body
	}
	if m := mountOf(ds, s.Host.Self); m != nil && IsMounted(*m) {
		f := &types.VmfsAlreadyMounted{}
		f.Uuid = req.VmfsUuid
		body.Fault_ = simulator.Fault("VMFS volume "+vol.name+" is already mounted on "+s.Host.Name, f)
		return body
	}
	s.mu.Lock()
	delete(s.unmounted, vol.name)
	s.mu.Unlock()
	s.setMounted(ctx, ds, true)
	body.Res = &types.MountVmfsVolumeResponse{}
	return body
}

// lun returns the host's disk whose Uuid is uuid.
func (s *storageSystem) lun(uuid string) *types.HostScsiDisk {
	for _, d := range s.luns() {
		if d.Uuid == uuid {
			return d
		}
	}
	return nil
}

func (s *storageSystem) setLUNState(ctx *simulator.Context, canonical string, off bool) {
	s.mu.Lock()
	if s.detached == nil {
		s.detached = map[string]bool{}
	}
	if off {
		s.detached[canonical] = true
	} else {
		delete(s.detached, canonical)
	}
	state := []string{string(types.ScsiLunStateOk)}
	if off {
		state = []string{string(types.ScsiLunStateOff)}
	}
	for _, l := range s.StorageDeviceInfo.ScsiLun {
		if d, ok := l.(*types.HostScsiDisk); ok && d.CanonicalName == canonical {
			d.OperationalState = state
		}
	}
	s.mu.Unlock()
	s.publish(ctx)
}

func (s *storageSystem) DetachScsiLun(ctx *simulator.Context, req *types.DetachScsiLun) soap.HasFault {
	body := &methods.DetachScsiLunBody{}
	d := s.lun(req.LunUuid)
	if d == nil {
		body.Fault_ = simulator.Fault("no LUN "+req.LunUuid+" on host "+s.Host.Name, &types.NotFound{})
		return body
	}
	if s.isDetached(d.CanonicalName) {
		body.Fault_ = simulator.Fault("LUN "+d.CanonicalName+" is already detached on "+s.Host.Name, &types.InvalidState{})
		return body
	}
	if h := s.kit.hosts[s.Host.Self]; h != nil {
		for _, ref := range h.datastores.Datastore {
			ds, ok := ctx.Map.Get(ref).(*simulator.Datastore)
			if !ok {
				continue
			}
			info, ok := ds.Info.(*types.VmfsDatastoreInfo)
			if !ok || info.Vmfs == nil {
				continue
			}
			for _, e := range info.Vmfs.Extent {
				if m := mountOf(ds, s.Host.Self); e.DiskName == d.CanonicalName && m != nil && IsMounted(*m) {
					body.Fault_ = simulator.Fault(fmt.Sprintf("cannot detach %s on %s: VMFS datastore %s on it is mounted; unmount it first", d.CanonicalName, s.Host.Name, ds.Name),
						&types.ResourceInUse{Type: "Datastore", Name: ds.Name})
					return body
				}
			}
		}
	}
	s.setLUNState(ctx, d.CanonicalName, true)
	body.Res = &types.DetachScsiLunResponse{}
	return body
}

func (s *storageSystem) AttachScsiLun(ctx *simulator.Context, req *types.AttachScsiLun) soap.HasFault {
	body := &methods.AttachScsiLunBody{}
	d := s.lun(req.LunUuid)
	if d == nil {
		body.Fault_ = simulator.Fault("no LUN "+req.LunUuid+" on host "+s.Host.Name, &types.NotFound{})
		return body
	}
	s.setLUNState(ctx, d.CanonicalName, false)
	body.Res = &types.AttachScsiLunResponse{}
	return body
}

// dropGoneVMFS removes from host the datastores it has unmounted whose LUN
// is detached or gone (what a rescan does on ESXi); a datastore no host
// has any more leaves vCenter's inventory, and a VMFS whose LUN no host
// sees is forgotten (its name can be used again).
func (k *Kit) dropGoneVMFS(ctx *simulator.Context, host types.ManagedObjectReference) {
	h := k.hosts[host]
	if h == nil {
		return
	}
	live := map[string]bool{}
	for _, d := range h.storage.luns() {
		if !h.storage.isDetached(d.CanonicalName) {
			live[d.CanonicalName] = true
		}
	}
	k.mu.Lock()
	disks := map[string]string{}
	for _, v := range k.vmfs {
		if !v.local {
			disks[v.name] = v.disk
		}
	}
	k.mu.Unlock()
	for _, ref := range append([]types.ManagedObjectReference(nil), h.datastores.Datastore...) {
		ds, ok := ctx.Map.Get(ref).(*simulator.Datastore)
		if !ok {
			continue
		}
		disk, kitVMFS := disks[ds.Name]
		m := mountOf(ds, host)
		if !kitVMFS || m == nil || live[disk] || IsMounted(*m) {
			continue
		}
		k.removeHostMount(ctx, h, ds)
		h.storage.mu.Lock()
		delete(h.storage.unmounted, ds.Name)
		h.storage.mu.Unlock()
	}
	// Forget VMFS volumes whose LUN no host sees and no datastore shows.
	for name, disk := range disks {
		seen := false
		for _, o := range k.hosts {
			for _, d := range o.storage.luns() {
				seen = seen || d.CanonicalName == disk
			}
		}
		if !seen && ctx.Map.FindByName(name, k.allDatastores(ctx)) == nil {
			k.mu.Lock()
			delete(k.vmfs, name)
			k.mu.Unlock()
		}
	}
}

func (k *Kit) allDatastores(ctx *simulator.Context) []types.ManagedObjectReference {
	var out []types.ManagedObjectReference
	for _, h := range k.hosts {
		out = append(out, h.datastores.Datastore...)
	}
	return out
}

// removeHostMount takes ds off one host; off the last one, it leaves
// vCenter's inventory (vcsim's Destroy_Task does the folder part).
func (k *Kit) removeHostMount(ctx *simulator.Context, h *kitHost, ds *simulator.Datastore) {
	host := h.datastores.Host.Self
	dss := h.datastores.HostDatastoreSystem
	simulator.RemoveReference(&dss.Datastore, ds.Self)
	if len(ds.Host) <= 1 {
		res := ds.DestroyTask(ctx, &types.Destroy_Task{This: ds.Self}).(*methods.Destroy_TaskBody)
		if res.Res != nil {
			if t, ok := ctx.Map.Get(res.Res.Returnval).(*simulator.Task); ok {
				t.Wait()
			}
		}
		return
	}
	hs, ok := ctx.Map.Get(host).(*simulator.HostSystem)
	if !ok {
		return
	}
	ctx.Map.RemoveReference(ctx, hs, &hs.Datastore, ds.Self)
	ctx.WithLock(ds, func() {
		var keep []types.DatastoreHostMount
		for _, m := range ds.Host {
			if m.Key != host {
				keep = append(keep, m)
			}
		}
		ds.Host = keep
		ds.Summary.MultipleHostAccess = types.NewBool(len(keep) > 1)
	})
	ctx.Update(ds, []types.PropertyChange{{Name: "host", Val: ds.Host}})
	// The cluster lists the datastore while one of its hosts has it.
	var parent *mo.ComputeResource
	switch p := ctx.Map.Get(*hs.Parent).(type) {
	case *simulator.ClusterComputeResource:
		parent = &p.ComputeResource
	case *mo.ComputeResource:
		parent = p
	}
	if parent == nil {
		return
	}
	for _, m := range ds.Host {
		if o, ok := ctx.Map.Get(m.Key).(*simulator.HostSystem); ok && o.Parent != nil && *o.Parent == parent.Self {
			return
		}
	}
	ctx.Map.RemoveReference(ctx, parent, &parent.Datastore, ds.Self)
}
