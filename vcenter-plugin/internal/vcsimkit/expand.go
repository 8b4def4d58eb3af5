package vcsimkit

import (
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"
)

// Growing a VMFS datastore after its LUN grew, as ESXi does it:
//
//   - A host sees the LUN's new size only after it rescanned its adapters;
//     until then QueryVmfsDatastoreExpandOptions offers nothing (the
//     extent already ends at the end of the disk the host knows).
//   - The option's spec lays out the partition over the disk as the host
//     knows it (totalSectors); ExpandVmfsDatastore refuses a spec for
//     another disk, another partition, a size the disk does not have, or
//     one that does not grow the extent.
//
// The kit's datastore is one object shared by its hosts, so the others
// see the new capacity at once; on ESXi they see it after RescanVmfs, which
// the plugin's engine calls.

// vmfsStart is the first sector of the kit's VMFS partitions (1 MiB).
const vmfsStart = 2048

// minExpand is the least free space after an extent that ESXi offers to
// expand into (1 MiB).
const minExpand = 2048

// expandTarget finds the kit's VMFS volume behind a datastore of this
// host and the disk it lies on, as the host sees it now.
func (d *datastoreSystem) expandTarget(ctx *simulator.Context, ref types.ManagedObjectReference) (*simulator.Datastore, *vmfsVolume, *types.HostScsiDisk, *soap.Fault) {
	ds, ok := ctx.Map.Get(ref).(*simulator.Datastore)
	mounted := false
	for _, r := range d.Datastore {
		mounted = mounted || r == ref
	}
	if !ok || !mounted {
		return nil, nil, nil, simulator.Fault("datastore "+ref.Value+" is not mounted on this host", &types.NotFound{})
	}
	d.kit.mu.Lock()
	vol := d.kit.vmfs[ds.Name]
	d.kit.mu.Unlock()
	if vol == nil || vol.local {
		return nil, nil, nil, simulator.Fault("datastore "+ds.Name+" is not a VMFS datastore on a LUN", &types.InvalidArgument{InvalidProperty: "datastore"})
	}
	disk := d.disk(vol.disk)
	if disk == nil {
		return nil, nil, nil, simulator.Fault("the LUN "+vol.disk+" of datastore "+ds.Name+" is not visible on this host: rescan first", &types.NotFound{})
	}
	return ds, vol, disk, nil
}

func (v *vmfsVolume) endSector() int64 { return vmfsStart + v.capacity/512 - 1 }

func (d *datastoreSystem) QueryVmfsDatastoreExpandOptions(ctx *simulator.Context, req *types.QueryVmfsDatastoreExpandOptions) soap.HasFault {
	body := &methods.QueryVmfsDatastoreExpandOptionsBody{}
	_, vol, disk, fault := d.expandTarget(ctx, req.Datastore)
	if fault != nil {
		body.Fault_ = fault
		return body
	}
	res := &types.QueryVmfsDatastoreExpandOptionsResponse{}
	last := disk.Capacity.Block - 1
	if last-vol.endSector() >= minExpand {
		res.Returnval = []types.VmfsDatastoreOption{{
			Info: &types.VmfsDatastoreSingleExtentOption{
				VmfsDatastoreBaseOption: types.VmfsDatastoreBaseOption{Layout: types.HostDiskPartitionLayout{
					Total: &disk.Capacity,
					Partition: []types.HostDiskPartitionBlockRange{{Partition: 1, Type: "vmfs",
						Start: types.HostDiskDimensionsLba{BlockSize: 512, Block: vmfsStart}, End: types.HostDiskDimensionsLba{BlockSize: 512, Block: last}}},
				}},
				VmfsExtent: types.HostDiskPartitionBlockRange{Partition: 1},
			},
			Spec: &types.VmfsDatastoreExpandSpec{
				VmfsDatastoreSpec: types.VmfsDatastoreSpec{DiskUuid: disk.Uuid},
				Partition: types.HostDiskPartitionSpec{PartitionFormat: "gpt", TotalSectors: disk.Capacity.Block,
					Partition: []types.HostDiskPartitionAttributes{{Partition: 1, StartSector: vmfsStart, EndSector: last, Type: "vmfs", Guid: "AA31E02A400F11DB9590000C2911D1B8"}}},
				Extent: types.HostScsiDiskPartition{DiskName: disk.CanonicalName, Partition: 1},
			},
		}}
	}
	body.Res = res
	return body
}

func (d *datastoreSystem) ExpandVmfsDatastore(ctx *simulator.Context, req *types.ExpandVmfsDatastore) soap.HasFault {
	body := &methods.ExpandVmfsDatastoreBody{}
	ds, vol, disk, fault := d.expandTarget(ctx, req.Datastore)
	if fault != nil {
		body.Fault_ = fault
		return body
	}
	bad := func(prop, msg string) soap.HasFault {
		body.Fault_ = simulator.Fault(msg, &types.InvalidArgument{InvalidProperty: prop})
		return body
	}
	spec := req.Spec
	switch {
	case spec.Extent.DiskName != vol.disk || spec.Extent.Partition != 1:
		return bad("spec.extent", "datastore "+ds.Name+" has one extent, partition 1 of "+vol.disk)
	case spec.Partition.TotalSectors != disk.Capacity.Block:
		return bad("spec.partition.totalSectors", "the spec does not lay out the disk as the host sees it: ask QueryVmfsDatastoreExpandOptions again (after a rescan)")
	case len(spec.Partition.Partition) != 1 || spec.Partition.Partition[0].Partition != 1 || spec.Partition.Partition[0].StartSector != vmfsStart:
		return bad("spec.partition.partition", "the spec must keep the extent's partition 1 where it starts")
	}
	end := spec.Partition.Partition[0].EndSector
	if end > disk.Capacity.Block-1 || end <= vol.endSector() {
		return bad("spec.partition.partition.endSector", "the new end of the extent must lie past its current end and within the disk")
	}
	d.kit.mu.Lock()
	grown := (end - vmfsStart + 1) * 512
	delta := grown - vol.capacity
	vol.capacity = grown
	d.kit.mu.Unlock()
	ctx.WithLock(ds, func() {
		ds.Summary.Capacity = grown
		ds.Summary.FreeSpace += delta
		if info, ok := ds.Info.(*types.VmfsDatastoreInfo); ok && info.Vmfs != nil {
			info.Vmfs.Capacity = grown
		}
	})
	ctx.Update(ds, []types.PropertyChange{{Name: "summary", Val: ds.Summary}, {Name: "info", Val: ds.Info}})
	body.Res = &types.ExpandVmfsDatastoreResponse{Returnval: ds.Self}
	return body
}
