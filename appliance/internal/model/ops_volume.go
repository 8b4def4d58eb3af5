package model

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// VolumeWWN derives a volume's NAA identifier (VPD page 0x83) from the system
// id and the volume id, so that every SVM's target reports the same one
// without coordination. Layout (32 hex digits, NAA type 6 "IEEE Registered
// Extended"), version 1:
//
//	"6" | company id: "0a" + 4 hex | vendor specific: 9 hex | extension: 16 hex
//	      `-- 13 hex digits of sha256("cairn-wwn/v1/" + system id) --'  volume id
//
// The company id's first octet 0x0a has the IEEE "local" bit set, so it never
// equals a vendor's assigned OUI; the volume id (unique in the system) fills
// the extension, and the system hash keeps two clusters apart.
func VolumeWWN(systemID, volumeID string) string {
	h := sha256.Sum256([]byte("cairn-wwn/v1/" + systemID))
	return "60a" + hex.EncodeToString(h[:])[:13] + volumeID
}

// faultDomain is the fault set of an SDS, or the SDS itself without one.
func faultDomain(x SDS) string {
	if x.FaultSetID != "" {
		return "fs/" + x.FaultSetID
	}
	return "sds/" + x.ID
}

// PoolCapacity summarises the devices of a pool as recorded in the model.
type PoolCapacity struct {
	Devices      int   `json:"devices"`
	SDSs         int   `json:"sdss"`
	FaultDomains int   `json:"fault_domains"`
	Raw          int64 `json:"raw"`    // sum of normal devices' capacity
	Usable       int64 `json:"usable"` // (raw - spare) / 2 copies
	ThickUsed    int64 `json:"thick_reserved"`
}

// PoolCapacityOf computes the capacity summary of a pool from etcd.
func (s *Store) PoolCapacityOf(ctx context.Context, p StoragePool) (PoolCapacity, error) {
	devs, _, err := listAt[Device](ctx, s, KindDevice)
	if err != nil {
		return PoolCapacity{}, err
	}
	sdss, _, err := listAt[SDS](ctx, s, KindSDS)
	if err != nil {
		return PoolCapacity{}, err
	}
	vols, _, err := listAt[Volume](ctx, s, KindVolume)
	if err != nil {
		return PoolCapacity{}, err
	}
	return ComputePoolCapacity(p, devs, sdss, vols), nil
}

// ComputePoolCapacity summarises a pool's devices in state normal: how many
// SDSs and fault domains they span, raw and usable capacity, and the thick
// reservations of its volumes.
func ComputePoolCapacity(p StoragePool, devs []Device, sdss []SDS, vols []Volume) PoolCapacity {
	var c PoolCapacity
	byID := map[string]SDS{}
	for _, x := range sdss {
		byID[x.ID] = x
	}
	sdsSeen, domains := map[string]bool{}, map[string]bool{}
	for _, d := range devs {
		x, ok := byID[d.SDSID]
		if d.PoolID != p.ID || d.State != DeviceNormal || !ok {
			continue
		}
		c.Devices++
		c.Raw += d.Capacity
		sdsSeen[x.ID] = true
		domains[faultDomain(x)] = true
	}
	c.SDSs, c.FaultDomains = len(sdsSeen), len(domains)
	c.Usable = c.Raw * int64(100-p.SparePercent) / 100 / 2
	for _, v := range vols {
		if v.PoolID == p.ID && !v.Thin {
			c.ThickUsed += v.Size
		}
	}
	return c
}

// checkSize enforces the allocation unit.
func checkSize(name string, size int64) error {
	if size <= 0 || size%AllocationUnit != 0 {
		return invalidField("size", "volume %q: size %d bytes is not a positive multiple of the allocation unit (%s = %d bytes); use whole GiB, e.g. %d for 8 GiB (cairnctl: --size 8GiB)", name, size, FormatSize(AllocationUnit), int64(AllocationUnit), int64(8*AllocationUnit))
	}
	return nil
}

// checkThick refuses to reserve more thick capacity than the pool has.
func checkThick(p StoragePool, c PoolCapacity, name string, grow int64) error {
	if c.ThickUsed+grow > c.Usable {
		return invalidf("pool %q cannot reserve %s more for thick volume %q: %s of %s usable (after spare, two copies) already reserved by thick volumes; make the volume thin or add devices",
			p.Name, FormatSize(grow), name, FormatSize(c.ThickUsed), FormatSize(c.Usable))
	}
	return nil
}

// VolumeSpec is the request to create a volume.
type VolumeSpec struct {
	Name string `json:"name"`
	Pool string `json:"pool"` // id or name
	Size int64  `json:"size"` // bytes, a positive multiple of AllocationUnit
	// Thin allocates chunks on first write (default true); thick reserves
	// the full size in the pool at creation.
	Thin *bool `json:"thin,omitempty"`
	// QoS limits (0: none; the pool's per-GiB rule, if any, applies).
	IOPSLimit      int64 `json:"iops_limit,omitempty"`
	BandwidthLimit int64 `json:"bandwidth_limit,omitempty"` // bytes/s
}

// CreateVolume creates a volume after checking its size, its name and that
// its pool can hold two copies on two fault domains.
func (s *Store) CreateVolume(ctx context.Context, spec VolumeSpec) (Volume, error) {
	if err := ValidateName(KindVolume, spec.Name); err != nil {
		return Volume{}, err
	}
	if err := checkSize(spec.Name, spec.Size); err != nil {
		return Volume{}, err
	}
	if err := checkQoS("volume "+spec.Name, spec.limits()); err != nil {
		return Volume{}, err
	}
	if spec.Pool == "" {
		return Volume{}, invalidf("volume %q: give its pool", spec.Name)
	}
	sys, err := s.GetSystem(ctx)
	if err != nil {
		return Volume{}, err
	}
	p, err := s.GetPool(ctx, spec.Pool)
	err = WithField(err, "pool")
	if err != nil {
		return Volume{}, err
	}
	if _, err := s.Lookup(ctx, KindVolume, spec.Name); err == nil {
		return Volume{}, existsf("volume %q already exists; choose another name", spec.Name)
	}
	c, err := s.PoolCapacityOf(ctx, p)
	if err != nil {
		return Volume{}, err
	}
	if c.Devices == 0 {
		return Volume{}, invalidf("pool %q has no devices; add devices on at least two SDSs in two fault sets: two copies need two", p.Name)
	}
	if c.FaultDomains < 2 {
		return Volume{}, invalidf("pool %q has devices on only %d fault domain; add devices on another SDS/fault set: two copies need two", p.Name, c.FaultDomains)
	}
	thin := spec.Thin == nil || *spec.Thin
	if !thin {
		if err := checkThick(p, c, spec.Name, spec.Size); err != nil {
			return Volume{}, err
		}
	}
	v := Volume{ID: NewID(), Name: spec.Name, PoolID: p.ID, Size: spec.Size, Thin: thin, Created: time.Now().UTC(), QoSLimits: spec.limits()}
	v.WWN = VolumeWWN(sys.ID, v.ID)
	v.Serial = v.ID
	return v, s.create(ctx, KindVolume, v.ID, v.Name, v, []clientv3.Cmp{exists(Key(KindPool, p.ID))})
}

func (s *Store) GetVolume(ctx context.Context, ref string) (Volume, error) {
	v, _, err := fetch[Volume](ctx, s, KindVolume, ref)
	return v, err
}

// ResizeVolume grows a volume (UpdateVolume with a size); shrinking would
// cut data off under a filesystem, so it is refused; the current size is a
// repeat that changes nothing.
func (s *Store) ResizeVolume(ctx context.Context, ref string, size int64) (Volume, error) {
	return s.UpdateVolume(ctx, ref, VolumeUpdate{Size: &size})
}

func (s *Store) updateVolume(ctx context.Context, v Volume, rev int64, cmps []clientv3.Cmp) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	key := Key(KindVolume, v.ID)
	cmps = append([]clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(key), "=", rev)}, cmps...)
	return s.txn(ctx, fmt.Sprintf("volume %q", v.Name), cmps, clientv3.OpPut(key, string(b)))
}

// DeleteVolume deletes an unmapped volume. (The SDSs free its chunks when
// they see it gone.)
func (s *Store) DeleteVolume(ctx context.Context, ref string) error {
	v, rev, err := fetch[Volume](ctx, s, KindVolume, ref)
	if err != nil {
		return err
	}
	if len(v.Mappings) > 0 {
		names := make([]string, 0, len(v.Mappings))
		for _, m := range v.Mappings {
			n := m.HostID
			if h, err := s.GetHost(ctx, m.HostID); err == nil {
				n = h.Name
			}
			names = append(names, n)
		}
		return inUsef("volume %q is mapped to %s; unmap it first (`cairnctl volume unmap %s --host HOST`)", v.Name, nameList(names), v.Name)
	}
	return s.deleteObj(ctx, KindVolume, v.ID, v.Name, rev, nil)
}

// MapSpec is the request to map a volume to a host.
type MapSpec struct {
	Host     string `json:"host"` // id or name
	ReadOnly bool   `json:"read_only,omitempty"`
	// QoS limits on this host only (0: none). Mapping an already mapped
	// host again changes them.
	IOPSLimit      int64 `json:"iops_limit,omitempty"`
	BandwidthLimit int64 `json:"bandwidth_limit,omitempty"` // bytes/s
}

// MapVolume exposes a volume to a known host.
func (s *Store) MapVolume(ctx context.Context, ref string, spec MapSpec) (Volume, error) {
	if spec.Host == "" {
		return Volume{}, invalidf("map: give the host (name or id)")
	}
	v, rev, err := fetch[Volume](ctx, s, KindVolume, ref)
	if err != nil {
		return v, err
	}
	h, err := s.GetHost(ctx, spec.Host)
	err = WithField(err, "host")
	if err != nil {
		return v, err
	}
	if err := checkQoS(fmt.Sprintf("mapping of volume %q to host %q", v.Name, h.Name), spec.limits()); err != nil {
		return v, err
	}
	for i, m := range v.Mappings {
		if m.HostID != h.ID {
			continue
		}
		if m.ReadOnly != spec.ReadOnly {
			return v, WithField(&opError{ErrConflict, fmt.Sprintf("volume %q is already mapped to host %q with read_only=%t; unmap it first to change that", v.Name, h.Name, m.ReadOnly)}, "read_only")
		}
		// Mapping again changes the mapping's QoS limits (live), or
		// nothing: a repeat is harmless.
		if m.QoSLimits == spec.limits() {
			return v, nil
		}
		nv := v
		nv.Mappings = append([]Mapping(nil), v.Mappings...)
		nv.Mappings[i].QoSLimits = spec.limits()
		if err := s.updateVolume(ctx, nv, rev, nil); err != nil {
			return v, err
		}
		return nv, nil
	}
	lun, err := s.lunFor(ctx, v)
	if err != nil {
		return v, err
	}
	nv := v
	nv.Mappings = append(append([]Mapping(nil), v.Mappings...), Mapping{HostID: h.ID, ReadOnly: spec.ReadOnly, LUN: lun, QoSLimits: spec.limits()})
	if err := s.updateVolume(ctx, nv, rev, []clientv3.Cmp{exists(Key(KindHost, h.ID))}); err != nil {
		return v, err
	}
	return nv, nil
}

// UnmapVolume removes a volume's mapping to a host.
func (s *Store) UnmapVolume(ctx context.Context, ref, hostRef string) (Volume, error) {
	if hostRef == "" {
		return Volume{}, invalidf("unmap: give the host (name or id)")
	}
	v, rev, err := fetch[Volume](ctx, s, KindVolume, ref)
	if err != nil {
		return v, err
	}
	h, err := s.GetHost(ctx, hostRef)
	err = WithField(err, "host")
	if err != nil {
		return v, err
	}
	nv := v
	nv.Mappings = nil
	for _, m := range v.Mappings {
		if m.HostID != h.ID {
			nv.Mappings = append(nv.Mappings, m)
		}
	}
	if len(nv.Mappings) == len(v.Mappings) {
		return v, nil // a repeat: not mapped
	}
	if err := s.updateVolume(ctx, nv, rev, nil); err != nil {
		return v, err
	}
	return nv, nil
}

// lunFor returns the LUN number of a volume: the one it already has if it
// is mapped, else the lowest number no other mapped volume uses.
func (s *Store) lunFor(ctx context.Context, v Volume) (int, error) {
	if len(v.Mappings) > 0 {
		return v.Mappings[0].LUN, nil
	}
	vols, err := List[Volume](ctx, s, KindVolume)
	if err != nil {
		return 0, err
	}
	used := map[int]bool{}
	for _, o := range vols {
		if o.ID != v.ID && len(o.Mappings) > 0 {
			used[o.Mappings[0].LUN] = true
		}
	}
	lun := 0
	for used[lun] {
		lun++
	}
	return lun, nil
}
