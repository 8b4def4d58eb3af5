package model

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"regexp"
	"strconv"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Bootstrap creates the System object if it is absent and returns it;
// created is false when the system already existed (then name is ignored).
func (s *Store) Bootstrap(ctx context.Context, name string) (sys System, created bool, err error) {
	if name == "" {
		return sys, false, invalidf("system name is required")
	}
	if !nameRe.MatchString(name) {
		return sys, false, invalidf("system name %q: use 1-64 characters from A-Z a-z 0-9 . _ -, starting with a letter or digit", name)
	}
	sys = System{ID: NewID(), Name: name, Created: time.Now().UTC()}
	b, _ := json.Marshal(sys)
	r, err := s.C.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(SystemKey), "=", 0)).
		Then(clientv3.OpPut(SystemKey, string(b))).Else(clientv3.OpGet(SystemKey)).Commit()
	if err != nil {
		return System{}, false, unavailable(err)
	}
	if r.Succeeded {
		return sys, true, nil
	}
	kvs := r.Responses[0].GetResponseRange().Kvs
	if len(kvs) == 0 {
		return System{}, false, &opError{ErrConflict, "bootstrap raced with a removal of the system object; retry"}
	}
	var old System
	if err := json.Unmarshal(kvs[0].Value, &old); err != nil {
		return System{}, false, fmt.Errorf("decode %s: %w", SystemKey, err)
	}
	return old, false, nil
}

// GetSystem returns the System object, or ErrNotFound before bootstrap.
func (s *Store) GetSystem(ctx context.Context) (System, error) {
	var sys System
	_, err := s.Get(ctx, SystemKey, &sys)
	if errors.Is(err, ErrNotFound) {
		return sys, notFoundf("the system is not bootstrapped yet; run `cairnctl system bootstrap --name NAME` (POST /api/v1/system/bootstrap)")
	}
	return sys, unavailable(err)
}

// PDSpec is the request to create a protection domain.
type PDSpec struct {
	Name string `json:"name"`
}

func (s *Store) CreatePD(ctx context.Context, spec PDSpec) (ProtectionDomain, error) {
	if err := ValidateName(KindPD, spec.Name); err != nil {
		return ProtectionDomain{}, err
	}
	pd := ProtectionDomain{ID: NewID(), Name: spec.Name}
	return pd, s.create(ctx, KindPD, pd.ID, pd.Name, pd, nil)
}

func (s *Store) GetPD(ctx context.Context, ref string) (ProtectionDomain, error) {
	pd, _, err := fetch[ProtectionDomain](ctx, s, KindPD, ref)
	return pd, err
}

// DeletePD refuses while fault sets, SDSs or pools belong to the domain.
func (s *Store) DeletePD(ctx context.Context, ref string) error {
	pd, rev, err := fetch[ProtectionDomain](ctx, s, KindPD, ref)
	if err != nil {
		return err
	}
	fss, r1, err := listAt[FaultSet](ctx, s, KindFaultSet)
	if err != nil {
		return err
	}
	sdss, r2, err := listAt[SDS](ctx, s, KindSDS)
	if err != nil {
		return err
	}
	pools, r3, err := listAt[StoragePool](ctx, s, KindPool)
	if err != nil {
		return err
	}
	var users []string
	for _, f := range fss {
		if f.PDID == pd.ID {
			users = append(users, "fault set "+f.Name)
		}
	}
	for _, x := range sdss {
		if x.PDID == pd.ID {
			users = append(users, "SDS "+x.Name)
		}
	}
	for _, p := range pools {
		if p.PDID == pd.ID {
			users = append(users, "pool "+p.Name)
		}
	}
	if len(users) > 0 {
		return inUsef("protection domain %q still holds %s; remove them first", pd.Name, nameList(users))
	}
	return s.deleteObj(ctx, KindPD, pd.ID, pd.Name, rev, []clientv3.Cmp{
		unchangedSince(KindFaultSet, r1), unchangedSince(KindSDS, r2), unchangedSince(KindPool, r3)})
}

// FaultSetSpec is the request to create a fault set.
type FaultSetSpec struct {
	Name string `json:"name"`
	PD   string `json:"protection_domain"` // id or name
}

func (s *Store) CreateFaultSet(ctx context.Context, spec FaultSetSpec) (FaultSet, error) {
	if err := ValidateName(KindFaultSet, spec.Name); err != nil {
		return FaultSet{}, err
	}
	if spec.PD == "" {
		return FaultSet{}, invalidf("fault set %q: give its protection_domain", spec.Name)
	}
	pd, err := s.GetPD(ctx, spec.PD)
	if err != nil {
		return FaultSet{}, WithField(err, "protection_domain")
	}
	fs := FaultSet{ID: NewID(), Name: spec.Name, PDID: pd.ID}
	return fs, s.create(ctx, KindFaultSet, fs.ID, fs.Name, fs, []clientv3.Cmp{exists(Key(KindPD, pd.ID))})
}

func (s *Store) GetFaultSet(ctx context.Context, ref string) (FaultSet, error) {
	fs, _, err := fetch[FaultSet](ctx, s, KindFaultSet, ref)
	return fs, err
}

// DeleteFaultSet refuses while SDSs belong to the fault set.
func (s *Store) DeleteFaultSet(ctx context.Context, ref string) error {
	fs, rev, err := fetch[FaultSet](ctx, s, KindFaultSet, ref)
	if err != nil {
		return err
	}
	sdss, r, err := listAt[SDS](ctx, s, KindSDS)
	if err != nil {
		return err
	}
	var users []string
	for _, x := range sdss {
		if x.FaultSetID == fs.ID {
			users = append(users, x.Name)
		}
	}
	if len(users) > 0 {
		return inUsef("fault set %q still holds SDS %s; remove them first", fs.Name, nameList(users))
	}
	return s.deleteObj(ctx, KindFaultSet, fs.ID, fs.Name, rev, []clientv3.Cmp{unchangedSince(KindSDS, r)})
}

// SDSSpec is the request to add an SDS.
type SDSSpec struct {
	Name     string `json:"name"`
	PD       string `json:"protection_domain"`   // id or name
	FaultSet string `json:"fault_set,omitempty"` // id or name; empty: its own fault set
	Address  string `json:"address"`             // data-path host:port
}

func (s *Store) CreateSDS(ctx context.Context, spec SDSSpec) (SDS, error) {
	if err := ValidateName(KindSDS, spec.Name); err != nil {
		return SDS{}, err
	}
	host, port, err := net.SplitHostPort(spec.Address)
	if p, perr := strconv.Atoi(port); err != nil || host == "" || perr != nil || p < 1 || p > 65535 {
		return SDS{}, invalidf("SDS %q: address %q must be host:port of its data path, e.g. 10.0.0.11:7070", spec.Name, spec.Address)
	}
	if spec.PD == "" {
		return SDS{}, invalidf("SDS %q: give its protection_domain", spec.Name)
	}
	pd, err := s.GetPD(ctx, spec.PD)
	if err != nil {
		return SDS{}, WithField(err, "protection_domain")
	}
	cmps := []clientv3.Cmp{exists(Key(KindPD, pd.ID))}
	x := SDS{ID: NewID(), Name: spec.Name, PDID: pd.ID, Address: spec.Address, State: SDSNormal}
	if spec.FaultSet != "" {
		fs, err := s.GetFaultSet(ctx, spec.FaultSet)
		if err != nil {
			return SDS{}, WithField(err, "fault_set")
		}
		if fs.PDID != pd.ID {
			return SDS{}, invalidf("SDS %q: fault set %q belongs to another protection domain; pick a fault set of %q", spec.Name, fs.Name, pd.Name)
		}
		x.FaultSetID = fs.ID
		cmps = append(cmps, exists(Key(KindFaultSet, fs.ID)))
	}
	all, r, err := listAt[SDS](ctx, s, KindSDS)
	if err != nil {
		return SDS{}, err
	}
	for _, o := range all {
		if o.Address == x.Address {
			return SDS{}, existsf("SDS %q already uses address %s; each SDS needs its own data-path address", o.Name, x.Address)
		}
	}
	cmps = append(cmps, unchangedSince(KindSDS, r))
	return x, s.create(ctx, KindSDS, x.ID, x.Name, x, cmps)
}

func (s *Store) GetSDS(ctx context.Context, ref string) (SDS, error) {
	x, _, err := fetch[SDS](ctx, s, KindSDS, ref)
	return x, err
}

// DeleteSDS refuses while devices are on the SDS.
func (s *Store) DeleteSDS(ctx context.Context, ref string) error {
	x, rev, err := fetch[SDS](ctx, s, KindSDS, ref)
	if err != nil {
		return err
	}
	devs, r, err := listAt[Device](ctx, s, KindDevice)
	if err != nil {
		return err
	}
	var users []string
	for _, d := range devs {
		if d.SDSID == x.ID {
			users = append(users, d.Name)
		}
	}
	if len(users) > 0 {
		return inUsef("SDS %q still has devices %s; remove them first (`cairnctl device rm`)", x.Name, nameList(users))
	}
	return s.deleteObj(ctx, KindSDS, x.ID, x.Name, rev, []clientv3.Cmp{unchangedSince(KindDevice, r)})
}

// PoolSpec is the request to create a storage pool.
type PoolSpec struct {
	Name string `json:"name"`
	PD   string `json:"protection_domain"` // id or name
	// SparePercent of the raw capacity kept free for rebuilds; default 10.
	// It should be at least the share of the largest fault set.
	SparePercent *int `json:"spare_percent,omitempty"`
	PGCount      int  `json:"pg_count,omitempty"` // default DefaultPGCount
	// QoS rule for the pool's volumes (PoolQoS; 0: off).
	QoSIOPSPerGiB      int64 `json:"qos_iops_per_gib,omitempty"`
	QoSBandwidthPerGiB int64 `json:"qos_bandwidth_per_gib,omitempty"`
}

// DefaultSparePercent is used when a pool is created without one.
const DefaultSparePercent = 10

func (s *Store) CreatePool(ctx context.Context, spec PoolSpec) (StoragePool, error) {
	if err := ValidateName(KindPool, spec.Name); err != nil {
		return StoragePool{}, err
	}
	spare := DefaultSparePercent
	if spec.SparePercent != nil {
		spare = *spec.SparePercent
	}
	if spare < 0 || spare > 90 {
		return StoragePool{}, invalidf("pool %q: spare_percent %d must be between 0 and 90 (at least the share of the largest fault set)", spec.Name, spare)
	}
	pgs := spec.PGCount
	if pgs == 0 {
		pgs = DefaultPGCount
	}
	if pgs < 1 || pgs > 65536 {
		return StoragePool{}, invalidf("pool %q: pg_count %d must be between 1 and 65536 (default %d)", spec.Name, pgs, DefaultPGCount)
	}
	if err := checkPoolQoS(spec.Name, spec.qos()); err != nil {
		return StoragePool{}, err
	}
	if spec.PD == "" {
		return StoragePool{}, invalidf("pool %q: give its protection_domain", spec.Name)
	}
	pd, err := s.GetPD(ctx, spec.PD)
	if err != nil {
		return StoragePool{}, WithField(err, "protection_domain")
	}
	p := StoragePool{ID: NewID(), Name: spec.Name, PDID: pd.ID, SparePercent: spare, PGCount: pgs, ZeroPadding: true, PoolQoS: spec.qos()}
	return p, s.create(ctx, KindPool, p.ID, p.Name, p, []clientv3.Cmp{exists(Key(KindPD, pd.ID))})
}

func (s *Store) GetPool(ctx context.Context, ref string) (StoragePool, error) {
	p, _, err := fetch[StoragePool](ctx, s, KindPool, ref)
	return p, err
}

// DeletePool refuses while volumes or devices are in the pool; it removes
// the pool's placement map with it.
func (s *Store) DeletePool(ctx context.Context, ref string) error {
	p, rev, err := fetch[StoragePool](ctx, s, KindPool, ref)
	if err != nil {
		return err
	}
	vols, r1, err := listAt[Volume](ctx, s, KindVolume)
	if err != nil {
		return err
	}
	devs, r2, err := listAt[Device](ctx, s, KindDevice)
	if err != nil {
		return err
	}
	var vn, dn []string
	for _, v := range vols {
		if v.PoolID == p.ID {
			vn = append(vn, v.Name)
		}
	}
	for _, d := range devs {
		if d.PoolID == p.ID {
			dn = append(dn, d.Name)
		}
	}
	if len(vn) > 0 {
		return inUsef("pool %q still holds %s (%s); remove the volumes first", p.Name, plural(len(vn), "volume"), nameList(vn))
	}
	if len(dn) > 0 {
		return inUsef("pool %q still has %s (%s); remove the devices first", p.Name, plural(len(dn), "device"), nameList(dn))
	}
	return s.deleteObj(ctx, KindPool, p.ID, p.Name, rev,
		[]clientv3.Cmp{unchangedSince(KindVolume, r1), unchangedSince(KindDevice, r2)},
		clientv3.OpDelete(MapKey(p.ID)))
}

// DeviceSpec is the request to add a device to an SDS and a pool.
type DeviceSpec struct {
	Name string `json:"name,omitempty"` // default: <sds>-<base name of path>
	SDS  string `json:"sds"`            // id or name
	Pool string `json:"pool"`           // id or name
	Path string `json:"path"`           // stable path on the SDS
	// Force accepts an unstable kernel name (/dev/sdX ...).
	Force bool `json:"force,omitempty"`
}

// unstableDevRe matches kernel device names that change across reboots.
var unstableDevRe = regexp.MustCompile(`^/dev/(sd[a-z]+|vd[a-z]+|xvd[a-z]+|hd[a-z]+|nvme[0-9]+n[0-9]+)(p?[0-9]+)?$`)

// CheckDevicePath refuses relative or unclean paths, and kernel names that
// change across reboots (/dev/sdX, /dev/vdX, /dev/nvmeXnY...) unless force.
// The error wraps ErrInvalid.
func CheckDevicePath(path string, force bool) error {
	if !filepath.IsAbs(path) || filepath.Clean(path) != path {
		return invalidf("device path %q must be absolute and clean, e.g. /dev/disk/by-id/...", path)
	}
	if unstableDevRe.MatchString(path) && !force {
		return invalidf("device path %s is a kernel name: use /dev/disk/by-id/... or /dev/disk/by-path/... : /dev/sdX names change across reboots (force=true accepts it anyway)", path)
	}
	return nil
}

// PrepareFunc prepares a device on its SDS (checks that the path is free and
// holds no other cluster's data, writes the superblock) and returns its
// usable capacity. Its error text is shown to the user.
type PrepareFunc func(ctx context.Context, sds SDS, clusterID, deviceID, path string, force bool) (int64, error)

// DevicePlan is a device an admin adds, checked and named but not yet
// prepared on its SDS: what a device-add job carries from the request to
// the commit (gateway jobs.go), so that a job taken over by another gateway
// prepares and records the same device.
type DevicePlan struct {
	Device    Device `json:"device"`     // ID, Name, SDSID, PoolID, Path; State normal
	SDSName   string `json:"sds_name"`   // for messages
	ClusterID string `json:"cluster_id"` // written into the device's superblock
	Force     bool   `json:"force,omitempty"`
}

// AddDevice validates spec, asks prepare to set the device up on its SDS,
// and only on success records it with state normal and its capacity:
// PlanDevice, prepare, CommitDevice in one call.
func (s *Store) AddDevice(ctx context.Context, spec DeviceSpec, prepare PrepareFunc) (Device, error) {
	plan, err := s.PlanDevice(ctx, spec)
	if err != nil {
		return Device{}, err
	}
	if prepare == nil {
		return Device{}, &opError{ErrUnavailable, "no SDS device prober configured in this gateway; devices cannot be added"}
	}
	x, err := s.GetSDS(ctx, plan.Device.SDSID)
	if err != nil {
		return Device{}, WithField(err, "sds")
	}
	capacity, err := prepare(ctx, x, plan.ClusterID, plan.Device.ID, plan.Device.Path, plan.Force)
	if err != nil {
		return Device{}, PrepareError(plan, err)
	}
	return s.CommitDevice(ctx, plan, capacity)
}

// PlanDevice checks a request to add a device (path, SDS, pool, name, no
// duplicate) and picks the new device's id and name. Nothing is written.
func (s *Store) PlanDevice(ctx context.Context, spec DeviceSpec) (DevicePlan, error) {
	if spec.Path == "" {
		return DevicePlan{}, invalidf("device: give its path on the SDS, e.g. /dev/disk/by-id/wwn-0x5000c500a1b2c3d4")
	}
	if err := CheckDevicePath(spec.Path, spec.Force); err != nil {
		return DevicePlan{}, err
	}
	if spec.SDS == "" || spec.Pool == "" {
		return DevicePlan{}, invalidf("device %s: give its sds and its pool", spec.Path)
	}
	sys, err := s.GetSystem(ctx)
	if err != nil {
		return DevicePlan{}, err
	}
	x, err := s.GetSDS(ctx, spec.SDS)
	if err != nil {
		return DevicePlan{}, WithField(err, "sds")
	}
	p, err := s.GetPool(ctx, spec.Pool)
	if err != nil {
		return DevicePlan{}, WithField(err, "pool")
	}
	if p.PDID != x.PDID {
		return DevicePlan{}, invalidf("device %s: pool %q and SDS %q are in different protection domains; pick a pool of the SDS's domain", spec.Path, p.Name, x.Name)
	}
	name := spec.Name
	if name == "" {
		name = x.Name + "-" + filepath.Base(spec.Path)
		if len(name) > 64 {
			name = name[:64]
		}
	}
	if err := ValidateName(KindDevice, name); err != nil {
		return DevicePlan{}, fmt.Errorf("%w (give the device a name)", err)
	}
	d := Device{ID: NewID(), Name: name, SDSID: x.ID, PoolID: p.ID, Path: spec.Path, State: DeviceNormal}
	devs, _, err := listAt[Device](ctx, s, KindDevice)
	if err != nil {
		return DevicePlan{}, err
	}
	if err := deviceClash(devs, d, x.Name); err != nil {
		return DevicePlan{}, err
	}
	return DevicePlan{Device: d, SDSName: x.Name, ClusterID: sys.ID, Force: spec.Force}, nil
}

// deviceClash refuses d when the SDS already has its path or the name is
// taken by another device.
func deviceClash(devs []Device, d Device, sdsName string) error {
	for _, o := range devs {
		if o.ID == d.ID {
			continue
		}
		if o.SDSID == d.SDSID && o.Path == d.Path {
			return existsf("SDS %q already has device %q at %s; a path can be added once", sdsName, o.Name, o.Path)
		}
		if o.Name == d.Name {
			return existsf("device %q already exists; choose another name", d.Name)
		}
	}
	return nil
}

// PrepareError turns the SDS's refusal of a planned device into the
// model's error: the SDS's text goes to the user; its sentinel (if any)
// picks the kind, a timeout or network error is unavailable, anything else
// is invalid.
func PrepareError(plan DevicePlan, err error) error {
	kind := ErrInvalid
	for _, k := range []error{ErrInUse, ErrExists, ErrUnavailable, ErrNotFound, ErrConflict} {
		if errors.Is(err, k) {
			kind = k
			break
		}
	}
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) {
		kind = ErrUnavailable
	}
	return &opError{kind, fmt.Sprintf("SDS %q refused device %s: %v", plan.SDSName, plan.Device.Path, err)}
}

// CommitDevice records a planned device its SDS prepared, with state normal
// and capacity, after checking again that its SDS and pool still exist and
// nothing took its path or name meanwhile. A plan already recorded (a
// repeated commit) returns the device.
func (s *Store) CommitDevice(ctx context.Context, plan DevicePlan, capacity int64) (Device, error) {
	if capacity < ChunkSize {
		return Device{}, invalidf("SDS %q: device %s holds %d bytes; a device needs at least one %s chunk", plan.SDSName, plan.Device.Path, capacity, FormatSize(ChunkSize))
	}
	// Devices added at the same time (a deployment adds every disk of a
	// host) move the device list between the check and the transaction:
	// check again, a few times, before calling it a conflict.
	for i := 0; ; i++ {
		d, err := s.commitDevice(ctx, plan, capacity)
		if !errors.Is(err, ErrConflict) || i == 4 || ctx.Err() != nil {
			return d, err
		}
	}
}

func (s *Store) commitDevice(ctx context.Context, plan DevicePlan, capacity int64) (Device, error) {
	d := plan.Device
	devs, r, err := listAt[Device](ctx, s, KindDevice)
	if err != nil {
		return Device{}, err
	}
	for _, o := range devs {
		if o.ID == d.ID {
			return o, nil
		}
	}
	if err := deviceClash(devs, d, plan.SDSName); err != nil {
		return Device{}, err
	}
	d.Capacity = capacity
	return d, s.create(ctx, KindDevice, d.ID, d.Name, d, []clientv3.Cmp{
		exists(Key(KindSDS, d.SDSID)), exists(Key(KindPool, d.PoolID)), unchangedSince(KindDevice, r)})
}

func (s *Store) GetDevice(ctx context.Context, ref string) (Device, error) {
	d, _, err := fetch[Device](ctx, s, KindDevice, ref)
	return d, err
}

// DeleteDevice removes a device record. Its data would be lost, and moving
// chunks off a device (evacuation) is the MDM's job, so it is refused while
// the device's pool holds volumes.
func (s *Store) DeleteDevice(ctx context.Context, ref string) error {
	d, rev, err := fetch[Device](ctx, s, KindDevice, ref)
	if err != nil {
		return err
	}
	vols, r, err := listAt[Volume](ctx, s, KindVolume)
	if err != nil {
		return err
	}
	var vn []string
	for _, v := range vols {
		if v.PoolID == d.PoolID {
			vn = append(vn, v.Name)
		}
	}
	if len(vn) > 0 {
		return inUsef("device %q is in a pool holding %s (%s); remove the volumes first (device evacuation is not supported yet)", d.Name, plural(len(vn), "volume"), nameList(vn))
	}
	return s.deleteObj(ctx, KindDevice, d.ID, d.Name, rev, []clientv3.Cmp{unchangedSince(KindVolume, r)})
}

// RemoveSDS starts the graceful removal of an SDS: its state becomes
// removing, the MDM leader moves every copy it holds to other SDSs through
// the rebalance machinery (two copies all along) and deletes its devices
// and then the SDS once no placement map references them. Refused when the
// rest of its pools could not hold their data on two fault domains. A
// repeat while removing returns the SDS unchanged.
func (s *Store) RemoveSDS(ctx context.Context, ref string) (SDS, error) {
	x, rev, err := fetch[SDS](ctx, s, KindSDS, ref)
	if err != nil {
		return x, err
	}
	switch x.State {
	case SDSRemoving:
		return x, nil
	case SDSNormal:
	default:
		return x, &opError{ErrConflict, fmt.Sprintf("SDS %q is in %s; exit maintenance first (`cairnctl sds maintenance exit %s`), then remove it", x.Name, x.State, x.Name)}
	}
	cmps, err := s.checkDrain(ctx, func(d Device) bool { return d.SDSID == x.ID }, func(o SDS) bool { return o.ID == x.ID }, "SDS "+x.Name)
	if err != nil {
		return x, err
	}
	x.State = SDSRemoving
	return x, s.writeGuarded(ctx, KindSDS, x.ID, x.Name, rev, x, cmps)
}

// writeGuarded writes an object unless it changed since rev or cmps fail.
func (s *Store) writeGuarded(ctx context.Context, kind, id, name string, rev int64, v any, cmps []clientv3.Cmp) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	key := Key(kind, id)
	cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(key), "=", rev))
	return s.txn(ctx, fmt.Sprintf("%s %q", kindNoun[kind], name), cmps, clientv3.OpPut(key, string(b)))
}

// RemoveDevice starts the graceful removal of a device (state removing);
// see RemoveSDS.
func (s *Store) RemoveDevice(ctx context.Context, ref string) (Device, error) {
	d, rev, err := fetch[Device](ctx, s, KindDevice, ref)
	if err != nil {
		return d, err
	}
	if d.State == DeviceRemoving {
		return d, nil
	}
	cmps, err := s.checkDrain(ctx, func(o Device) bool { return o.ID == d.ID }, func(SDS) bool { return false }, "device "+d.Name)
	if err != nil {
		return d, err
	}
	d.State = DeviceRemoving
	return d, s.writeGuarded(ctx, KindDevice, d.ID, d.Name, rev, d, cmps)
}

// checkDrain refuses a removal after which a pool holding volumes would
// span fewer than two fault domains, or hold less usable capacity than its
// thick reservations and the data its devices hold now. leaving says which
// devices go (SDSs: sdsLeaving). It returns the guards of what it read.
func (s *Store) checkDrain(ctx context.Context, leaving func(Device) bool, sdsLeaving func(SDS) bool, what string) ([]clientv3.Cmp, error) {
	devs, r1, err := listAt[Device](ctx, s, KindDevice)
	if err != nil {
		return nil, err
	}
	sdss, r2, err := listAt[SDS](ctx, s, KindSDS)
	if err != nil {
		return nil, err
	}
	vols, r3, err := listAt[Volume](ctx, s, KindVolume)
	if err != nil {
		return nil, err
	}
	pools, _, err := listAt[StoragePool](ctx, s, KindPool)
	if err != nil {
		return nil, err
	}
	stats, err := ListPrefix[SDSStats](ctx, s, SDSStatsPrefix)
	if err != nil {
		return nil, unavailable(err)
	}
	used := map[string]int64{} // raw bytes by device id
	for _, st := range stats {
		for id, u := range st.Devices {
			used[id] = u.Used
		}
	}
	var remain []Device
	for _, d := range devs {
		if !leaving(d) {
			remain = append(remain, d)
		}
	}
	var staying []SDS
	for _, x := range sdss {
		if !sdsLeaving(x) {
			staying = append(staying, x)
		}
	}
	for _, p := range pools {
		affected, hasVols := false, false
		var rawUsed int64
		for _, d := range devs {
			if d.PoolID == p.ID {
				rawUsed += used[d.ID]
				affected = affected || leaving(d)
			}
		}
		for _, v := range vols {
			hasVols = hasVols || v.PoolID == p.ID
		}
		if !affected || !hasVols {
			continue
		}
		c := ComputePoolCapacity(p, remain, staying, vols)
		if c.FaultDomains < 2 {
			return nil, inUsef("removing %s would leave pool %q (which holds volumes) on %d fault domain; add devices on another SDS/fault set first: two copies need two", what, p.Name, c.FaultDomains)
		}
		if c.ThickUsed > c.Usable || rawUsed/2 > c.Usable {
			return nil, inUsef("removing %s would leave pool %q %s usable, less than its data (%s) or thick reservations (%s); add devices or remove volumes first",
				what, p.Name, FormatSize(c.Usable), FormatSize(rawUsed/2), FormatSize(c.ThickUsed))
		}
	}
	return []clientv3.Cmp{unchangedSince(KindDevice, r1), unchangedSince(KindSDS, r2), unchangedSince(KindVolume, r3)}, nil
}
