package vcsimkit

import (
	"context"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"
)

// LUN is a block device a Cairn cluster exposes to an ESXi host over iSCSI.
type LUN struct {
	NAA  string // 32 hex digits (NAA type 6); ESXi names it "naa."+NAA
	Size int64  // bytes
	Name string // the Cairn volume name, shown in the LUN's display name
}

// LUNSource decides which LUNs a simulated host discovers on rescan: the
// e2e harness answers from the real cluster's mappings, tests from
// gatewayfake. sendTargets are the host's configured send target addresses.
type LUNSource interface {
	LUNsFor(ctx context.Context, initiatorIQN string, sendTargets []string) ([]LUN, error)
}

// SoftwareISCSIDevice is the device name ESXi gives its software iSCSI adapter.
const SoftwareISCSIDevice = "vmhba65"

// LocalDisk describes one local candidate disk the kit puts on a host.
type LocalDisk struct {
	CanonicalName string // naa.5..., stable across reboots
	Size          int64
	SSD           bool
}

// localDisks returns the deterministic local disks of a host: the first is
// an SSD, the rest HDDs. Names derive from the host name so that they are
// stable across runs and distinct across hosts.
func localDisks(host string, n int, size int64) []LocalDisk {
	out := make([]LocalDisk, n)
	for i := range out {
		h := fnv.New32a()
		fmt.Fprintf(h, "%s/%d", host, i)
		out[i] = LocalDisk{CanonicalName: fmt.Sprintf("naa.5000c500%08x", h.Sum32()), Size: size, SSD: i == 0}
	}
	return out
}

func scsiDisk(canonical, display, vendor, model string, size int64, local, ssd bool) *types.HostScsiDisk {
	path := "/vmfs/devices/disks/" + canonical
	return &types.HostScsiDisk{
		ScsiLun: types.ScsiLun{
			HostDevice:       types.HostDevice{DeviceName: path, DeviceType: "disk"},
			Key:              "key-vim.host.ScsiDisk-" + canonical,
			Uuid:             "0200000000" + strings.TrimPrefix(canonical, "naa."),
			CanonicalName:    canonical,
			DisplayName:      display,
			LunType:          "disk",
			Vendor:           vendor,
			Model:            model,
			OperationalState: []string{"ok"},
		},
		Capacity:   types.HostDiskDimensionsLba{BlockSize: 512, Block: size / 512},
		DevicePath: path,
		LocalDisk:  types.NewBool(local),
		Ssd:        types.NewBool(ssd),
	}
}

// storageSystem adds software iSCSI and per-host devices to vcsim's
// HostStorageSystem (vcsim shares one device list between all hosts).
type storageSystem struct {
	*simulator.HostStorageSystem
	kit *Kit

	mu sync.Mutex // serialises our changes to StorageDeviceInfo
	// detached LUNs (canonical names) and unmounted VMFS volumes (names):
	// ESXi keeps both states across rescans and reboots (unmount.go).
	detached  map[string]bool
	unmounted map[string]bool
}

func (s *storageSystem) iscsiHba() *types.HostInternetScsiHba {
	for _, h := range s.StorageDeviceInfo.HostBusAdapter {
		if i, ok := h.(*types.HostInternetScsiHba); ok {
			return i
		}
	}
	return nil
}

// publish makes property collectors and HostSystem.config see the change.
func (s *storageSystem) publish(ctx *simulator.Context) {
	info := s.StorageDeviceInfo
	ctx.Update(s.HostStorageSystem, []types.PropertyChange{{Name: "storageDeviceInfo", Val: info}})
	host := ctx.Map.Get(s.Host.Self)
	ctx.WithLock(host, func() {
		s.Host.Config.StorageDevice = info
	})
}

// IQN is the software iSCSI initiator name the kit gives a host.
func IQN(host string) string {
	h := fnv.New32a()
	h.Write([]byte(host))
	return fmt.Sprintf("iqn.1998-01.com.vmware:%s-%08x", strings.ToLower(host), h.Sum32())
}

func (s *storageSystem) UpdateSoftwareInternetScsiEnabled(ctx *simulator.Context, req *types.UpdateSoftwareInternetScsiEnabled) soap.HasFault {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.StorageDeviceInfo.SoftwareInternetScsiEnabled = req.Enabled
	if req.Enabled && s.iscsiHba() == nil {
		s.StorageDeviceInfo.HostBusAdapter = append(s.StorageDeviceInfo.HostBusAdapter, &types.HostInternetScsiHba{
			HostHostBusAdapter: types.HostHostBusAdapter{Key: "key-vim.host.InternetScsiHba-" + SoftwareISCSIDevice, Device: SoftwareISCSIDevice,
				Model: "iSCSI Software Adapter", Driver: "iscsi_vmk", Status: "online"},
			IsSoftwareBased: true,
			IScsiName:       IQN(s.Host.Name),
		})
	}
	s.publish(ctx)
	return &methods.UpdateSoftwareInternetScsiEnabledBody{Res: &types.UpdateSoftwareInternetScsiEnabledResponse{}}
}

func (s *storageSystem) AddInternetScsiSendTargets(ctx *simulator.Context, req *types.AddInternetScsiSendTargets) soap.HasFault {
	s.mu.Lock()
	defer s.mu.Unlock()
	hba := s.iscsiHba()
	if hba == nil || hba.Device != req.IScsiHbaDevice {
		return &methods.AddInternetScsiSendTargetsBody{Fault_: simulator.Fault("software iSCSI adapter "+req.IScsiHbaDevice+" not found: enable software iSCSI first", &types.NotFound{})}
	}
	for _, t := range req.Targets {
		dup := false
		for _, have := range hba.ConfiguredSendTarget {
			if have.Address == t.Address && have.Port == t.Port {
				dup = true // ESXi ignores a send target it already has
			}
		}
		if !dup {
			hba.ConfiguredSendTarget = append(hba.ConfiguredSendTarget, t)
		}
	}
	s.publish(ctx)
	return &methods.AddInternetScsiSendTargetsBody{Res: &types.AddInternetScsiSendTargetsResponse{}}
}

// RemoveInternetScsiSendTargets removes send targets as ESXi does: a
// target the adapter does not have is a NotFound fault and nothing changes.
// LUNs reached only through removed targets go at the next rescan.
func (s *storageSystem) RemoveInternetScsiSendTargets(ctx *simulator.Context, req *types.RemoveInternetScsiSendTargets) soap.HasFault {
	s.mu.Lock()
	defer s.mu.Unlock()
	hba := s.iscsiHba()
	if hba == nil || hba.Device != req.IScsiHbaDevice {
		return &methods.RemoveInternetScsiSendTargetsBody{Fault_: simulator.Fault("software iSCSI adapter "+req.IScsiHbaDevice+" not found", &types.NotFound{})}
	}
	keep := append([]types.HostInternetScsiHbaSendTarget(nil), hba.ConfiguredSendTarget...)
	for _, t := range req.Targets {
		i := slices.IndexFunc(keep, func(h types.HostInternetScsiHbaSendTarget) bool { return h.Address == t.Address && h.Port == t.Port })
		if i < 0 {
			return &methods.RemoveInternetScsiSendTargetsBody{Fault_: simulator.Fault(fmt.Sprintf("send target %s:%d is not configured on %s", t.Address, t.Port, req.IScsiHbaDevice), &types.NotFound{})}
		}
		keep = slices.Delete(keep, i, i+1)
	}
	hba.ConfiguredSendTarget = keep
	s.publish(ctx)
	return &methods.RemoveInternetScsiSendTargetsBody{Res: &types.RemoveInternetScsiSendTargetsResponse{}}
}

// rescan asks the LUN source what this host sees now and replaces the
// host's iSCSI LUNs with it. Local disks are never touched.
func (s *storageSystem) rescan(ctx *simulator.Context) *soap.Fault {
	s.mu.Lock()
	defer s.mu.Unlock()
	hba := s.iscsiHba()
	var luns []LUN
	if hba != nil && s.kit.opts.LUNs != nil && s.StorageDeviceInfo.SoftwareInternetScsiEnabled {
		var targets []string
		for _, t := range hba.ConfiguredSendTarget {
			targets = append(targets, fmt.Sprintf("%s:%d", t.Address, t.Port))
		}
		c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var err error
		luns, err = s.kit.opts.LUNs.LUNsFor(c, hba.IScsiName, targets)
		if err != nil {
			return simulator.Fault("rescan "+SoftwareISCSIDevice+": "+err.Error(), &types.HostConfigFault{})
		}
	}
	var keep []types.BaseScsiLun
	for _, l := range s.StorageDeviceInfo.ScsiLun {
		if d, ok := l.(*types.HostScsiDisk); ok && d.Model == iscsiModel {
			continue
		}
		keep = append(keep, l)
	}
	sort.Slice(luns, func(i, j int) bool { return luns[i].NAA < luns[j].NAA })
	var discovered []*types.HostScsiDisk
	for _, l := range luns {
		d := scsiDisk("naa."+strings.ToLower(l.NAA), "CAIRN iSCSI Disk (naa."+l.NAA+") "+l.Name, "CAIRN", iscsiModel, l.Size, false, true)
		d.VStorageSupport = s.kit.vstorage(s.Host.Name, d.CanonicalName)
		if s.detached[d.CanonicalName] {
			d.OperationalState = []string{string(types.ScsiLunStateOff)}
		}
		discovered = append(discovered, d)
		keep = append(keep, d)
	}
	s.StorageDeviceInfo.ScsiLun = keep
	var targets []string
	if hba != nil {
		for _, t := range hba.ConfiguredSendTarget {
			targets = append(targets, fmt.Sprintf("%s:%d", t.Address, t.Port))
		}
	}
	s.setMultipath(discovered, targets)
	s.publish(ctx)
	return nil
}

// iscsiModel marks the LUNs the kit discovered over iSCSI.
const iscsiModel = "cairn-volume"

func (s *storageSystem) RescanHba(ctx *simulator.Context, req *types.RescanHba) soap.HasFault {
	if f := s.rescan(ctx); f != nil {
		return &methods.RescanHbaBody{Fault_: f}
	}
	return &methods.RescanHbaBody{Res: &types.RescanHbaResponse{}}
}

func (s *storageSystem) RescanAllHba(ctx *simulator.Context, req *types.RescanAllHba) soap.HasFault {
	if f := s.rescan(ctx); f != nil {
		return &methods.RescanAllHbaBody{Fault_: f}
	}
	return &methods.RescanAllHbaBody{Res: &types.RescanAllHbaResponse{}}
}

// RescanVmfs mounts the VMFS volumes that live on LUNs this host now sees.
func (s *storageSystem) RescanVmfs(ctx *simulator.Context, req *types.RescanVmfs) soap.HasFault {
	s.kit.mountVisibleVMFS(ctx, s.Host.Self)
	s.kit.dropGoneVMFS(ctx, s.Host.Self)
	return &methods.RescanVmfsBody{Res: &types.RescanVmfsResponse{}}
}

func (s *storageSystem) luns() []*types.HostScsiDisk {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*types.HostScsiDisk
	for _, l := range s.StorageDeviceInfo.ScsiLun {
		if d, ok := l.(*types.HostScsiDisk); ok {
			c := *d
			out = append(out, &c)
		}
	}
	return out
}

// datastoreSystem adds VMFS creation to vcsim's HostDatastoreSystem.
type datastoreSystem struct {
	*simulator.HostDatastoreSystem
	kit     *Kit
	storage *storageSystem
}

func (d *datastoreSystem) QueryAvailableDisksForVmfs(ctx *simulator.Context, req *types.QueryAvailableDisksForVmfs) soap.HasFault {
	var disks []types.HostScsiDisk
	used := d.kit.vmfsExtents()
	for _, disk := range d.storage.luns() {
		if !used[disk.CanonicalName] {
			disks = append(disks, *disk)
		}
	}
	return &methods.QueryAvailableDisksForVmfsBody{Res: &types.QueryAvailableDisksForVmfsResponse{Returnval: disks}}
}

func (d *datastoreSystem) disk(path string) *types.HostScsiDisk {
	for _, disk := range d.storage.luns() {
		if disk.DevicePath == path || disk.CanonicalName == path {
			return disk
		}
	}
	return nil
}

func (d *datastoreSystem) QueryVmfsDatastoreCreateOptions(ctx *simulator.Context, req *types.QueryVmfsDatastoreCreateOptions) soap.HasFault {
	disk := d.disk(req.DevicePath)
	if disk == nil {
		return &methods.QueryVmfsDatastoreCreateOptionsBody{Fault_: simulator.Fault("no disk "+req.DevicePath+" on this host: rescan the storage adapters", &types.NotFound{})}
	}
	major := int32(6)
	if req.VmfsMajorVersion != 0 {
		major = req.VmfsMajorVersion
	}
	end := disk.Capacity.Block - 1
	opt := types.VmfsDatastoreOption{
		Info: &types.VmfsDatastoreAllExtentOption{VmfsDatastoreSingleExtentOption: types.VmfsDatastoreSingleExtentOption{
			VmfsDatastoreBaseOption: types.VmfsDatastoreBaseOption{Layout: types.HostDiskPartitionLayout{
				Total: &disk.Capacity,
				Partition: []types.HostDiskPartitionBlockRange{{Partition: 1, Type: "vmfs",
					Start: types.HostDiskDimensionsLba{BlockSize: 512, Block: 2048}, End: types.HostDiskDimensionsLba{BlockSize: 512, Block: end}}},
			}},
			VmfsExtent: types.HostDiskPartitionBlockRange{Partition: 1},
		}},
		Spec: &types.VmfsDatastoreCreateSpec{
			VmfsDatastoreSpec: types.VmfsDatastoreSpec{DiskUuid: disk.Uuid},
			Partition: types.HostDiskPartitionSpec{PartitionFormat: "gpt", TotalSectors: disk.Capacity.Block,
				Partition: []types.HostDiskPartitionAttributes{{Partition: 1, StartSector: 2048, EndSector: end, Type: "vmfs", Guid: "AA31E02A400F11DB9590000C2911D1B8"}}},
			Vmfs: types.HostVmfsSpec{MajorVersion: major, Extent: types.HostScsiDiskPartition{DiskName: disk.CanonicalName, Partition: 1}},
		},
	}
	// Like ESXi, offer more than one layout, and not the whole-disk one
	// first: a single extent over the first free region only (here, half
	// the disk, as when a partition table already holds something), then
	// "use all free space". A caller taking opts[0] gets half a datastore.
	half := disk.Capacity.Block / 2
	partial := types.VmfsDatastoreOption{
		Info: &types.VmfsDatastoreSingleExtentOption{
			VmfsDatastoreBaseOption: types.VmfsDatastoreBaseOption{Layout: types.HostDiskPartitionLayout{
				Total: &disk.Capacity,
				Partition: []types.HostDiskPartitionBlockRange{{Partition: 1, Type: "vmfs",
					Start: types.HostDiskDimensionsLba{BlockSize: 512, Block: 2048}, End: types.HostDiskDimensionsLba{BlockSize: 512, Block: half}}},
			}},
			VmfsExtent: types.HostDiskPartitionBlockRange{Partition: 1},
		},
		Spec: &types.VmfsDatastoreCreateSpec{
			VmfsDatastoreSpec: types.VmfsDatastoreSpec{DiskUuid: disk.Uuid},
			Partition: types.HostDiskPartitionSpec{PartitionFormat: "gpt", TotalSectors: disk.Capacity.Block,
				Partition: []types.HostDiskPartitionAttributes{{Partition: 1, StartSector: 2048, EndSector: half, Type: "vmfs", Guid: "AA31E02A400F11DB9590000C2911D1B8"}}},
			Vmfs: types.HostVmfsSpec{MajorVersion: major, Extent: types.HostScsiDiskPartition{DiskName: disk.CanonicalName, Partition: 1}},
		},
	}
	return &methods.QueryVmfsDatastoreCreateOptionsBody{Res: &types.QueryVmfsDatastoreCreateOptionsResponse{Returnval: []types.VmfsDatastoreOption{partial, opt}}}
}

func (d *datastoreSystem) CreateVmfsDatastore(ctx *simulator.Context, req *types.CreateVmfsDatastore) soap.HasFault {
	body := &methods.CreateVmfsDatastoreBody{}
	name := req.Spec.Vmfs.VolumeName
	diskName := req.Spec.Vmfs.Extent.DiskName
	if name == "" {
		body.Fault_ = simulator.Fault("give the datastore a name", &types.InvalidArgument{InvalidProperty: "spec.vmfs.volumeName"})
		return body
	}
	if d.disk(diskName) == nil {
		body.Fault_ = simulator.Fault("disk "+diskName+" is not visible on this host: rescan first", &types.NotFound{})
		return body
	}
	if owner, used := d.kit.vmfsOn(diskName); used {
		body.Fault_ = simulator.Fault("disk "+diskName+" already holds datastore "+owner, &types.ResourceInUse{Name: diskName})
		return body
	}
	// The file system is as large as the partition the spec lays out.
	var sectors int64
	for _, p := range req.Spec.Partition.Partition {
		sectors += p.EndSector - p.StartSector + 1
	}
	ref, fault := d.kit.mountVMFS(ctx, d.HostDatastoreSystem, name, diskName, req.Spec.Vmfs.MajorVersion, false, sectors*512)
	if fault != nil {
		body.Fault_ = fault
		return body
	}
	body.Res = &types.CreateVmfsDatastoreResponse{Returnval: ref}
	return body
}

// vmfsVolume is a VMFS file system the kit created on a LUN.
type vmfsVolume struct {
	name  string
	disk  string // canonical name of the LUN
	path  string // backing directory
	major int32
	local bool
	// capacity is the VMFS partition's size (0: whatever the backing
	// directory's file system reports, for the hosts' local datastores).
	capacity int64
}

func (k *Kit) vmfsExtents() map[string]bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	used := map[string]bool{}
	for _, v := range k.vmfs {
		used[v.disk] = true
	}
	return used
}

func (k *Kit) vmfsOn(disk string) (string, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, v := range k.vmfs {
		if v.disk == disk {
			return v.name, true
		}
	}
	return "", false
}

// mountVMFS creates (first host) or mounts (other hosts) the datastore
// name on disk, reusing vcsim's local datastore plumbing for the files and
// then dressing it as VMFS. local datastores are not shared.
func (k *Kit) mountVMFS(ctx *simulator.Context, dss *simulator.HostDatastoreSystem, name, disk string, major int32, local bool, capacity int64) (types.ManagedObjectReference, *soap.Fault) {
	if major == 0 {
		major = 6
	}
	k.mu.Lock()
	vol, ok := k.vmfs[name]
	if !ok {
		vol = &vmfsVolume{name: name, disk: disk, path: filepath.Join(k.opts.Dir, "vmfs", name), major: major, local: local, capacity: capacity}
		k.vmfs[name] = vol
	}
	k.mu.Unlock()
	if err := os.MkdirAll(vol.path, 0o755); err != nil {
		return types.ManagedObjectReference{}, simulator.Fault(err.Error(), &types.HostConfigFault{})
	}
	res := dss.CreateLocalDatastore(ctx, &types.CreateLocalDatastore{This: dss.Self, Name: name, Path: vol.path}).(*methods.CreateLocalDatastoreBody)
	if res.Fault_ != nil {
		return types.ManagedObjectReference{}, res.Fault_
	}
	// On a second host vcsim mounts the existing datastore but answers with
	// an unregistered reference: look the datastore up by name instead.
	ds, ok := ctx.Map.FindByName(name, dss.Datastore).(*simulator.Datastore)
	if !ok {
		return types.ManagedObjectReference{}, simulator.Fault("datastore "+name+" vanished after mount", &types.HostConfigFault{})
	}
	ctx.WithLock(ds, func() {
		if vol.capacity > 0 {
			ds.Summary.Capacity = vol.capacity
			ds.Summary.FreeSpace = min(ds.Summary.FreeSpace, vol.capacity)
		}
		base := *ds.Info.GetDatastoreInfo()
		ds.Info = &types.VmfsDatastoreInfo{DatastoreInfo: base, Vmfs: &types.HostVmfsVolume{
			HostFileSystemVolume: types.HostFileSystemVolume{Type: "VMFS", Name: name, Capacity: ds.Summary.Capacity},
			BlockSizeMb:          1, MajorVersion: vol.major, Version: fmt.Sprintf("%d.82", vol.major),
			Uuid: fmt.Sprintf("%08x-cairn", fnvString(name)), Local: types.NewBool(local),
			Extent: []types.HostScsiDiskPartition{{DiskName: vol.disk, Partition: 1}}}}
		ds.Summary.Type = "VMFS"
		ds.Summary.MultipleHostAccess = types.NewBool(len(ds.Host) > 1)
	})
	ctx.Update(ds, []types.PropertyChange{{Name: "summary", Val: ds.Summary}, {Name: "info", Val: ds.Info}})
	return ds.Self, nil
}

func fnvString(s string) uint32 {
	h := fnv.New32a()
	h.Write([]byte(s))
	return h.Sum32()
}

// mountVisibleVMFS mounts on host every shared VMFS whose LUN it sees.
func (k *Kit) mountVisibleVMFS(ctx *simulator.Context, host types.ManagedObjectReference) {
	h := k.hosts[host]
	if h == nil {
		return
	}
	seen := map[string]bool{}
	for _, d := range h.storage.luns() {
		// ESXi mounts no VMFS from a detached LUN, nor one unmounted on
		// this host (the unmount is persistent until MountVmfsVolume).
		if !h.storage.isDetached(d.CanonicalName) {
			seen[d.CanonicalName] = true
		}
	}
	k.mu.Lock()
	var todo []vmfsVolume
	for _, v := range k.vmfs {
		if !v.local && seen[v.disk] && !h.storage.isUnmounted(v.name) {
			todo = append(todo, *v)
		}
	}
	k.mu.Unlock()
	sort.Slice(todo, func(i, j int) bool { return todo[i].name < todo[j].name })
	for _, v := range todo {
		mounted := false
		for _, ref := range h.datastores.Datastore {
			if ds, ok := ctx.Map.Get(ref).(*simulator.Datastore); ok && ds.Name == v.name {
				mounted = true
			}
		}
		if !mounted {
			_, _ = k.mountVMFS(ctx, h.datastores.HostDatastoreSystem, v.name, v.disk, v.major, false, v.capacity)
		}
	}
}

// networkSystem adds vmkernel NICs to vcsim's HostNetworkSystem.
type networkSystem struct {
	*simulator.HostNetworkSystem
	mu sync.Mutex
}

func (n *networkSystem) AddVirtualNic(ctx *simulator.Context, req *types.AddVirtualNic) soap.HasFault {
	n.mu.Lock()
	defer n.mu.Unlock()
	found := false
	for _, pg := range n.NetworkInfo.Portgroup {
		if pg.Spec.Name == req.Portgroup {
			found = true
		}
	}
	for _, name := range n.NetworkInfo.Vswitch[0].Portgroup {
		if name == req.Portgroup {
			found = true
		}
	}
	if !found {
		return &methods.AddVirtualNicBody{Fault_: simulator.Fault("port group "+req.Portgroup+" not found on this host: create it first", &types.NotFound{})}
	}
	for _, v := range n.NetworkInfo.Vnic {
		if v.Portgroup == req.Portgroup {
			return &methods.AddVirtualNicBody{Fault_: simulator.Fault("port group "+req.Portgroup+" already has "+v.Device, &types.AlreadyExists{Name: v.Device})}
		}
	}
	dev := fmt.Sprintf("vmk%d", len(n.NetworkInfo.Vnic)+1)
	vnic := types.HostVirtualNic{Device: dev, Key: "key-vim.host.VirtualNic-" + dev, Portgroup: req.Portgroup, Spec: req.Nic}
	n.NetworkInfo.Vnic = append(n.NetworkInfo.Vnic, vnic)
	ctx.Update(n.HostNetworkSystem, []types.PropertyChange{{Name: "networkInfo.vnic", Val: n.NetworkInfo.Vnic}})
	host := ctx.Map.Get(n.Host.Self)
	ctx.WithLock(host, func() { n.Host.Config.Network.Vnic = append(n.Host.Config.Network.Vnic, vnic) })
	return &methods.AddVirtualNicBody{Res: &types.AddVirtualNicResponse{Returnval: dev}}
}

// AddPortGroup adds a standard port group to a host. Unlike vcsim, a name
// that another host already uses is fine: as in vCenter, hosts' port
// groups of one name are one Network object.
func (n *networkSystem) AddPortGroup(ctx *simulator.Context, req *types.AddPortGroup) soap.HasFault {
	n.mu.Lock()
	defer n.mu.Unlock()
	name := req.Portgrp.Name
	var sw *types.HostVirtualSwitch
	for i := range n.NetworkInfo.Vswitch {
		if n.NetworkInfo.Vswitch[i].Name == req.Portgrp.VswitchName {
			sw = &n.NetworkInfo.Vswitch[i]
		}
	}
	if name == "" || sw == nil {
		return &methods.AddPortGroupBody{Fault_: simulator.Fault("give a port group name and an existing virtual switch", &types.InvalidArgument{InvalidProperty: "portgrp"})}
	}
	for _, pg := range n.NetworkInfo.Portgroup {
		if pg.Spec.Name == name {
			return &methods.AddPortGroupBody{Fault_: simulator.Fault("port group "+name+" exists on this host", &types.AlreadyExists{Name: name})}
		}
	}
	var network *mo.Network
	for _, e := range ctx.Map.All("Network") {
		if nw, ok := e.(*mo.Network); ok && nw.Name == name {
			network = nw
		}
	}
	if network == nil {
		if res := n.HostNetworkSystem.AddPortGroup(ctx, req).(*methods.AddPortGroupBody); res.Fault_ != nil {
			return res
		}
		for _, e := range ctx.Map.All("Network") {
			if nw, ok := e.(*mo.Network); ok && nw.Name == name {
				network = nw
			}
		}
	} else {
		sw.Portgroup = append(sw.Portgroup, name)
		n.NetworkInfo.Portgroup = append(n.NetworkInfo.Portgroup, types.HostPortGroup{Key: "key-vim.host.PortGroup-" + name, Spec: req.Portgrp})
	}
	if network != nil {
		host := ctx.Map.Get(n.Host.Self).(*simulator.HostSystem)
		ctx.WithLock(network, func() { network.Host = append(network.Host, host.Self) })
		ctx.WithLock(host, func() { host.Network = append(host.Network, network.Self) })
	}
	ctx.Update(n.HostNetworkSystem, []types.PropertyChange{{Name: "networkInfo", Val: n.NetworkInfo}})
	return &methods.AddPortGroupBody{Res: &types.AddPortGroupResponse{}}
}

// iscsiManager is the per-host IscsiManager vcsim lacks: it records which
// vmkernel NICs are bound to the software adapter.
type iscsiManager struct {
	mo.IscsiManager
	network *networkSystem

	mu    sync.Mutex
	bound map[string]bool // vmk device
}

func (m *iscsiManager) BindVnic(ctx *simulator.Context, req *types.BindVnic) soap.HasFault {
	if req.IScsiHbaName != SoftwareISCSIDevice {
		return &methods.BindVnicBody{Fault_: simulator.Fault("no iSCSI adapter "+req.IScsiHbaName, &types.NotFound{})}
	}
	if f := m.network.bindable(req.VnicDevice); f != nil {
		return &methods.BindVnicBody{Fault_: f}
	}
	m.mu.Lock()
	m.bound[req.VnicDevice] = true
	m.mu.Unlock()
	return &methods.BindVnicBody{Res: &types.BindVnicResponse{}}
}

func (m *iscsiManager) QueryBoundVnics(ctx *simulator.Context, req *types.QueryBoundVnics) soap.HasFault {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []types.IscsiPortInfo
	for dev := range m.bound {
		out = append(out, types.IscsiPortInfo{VnicDevice: dev})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].VnicDevice < out[j].VnicDevice })
	return &methods.QueryBoundVnicsBody{Res: &types.QueryBoundVnicsResponse{Returnval: out}}
}
