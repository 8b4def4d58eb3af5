// Package gatewayfake is an in-memory Cairn gateway for tests and demos: it
// implements gateway.API, tells simulated ESXi hosts which LUNs they see
// (vcsimkit.LUNSource) and follows simulated SVM power state
// (vcsimkit.GuestHooks), so engine tests run without real daemons.
//
// It keeps the gateway's rules that the engines rely on (names unique per
// kind, sizes in GiB, SDS maintenance states, health degraded while an SDS
// is away or resyncing); it is not a storage system.
package gatewayfake

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cairn-storage/cairn/appliance/contract"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/gateway"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/vcsimkit"
)

// Array is the fake cluster. The zero value is not usable; call New.
type Array struct {
	// ResyncTime is how long health stays "resyncing" after an SDS leaves
	// maintenance or comes back.
	ResyncTime time.Duration

	// AdminPassword is what the deployer set with the bootstrap token.
	AdminPassword string
	// RebalanceGroups is how many placement groups start moving when a
	// device joins a pool that holds volumes; each System call sees one
	// more of them done (default 4).
	RebalanceGroups int
	// DrainSteps is how many GetJob reads an SDS drain takes (default 3).
	DrainSteps int

	// StatsInterval between statistics samples (load.go); default
	// DefaultStatsInterval, as the gateway.
	StatsInterval time.Duration

	// DrainTime is how long a device drain (RemoveDevice) takes: its job
	// moves DrainCopies copies evenly over it, then deletes the device.
	DrainTime time.Duration

	// WithoutPKI makes the system one whose daemons run without
	// certificates: it has no CA, and refuses join tokens (409).
	WithoutPKI bool

	mu             sync.Mutex
	svms           map[string]gateway.SVMRecord // PutSVM, by name
	bootstrapToken string                       // stored by the first gateway SVM's start
	tokenUsed      bool
	name           string // bootstrapped system name
	seq            int
	pds            []*gateway.ProtectionDomain
	fss            []*gateway.FaultSet
	sdss           []*gateway.SDS
	devs           []*gateway.Device
	pools          []*gateway.Pool
	vols           []*gateway.Volume
	hosts          []*gateway.Host
	down           map[string]bool // SDS id -> its SVM is powered off
	resync         time.Time       // health is "resyncing" until then
	calls          []string
	failNxt        map[string]error
	// Rebalance and drains (topology.go).
	rebalancing, rebalanceTotal int
	jobs                        map[string]*drain
	clock                       func() time.Time    // nil: time.Now (SetClock)
	load                        *load               // the synthetic workload and its statistics (load.go)
	users                       map[string]fakeUser // besides admin (users.go)
	audit                       []AuditEvent
	devJobs                     map[string]*deviceDrain        // device removals (GetJob serves both)
	bundles                     map[string]bool                // stored bundle versions -> broken (upgrade.go)
	uploaded                    map[string]gateway.Bundle      // bundles stored by UploadBundle, by version (upgrade.go)
	updaters                    map[string]*gateway.UpgradeSVM // by SVM name (upgrade.go)
	joinTokens                  map[string]*JoinTokenRecord    // by id (jointokens.go)
	joined                      map[string]bool                // SVM MoRef -> spent its join token
}

// DrainCopies is how many placement-group copies a drained device holds
// in the fake (the 0% mark of its job).
const DrainCopies = 128

// deviceDrain is a device-remove job of the fake.
type deviceDrain struct {
	job     gateway.Job
	device  string
	started time.Time
}

// New returns an empty array.
func New() *Array {
	return &Array{down: map[string]bool{}, failNxt: map[string]error{}, jobs: map[string]*drain{}, devJobs: map[string]*deviceDrain{},
		RebalanceGroups: 4, DrainSteps: 3, load: newLoad(time.Now())}
}

// Calls returns the mutating calls received, in order ("CreateSDS svm-1", ...).
func (a *Array) Calls() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.calls...)
}

// FailNext makes the next call of method (e.g. "AddDevice") fail with err.
func (a *Array) FailNext(method string, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.failNxt[method] = err
}

func (a *Array) call(method, arg string) error {
	if err, ok := a.failNxt[method]; ok {
		delete(a.failNxt, method)
		return err
	}
	a.calls = append(a.calls, method+" "+arg)
	return nil
}

func (a *Array) id(prefix string) string {
	a.seq++
	return fmt.Sprintf("%s-%d", prefix, a.seq)
}

func notFound(kind, key string) error {
	return fmt.Errorf("%s %q: %w", kind, key, gateway.ErrNotFound)
}

func conflict(kind, name string) error {
	return fmt.Errorf("%s %q already exists: pick another name", kind, name)
}

func find[T any](items []*T, key string, id, name func(*T) string) *T {
	for _, it := range items {
		if id(it) == key || name(it) == key {
			return it
		}
	}
	return nil
}

func pdID(p *gateway.ProtectionDomain) string   { return p.ID }
func pdName(p *gateway.ProtectionDomain) string { return p.Name }
func fsID(p *gateway.FaultSet) string           { return p.ID }
func fsName(p *gateway.FaultSet) string         { return p.Name }
func sdsID(p *gateway.SDS) string               { return p.ID }
func sdsName(p *gateway.SDS) string             { return p.Name }
func poolID(p *gateway.Pool) string             { return p.ID }
func poolName(p *gateway.Pool) string           { return p.Name }
func volID(p *gateway.Volume) string            { return p.ID }
func volName(p *gateway.Volume) string          { return p.Name }
func hostID(p *gateway.Host) string             { return p.ID }
func hostName(p *gateway.Host) string           { return p.Name }

// System reports health like the gateway: ok only when every SDS is up;
// here also not while one is in maintenance or copies resync (the real
// gateway reports those once the self-healing work lands).
func (a *Array) System(ctx context.Context) (*gateway.System, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	s := &gateway.System{Bootstrapped: a.name != ""}
	h := &s.Health
	h.Status = gateway.HealthOK
	h.SDSs = len(a.sdss)
	for _, d := range a.sdss {
		if a.down[d.ID] {
			h.SDSsDown = append(h.SDSsDown, d.Name)
			h.Messages = append(h.Messages, fmt.Sprintf("SDS %s is down", d.Name))
			h.Status = "degraded"
		} else {
			h.SDSsUp++
		}
		if d.State != gateway.SDSNormal {
			h.Messages = append(h.Messages, fmt.Sprintf("SDS %s is in %s", d.Name, d.State))
			h.Status = "degraded"
		}
	}
	if h.Status == gateway.HealthOK && time.Now().Before(a.resync) {
		h.Status = "degraded"
		h.Messages = append(h.Messages, "copies are being resynchronised")
	}
	if a.name == "" {
		h.Status = "not_bootstrapped"
	}
	for _, d := range a.devs {
		s.Capacity.Raw += d.Capacity
	}
	s.Rebuild = *a.rebuildLocked()
	a.rebalanceStep()
	return s, nil
}

func (a *Array) Bootstrap(ctx context.Context, name string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.name != "" && a.name != name {
		return fmt.Errorf("system is already bootstrapped as %q", a.name)
	}
	if a.name == name {
		return nil
	}
	if err := a.call("Bootstrap", name); err != nil {
		return err
	}
	a.name = name
	return nil
}

func (a *Array) ListVolumes(ctx context.Context) ([]gateway.Volume, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []gateway.Volume
	for _, v := range a.vols {
		c := *v
		c.Mappings = append([]gateway.Mapping(nil), v.Mappings...)
		out = append(out, c)
	}
	return out, nil
}

func (a *Array) ListHosts(ctx context.Context) ([]gateway.Host, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []gateway.Host
	for _, h := range a.hosts {
		out = append(out, *h)
	}
	return out, nil
}

func (a *Array) GetPD(ctx context.Context, key string) (*gateway.ProtectionDomain, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if p := find(a.pds, key, pdID, pdName); p != nil {
		c := *p
		return &c, nil
	}
	return nil, notFound("protection domain", key)
}

func (a *Array) CreatePD(ctx context.Context, name string) (*gateway.ProtectionDomain, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if find(a.pds, name, pdID, pdName) != nil {
		return nil, conflict("protection domain", name)
	}
	if a.name == "" {
		return nil, fmt.Errorf("the system is not bootstrapped: POST /api/v1/system/bootstrap first")
	}
	if err := a.call("CreatePD", name); err != nil {
		return nil, err
	}
	p := &gateway.ProtectionDomain{ID: a.id("pd"), Name: name}
	a.pds = append(a.pds, p)
	c := *p
	return &c, nil
}

func (a *Array) GetFaultSet(ctx context.Context, key string) (*gateway.FaultSet, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if p := find(a.fss, key, fsID, fsName); p != nil {
		c := *p
		return &c, nil
	}
	return nil, notFound("fault set", key)
}

func (a *Array) CreateFaultSet(ctx context.Context, name, pd string) (*gateway.FaultSet, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if find(a.fss, name, fsID, fsName) != nil {
		return nil, conflict("fault set", name)
	}
	p := find(a.pds, pd, pdID, pdName)
	if p == nil {
		return nil, notFound("protection domain", pd)
	}
	if err := a.call("CreateFaultSet", name); err != nil {
		return nil, err
	}
	f := &gateway.FaultSet{ID: a.id("fs"), Name: name, PDID: p.ID}
	a.fss = append(a.fss, f)
	c := *f
	return &c, nil
}

func (a *Array) GetSDS(ctx context.Context, key string) (*gateway.SDS, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if p := find(a.sdss, key, sdsID, sdsName); p != nil {
		c := *p
		c.Up = !a.down[c.ID]
		return &c, nil
	}
	return nil, notFound("sds", key)
}

func (a *Array) ListSDS(ctx context.Context) ([]gateway.SDS, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]gateway.SDS, 0, len(a.sdss))
	for _, s := range a.sdss {
		c := *s
		c.Up = !a.down[c.ID]
		out = append(out, c)
	}
	return out, nil
}

func (a *Array) CreateSDS(ctx context.Context, spec gateway.SDSSpec) (*gateway.SDS, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if find(a.sdss, spec.Name, sdsID, sdsName) != nil {
		return nil, conflict("sds", spec.Name)
	}
	p := find(a.pds, spec.PD, pdID, pdName)
	if p == nil {
		return nil, notFound("protection domain", spec.PD)
	}
	s := &gateway.SDS{Name: spec.Name, PDID: p.ID, Address: spec.Address, State: gateway.SDSNormal}
	if spec.FaultSet != "" {
		f := find(a.fss, spec.FaultSet, fsID, fsName)
		if f == nil {
			return nil, notFound("fault set", spec.FaultSet)
		}
		s.FaultSetID = f.ID
	}
	if err := a.call("CreateSDS", spec.Name); err != nil {
		return nil, err
	}
	s.ID = a.id("sds")
	a.sdss = append(a.sdss, s)
	c := *s
	return &c, nil
}

func (a *Array) ListDevices(ctx context.Context) ([]gateway.Device, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]gateway.Device, 0, len(a.devs))
	for _, d := range a.devs {
		out = append(out, *d)
	}
	return out, nil
}

func (a *Array) AddDevice(ctx context.Context, spec gateway.DeviceSpec) (*gateway.Device, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	s := find(a.sdss, spec.SDS, sdsID, sdsName)
	if s == nil {
		return nil, notFound("sds", spec.SDS)
	}
	p := find(a.pools, spec.Pool, poolID, poolName)
	if p == nil {
		return nil, notFound("pool", spec.Pool)
	}
	for _, d := range a.devs {
		if d.SDSID == s.ID && d.Path == spec.Path {
			return nil, fmt.Errorf("device %s is already in use on sds %s", spec.Path, s.Name)
		}
	}
	a.advance()
	if err := a.call("AddDevice", s.Name+":"+spec.Path); err != nil {
		return nil, err
	}
	d := &gateway.Device{ID: a.id("dev"), Name: spec.Name, SDSID: s.ID, PoolID: p.ID, Path: spec.Path, Capacity: 100 << 30, State: "normal"}
	a.devs = append(a.devs, d)
	a.startRebalance(p.ID)
	c := *d
	return &c, nil
}

func (a *Array) GetPool(ctx context.Context, key string) (*gateway.Pool, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if p := find(a.pools, key, poolID, poolName); p != nil {
		c := *p
		return &c, nil
	}
	return nil, notFound("pool", key)
}

func (a *Array) CreatePool(ctx context.Context, spec gateway.PoolSpec) (*gateway.Pool, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if find(a.pools, spec.Name, poolID, poolName) != nil {
		return nil, conflict("pool", spec.Name)
	}
	pd := find(a.pds, spec.PD, pdID, pdName)
	if pd == nil {
		return nil, notFound("protection domain", spec.PD)
	}
	if err := a.call("CreatePool", spec.Name); err != nil {
		return nil, err
	}
	p := &gateway.Pool{ID: a.id("pool"), Name: spec.Name, PDID: pd.ID, SparePercent: spec.SparePercent}
	a.pools = append(a.pools, p)
	c := *p
	return &c, nil
}

func (a *Array) GetVolume(ctx context.Context, key string) (*gateway.Volume, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if v := find(a.vols, key, volID, volName); v != nil {
		c := *v
		c.Mappings = append([]gateway.Mapping(nil), v.Mappings...)
		return &c, nil
	}
	return nil, notFound("volume", key)
}

func (a *Array) CreateVolume(ctx context.Context, spec gateway.VolumeSpec) (*gateway.Volume, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if find(a.vols, spec.Name, volID, volName) != nil {
		return nil, conflict("volume", spec.Name)
	}
	if spec.Size <= 0 || spec.Size%(1<<30) != 0 {
		return nil, fmt.Errorf("volume size %d: give a positive multiple of 1 GiB", spec.Size)
	}
	p := find(a.pools, spec.Pool, poolID, poolName)
	if p == nil {
		return nil, notFound("pool", spec.Pool)
	}
	a.advance()
	if err := a.call("CreateVolume", spec.Name); err != nil {
		return nil, err
	}
	a.seq++
	v := &gateway.Volume{ID: fmt.Sprintf("%016x", a.seq), Name: spec.Name, PoolID: p.ID, Size: spec.Size, Thin: spec.Thin,
		WWN: fmt.Sprintf("6c a1 7e 00%024x", a.seq)}
	v.WWN = strings.ReplaceAll(v.WWN, " ", "")
	a.vols = append(a.vols, v)
	c := *v
	return &c, nil
}

// UpdateVolume grows a volume or sets its QoS limits under the gateway's
// rules (sizes only grow; contract.CheckQoS); the array has no per-GiB
// pool rule, so the effective limits are the volume's own. Hosts see the
// new size at their next rescan (LUNsFor).
func (a *Array) UpdateVolume(ctx context.Context, key string, up gateway.VolumeUpdate) (*gateway.Volume, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	v := find(a.vols, key, volID, volName)
	if v == nil {
		return nil, notFound("volume", key)
	}
	iops, bw := v.IOPSLimit, v.BandwidthLimit
	if up.IOPSLimit != nil {
		iops = *up.IOPSLimit
	}
	if up.BandwidthLimit != nil {
		bw = *up.BandwidthLimit
	}
	size := v.Size
	if up.Size != nil {
		size = *up.Size
	}
	path := "/api/v1/volumes/" + v.ID
	refuse := func(msg string) error {
		return &gateway.StatusError{Method: "PATCH", Path: path, Status: 400, Message: msg}
	}
	if err := contract.CheckQoS(fmt.Sprintf("volume %q", v.Name), iops, bw); err != nil {
		return nil, refuse(err.Error())
	}
	if size < v.Size {
		return nil, refuse(fmt.Sprintf("volume %q is %d GiB; it can only grow (asked %d bytes): create a new volume and copy the data to shrink", v.Name, v.Size>>30, size))
	}
	if size%(1<<30) != 0 {
		return nil, refuse(fmt.Sprintf("volume %q: size %d is not a multiple of 1 GiB", v.Name, size))
	}
	if iops != v.IOPSLimit || bw != v.BandwidthLimit || size != v.Size {
		a.advance()
		if err := a.call("UpdateVolume", fmt.Sprintf("%s size=%d iops=%d bw=%d", v.Name, size, iops, bw)); err != nil {
			return nil, err
		}
	}
	v.Size, v.IOPSLimit, v.BandwidthLimit = size, iops, bw
	v.EffectiveIOPSLimit, v.EffectiveBandwidthLimit = iops, bw
	c := *v
	c.Mappings = append([]gateway.Mapping(nil), v.Mappings...)
	return &c, nil
}

// MapVolume maps read-write (MapVolumeAs).
func (a *Array) MapVolume(ctx context.Context, volume, host string) error {
	return a.MapVolumeAs(ctx, volume, host, false)
}

// volumeAndHost finds both ends of a mapping by id or name. Callers hold a.mu.
func (a *Array) volumeAndHost(volume, host string) (*gateway.Volume, *gateway.Host, error) {
	v := find(a.vols, volume, volID, volName)
	if v == nil {
		return nil, nil, notFound("volume", volume)
	}
	h := find(a.hosts, host, hostID, hostName)
	if h == nil {
		return nil, nil, notFound("host", host)
	}
	return v, h, nil
}

// MapVolumeAs keeps the gateway's rules: mapping again with the same
// access is a no-op, with the other access a 409 (unmap first).
func (a *Array) MapVolumeAs(ctx context.Context, volume, host string, readOnly bool) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	v, h, err := a.volumeAndHost(volume, host)
	if err != nil {
		return err
	}
	for _, m := range v.Mappings {
		if m.HostID == h.ID {
			if m.ReadOnly == readOnly {
				return nil
			}
			return &gateway.StatusError{Method: "POST", Path: "/api/v1/volumes/" + v.ID + "/map", Status: 409,
				Message: fmt.Sprintf("volume %q is mapped to host %q with read_only=%v: unmap it first", v.Name, h.Name, m.ReadOnly)}
		}
	}
	a.advance()
	if err := a.call("MapVolume", v.Name+"->"+h.Name); err != nil {
		return err
	}
	v.Mappings = append(v.Mappings, gateway.Mapping{HostID: h.ID, HostName: h.Name, ReadOnly: readOnly})
	return nil
}

// UnmapVolume removes a mapping; a host not mapped is a no-op.
func (a *Array) UnmapVolume(ctx context.Context, volume, host string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	v, h, err := a.volumeAndHost(volume, host)
	if err != nil {
		return err
	}
	for i, m := range v.Mappings {
		if m.HostID == h.ID {
			if err := a.call("UnmapVolume", v.Name+"->"+h.Name); err != nil {
				return err
			}
			v.Mappings = append(v.Mappings[:i:i], v.Mappings[i+1:]...)
			return nil
		}
	}
	return nil
}

// DeleteVolume refuses a mapped volume (409 in_use), as the gateway does.
func (a *Array) DeleteVolume(ctx context.Context, volume string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	for i, v := range a.vols {
		if v.ID != volume && v.Name != volume {
			continue
		}
		if len(v.Mappings) > 0 {
			return &gateway.StatusError{Method: "DELETE", Path: "/api/v1/volumes/" + v.ID, Status: 409,
				Message: fmt.Sprintf("volume %q is mapped to %d hosts: unmap it first", v.Name, len(v.Mappings))}
		}
		if err := a.call("DeleteVolume", v.Name); err != nil {
			return err
		}
		a.vols = append(a.vols[:i:i], a.vols[i+1:]...)
		return nil
	}
	return notFound("volume", volume)
}

func (a *Array) GetHost(ctx context.Context, key string) (*gateway.Host, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if h := find(a.hosts, key, hostID, hostName); h != nil {
		c := *h
		return &c, nil
	}
	return nil, notFound("host", key)
}

func (a *Array) CreateHost(ctx context.Context, spec gateway.HostSpec) (*gateway.Host, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if find(a.hosts, spec.Name, hostID, hostName) != nil {
		return nil, conflict("host", spec.Name)
	}
	if spec.Type != "iscsi" && spec.Type != "nbd" {
		return nil, fmt.Errorf("host type %q: give iscsi or nbd", spec.Type)
	}
	if err := a.call("CreateHost", spec.Name); err != nil {
		return nil, err
	}
	h := &gateway.Host{ID: a.id("host"), Name: spec.Name, Type: spec.Type, IQN: spec.IQN}
	a.hosts = append(a.hosts, h)
	c := *h
	return &c, nil
}

func (a *Array) EnterSDSMaintenance(ctx context.Context, sds, mode string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	s := find(a.sdss, sds, sdsID, sdsName)
	if s == nil {
		return notFound("sds", sds)
	}
	if s.State != gateway.SDSNormal {
		return fmt.Errorf("sds %s is already in %s", s.Name, s.State)
	}
	for _, o := range a.sdss {
		if o != s && o.State != gateway.SDSNormal && (o.FaultSetID == "" || o.FaultSetID != s.FaultSetID) {
			return fmt.Errorf("sds %s is in maintenance and is not in the fault set of %s: one fault set at a time", o.Name, s.Name)
		}
	}
	a.advance()
	if err := a.call("EnterSDSMaintenance", s.Name+":"+mode); err != nil {
		return err
	}
	switch mode {
	case gateway.MaintenanceInstant:
		s.State = gateway.SDSMaintenance
	case gateway.MaintenanceProtected:
		s.State = gateway.SDSProtectedMaintenance
	default:
		return fmt.Errorf("maintenance mode %q: give instant or protected", mode)
	}
	return nil
}

func (a *Array) ExitSDSMaintenance(ctx context.Context, sds string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	s := find(a.sdss, sds, sdsID, sdsName)
	if s == nil {
		return notFound("sds", sds)
	}
	if s.State == gateway.SDSNormal {
		return fmt.Errorf("sds %s is not in maintenance", s.Name)
	}
	if a.down[s.ID] {
		return fmt.Errorf("sds %s is unreachable: power its SVM on before leaving maintenance", s.Name)
	}
	a.advance()
	if err := a.call("ExitSDSMaintenance", s.Name); err != nil {
		return err
	}
	s.State = gateway.SDSNormal
	a.resync = time.Now().Add(a.ResyncTime)
	a.startResync(s, a.now())
	return nil
}

// LUNsFor implements vcsimkit.LUNSource: the volumes mapped to the host
// whose IQN is initiatorIQN, once the host has at least one send target.
func (a *Array) LUNsFor(ctx context.Context, initiatorIQN string, sendTargets []string) ([]vcsimkit.LUN, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(sendTargets) == 0 {
		return nil, nil
	}
	var out []vcsimkit.LUN
	for _, h := range a.hosts {
		if h.IQN != initiatorIQN {
			continue
		}
		for _, v := range a.vols {
			for _, m := range v.Mappings {
				if m.HostID == h.ID {
					out = append(out, vcsimkit.LUN{NAA: v.WWN, Size: v.Size, Name: v.Name})
				}
			}
		}
	}
	return out, nil
}

// An SDS is matched to its SVM by the host part of its data-path address,
// which is the SVM's data or management address (vApp properties).
func (a *Array) setDown(svm vcsimkit.SVM, down bool) {
	ips := map[string]bool{}
	for _, k := range []string{"cairn.mgmt.address", "cairn.data.address"} {
		ip, _, _ := strings.Cut(svm.Properties[k], "/")
		ips[ip] = ip != ""
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.advance()
	for _, s := range a.sdss {
		if host, _, _ := strings.Cut(s.Address, ":"); ips[host] {
			back := a.down[s.ID] && !down
			if back {
				a.resync = time.Now().Add(a.ResyncTime)
			}
			a.down[s.ID] = down
			if back && s.State == gateway.SDSNormal {
				a.startResync(s, a.now())
			}
		}
	}
}

// Hooks returns guest hooks that mark an SVM's SDS unreachable while the
// SVM is off, then delegate to next (nil: vcsimkit.ReadyGuest).
func (a *Array) Hooks(next vcsimkit.GuestHooks) vcsimkit.GuestHooks {
	if next == nil {
		next = vcsimkit.ReadyGuest{}
	}
	return hooks{a: a, next: next}
}

type hooks struct {
	a    *Array
	next vcsimkit.GuestHooks
}

func (h hooks) PoweredOn(ctx context.Context, svm vcsimkit.SVM) (vcsimkit.GuestReport, error) {
	if err := h.a.join(svm); err != nil {
		return vcsimkit.GuestReport{}, err
	}
	r, err := h.next.PoweredOn(ctx, svm)
	if err == nil {
		h.a.setDown(svm, false)
		h.a.reportUpdater(svm)
		tok := svm.Properties["cairn.cluster.join_token"]
		if tok != "" && !strings.HasPrefix(tok, gateway.JoinTokenPrefix) && slices.Contains(strings.Split(svm.Properties["cairn.roles"], ","), "gateway") {
			h.a.mu.Lock()
			// Like the real gateway: only the first start of a new system stores it.
			if h.a.bootstrapToken == "" && !h.a.tokenUsed {
				h.a.bootstrapToken = tok
			}
			h.a.mu.Unlock()
		}
	}
	return r, err
}

// RedeemBootstrapToken accepts the token a gateway SVM was started with, once.
func (a *Array) RedeemBootstrapToken(ctx context.Context, token, password string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.calls = append(a.calls, "RedeemBootstrapToken")
	if a.tokenUsed || a.bootstrapToken == "" || token != a.bootstrapToken || len(password) < 12 {
		return &gateway.StatusError{Method: "POST", Path: "/api/v1/bootstrap/admin-password", Status: 401, Message: "bootstrap token unknown, expired or already used"}
	}
	a.tokenUsed, a.AdminPassword = true, password
	return nil
}

func (h hooks) PoweredOff(ctx context.Context, svm vcsimkit.SVM) error {
	h.a.setDown(svm, true)
	return h.next.PoweredOff(ctx, svm)
}

// RemoveDevice starts a drain like the gateway: the device goes to state
// removing and a device-remove job follows it; a repeat answers the running
// job. Refused (in_use) when the pool would keep devices on fewer than two
// other fault domains (fault sets, or SDSs without one): the data could not
// stay two-copy.
func (a *Array) RemoveDevice(ctx context.Context, key string) (*gateway.Job, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	var d *gateway.Device
	for _, x := range a.devs {
		if x.ID == key || (x.Name != "" && x.Name == key) {
			d = x
		}
	}
	if d == nil {
		return nil, notFound("device", key)
	}
	if d.State == gateway.DeviceRemoving {
		for _, j := range a.devJobs {
			if j.device == d.ID && j.job.State == gateway.JobRunning {
				c := j.job
				return &c, nil
			}
		}
	}
	domains := map[string]bool{}
	for _, x := range a.devs {
		if x == d || x.PoolID != d.PoolID || x.State != gateway.DeviceNormal {
			continue
		}
		if s := find(a.sdss, x.SDSID, sdsID, sdsName); s != nil {
			dom := s.FaultSetID
			if dom == "" {
				dom = s.ID
			}
			domains[dom] = true
		}
	}
	if len(domains) < 2 {
		return nil, &gateway.StatusError{Method: "POST", Path: "/api/v1/devices/" + key + "/remove", Status: 409,
			Message: fmt.Sprintf("device %s cannot be removed: the rest of its pool has devices on %d fault domain(s) and its data must stay on two; add a device first", key, len(domains))}
	}
	if err := a.call("RemoveDevice", d.ID); err != nil {
		return nil, err
	}
	d.State = gateway.DeviceRemoving
	j := &deviceDrain{device: d.ID, started: time.Now()}
	j.job.ID, j.job.Kind, j.job.State = a.id("job"), "device-remove", gateway.JobRunning
	j.job.Object.Kind, j.job.Object.ID, j.job.Object.Name = "device", d.ID, d.Name
	j.job.Message = fmt.Sprintf("draining: %d of %d placement-group copies still on device %s", DrainCopies, DrainCopies, d.Name)
	a.devJobs[j.job.ID] = j
	c := j.job
	return &c, nil
}

// deviceJob reads a device removal's job, progressed from the clock:
// DrainCopies copies move evenly over DrainTime, then the device is deleted
// and the job succeeds. Callers hold a.mu.
func (a *Array) deviceJob(id string) (*gateway.Job, error) {
	j := a.devJobs[id]
	if j == nil {
		return nil, notFound("job", id)
	}
	if j.job.State != gateway.JobRunning {
		c := j.job
		return &c, nil
	}
	idx := -1
	for i, x := range a.devs {
		if x.ID == j.device {
			idx = i
		}
	}
	el := time.Since(j.started)
	switch {
	case idx < 0 || a.devs[idx].State != gateway.DeviceRemoving:
		j.job.State = gateway.JobFailed
		j.job.Message = fmt.Sprintf("device %s is no longer removing: the removal stopped", j.job.Object.Name)
		j.job.Error = &struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		}{"conflict", j.job.Message + "; start it again"}
	case el >= a.DrainTime:
		a.devs = append(a.devs[:idx], a.devs[idx+1:]...)
		zero := 0.0
		j.job.State, j.job.Percent, j.job.ETASeconds = gateway.JobSucceeded, 100, &zero
		j.job.Message = fmt.Sprintf("device %s drained and removed", j.job.Object.Name)
	default:
		moved := int(float64(DrainCopies) * float64(el) / float64(a.DrainTime))
		j.job.Percent = float64(int(1000*float64(moved)/DrainCopies)) / 10
		if moved > 0 {
			eta := float64(int((a.DrainTime - el).Seconds() + 0.999))
			j.job.ETASeconds = &eta
		}
		j.job.Message = fmt.Sprintf("draining: %d of %d placement-group copies still on device %s", DrainCopies-moved, DrainCopies, j.job.Object.Name)
	}
	c := j.job
	return &c, nil
}

var (
	_ gateway.API         = (*Array)(nil)
	_ vcsimkit.LUNSource  = (*Array)(nil)
	_ vcsimkit.GuestHooks = hooks{}
)
