package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/cairn-storage/cairn/appliance/internal/model"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// world is one consistent read of the whole model (a single etcd range at
// one revision), from which responses and metrics are built.
type world struct {
	rev       int64
	system    *model.System
	pds       map[string]model.ProtectionDomain
	faultSets map[string]model.FaultSet
	sdss      map[string]model.SDS
	devices   map[string]model.Device
	pools     map[string]model.StoragePool
	volumes   map[string]model.Volume
	hosts     map[string]model.Host
	users     map[string]model.User
	live      map[string]model.SDSLive      // by SDS id; present while the SDS holds its lease
	stats     map[string]model.SDSStats     // by SDS id
	maps      map[string]model.PlacementMap // by pool id
	// leader is the MDM leader's name: the value of the election key with
	// the lowest create revision ("" when no MDM campaigns).
	leader    string
	leaderRev int64
	// revs holds each object's etcd modification revision (its ETag), by
	// "<kind>/<id>".
	revs map[string]int64
}

func (s *Server) loadWorld(ctx context.Context) (*world, error) {
	r, err := s.cfg.Etcd.Get(ctx, model.Prefix, clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("read the model from etcd: %v: %w", err, model.ErrUnavailable)
	}
	w := &world{rev: r.Header.Revision,
		pds: map[string]model.ProtectionDomain{}, faultSets: map[string]model.FaultSet{},
		sdss: map[string]model.SDS{}, devices: map[string]model.Device{}, pools: map[string]model.StoragePool{},
		volumes: map[string]model.Volume{}, hosts: map[string]model.Host{}, users: map[string]model.User{},
		live: map[string]model.SDSLive{}, stats: map[string]model.SDSStats{}, maps: map[string]model.PlacementMap{},
		revs: map[string]int64{}}
	for _, kv := range r.Kvs {
		rest := strings.TrimPrefix(string(kv.Key), model.Prefix)
		kind, id, _ := strings.Cut(rest, "/")
		w.revs[rest] = kv.ModRevision
		var err error
		switch kind {
		case "system":
			w.system = new(model.System)
			err = json.Unmarshal(kv.Value, w.system)
		case model.KindPD:
			err = decodeInto(kv.Value, id, w.pds)
		case model.KindFaultSet:
			err = decodeInto(kv.Value, id, w.faultSets)
		case model.KindSDS:
			err = decodeInto(kv.Value, id, w.sdss)
		case model.KindDevice:
			err = decodeInto(kv.Value, id, w.devices)
		case model.KindPool:
			err = decodeInto(kv.Value, id, w.pools)
		case model.KindVolume:
			err = decodeInto(kv.Value, id, w.volumes)
		case model.KindHost:
			err = decodeInto(kv.Value, id, w.hosts)
		case model.KindUser:
			err = decodeInto(kv.Value, id, w.users)
		case "live":
			err = decodeInto(kv.Value, strings.TrimPrefix(id, "sds/"), w.live)
		case "stats":
			if sid, ok := strings.CutPrefix(id, "sds/"); ok { // not stats/frontend/ (statistics.go)
				err = decodeInto(kv.Value, sid, w.stats)
			}
		case "map":
			err = decodeInto(kv.Value, id, w.maps)
		case "election":
			// concurrency.Election: each campaigner's key holds its name;
			// the oldest key is the leader's.
			if w.leaderRev == 0 || kv.CreateRevision < w.leaderRev {
				w.leader, w.leaderRev = string(kv.Value), kv.CreateRevision
			}
		}
		if err != nil {
			return nil, fmt.Errorf("decode %s: %w", kv.Key, err)
		}
	}
	return w, nil
}

func decodeInto[T any](b []byte, id string, m map[string]T) error {
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	m[id] = v
	return nil
}

// sortedByName returns the values of m ordered by name (then id).
func sortedByName[T any](m map[string]T, name func(T) string) []T {
	out := make([]T, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	sort.Slice(out, func(i, j int) bool { return name(out[i]) < name(out[j]) })
	return out
}

func values[T any](m map[string]T) []T {
	out := make([]T, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// deviceUsage is what the device's SDS last reported, if it is publishing.
func (w *world) deviceUsage(d model.Device) (model.DeviceUsage, bool) {
	st, ok := w.stats[d.SDSID]
	if !ok {
		return model.DeviceUsage{}, false
	}
	u, ok := st.Devices[d.ID]
	return u, ok
}

func (w *world) up(sdsID string) bool { _, ok := w.live[sdsID]; return ok }

// volumeIO sums a volume's counters over every SDS that served it as
// primary. (The sum drops when an SDS restarts: a counter reset.)
func (w *world) volumeIO(volumeID string) model.IOCounters {
	var t model.IOCounters
	for _, st := range w.stats {
		if c, ok := st.Volumes[volumeID]; ok {
			addIO(&t, c)
		}
	}
	return t
}

func addIO(t *model.IOCounters, c model.IOCounters) {
	t.ReadOps += c.ReadOps
	t.WriteOps += c.WriteOps
	t.ReadBytes += c.ReadBytes
	t.WriteBytes += c.WriteBytes
	t.ReadLatencyNs += c.ReadLatencyNs
	t.WriteLatencyNs += c.WriteLatencyNs
}

// Response views: the API's own shapes (docs/api.md), decoupled from the
// etcd schema: the object plus names of what it references and live
// figures, so clients need one call per screen. References are
// <kind>_id + <kind>_name, counts <kind>_count, name lists <kind>_names.

type pdView struct {
	ID            string `json:"id"`
	Name          string `json:"name"`
	FaultSetCount int    `json:"fault_set_count"`
	SDSCount      int    `json:"sds_count"`
	PoolCount     int    `json:"pool_count"`
}

func (w *world) pdView(pd model.ProtectionDomain) pdView {
	v := pdView{ID: pd.ID, Name: pd.Name}
	for _, f := range w.faultSets {
		if f.PDID == pd.ID {
			v.FaultSetCount++
		}
	}
	for _, x := range w.sdss {
		if x.PDID == pd.ID {
			v.SDSCount++
		}
	}
	for _, p := range w.pools {
		if p.PDID == pd.ID {
			v.PoolCount++
		}
	}
	return v
}

type faultSetView struct {
	ID                   string   `json:"id"`
	Name                 string   `json:"name"`
	ProtectionDomainID   string   `json:"protection_domain_id"`
	ProtectionDomainName string   `json:"protection_domain_name"`
	SDSNames             []string `json:"sds_names"`
}

func (w *world) faultSetView(f model.FaultSet) faultSetView {
	v := faultSetView{ID: f.ID, Name: f.Name, ProtectionDomainID: f.PDID, ProtectionDomainName: w.pds[f.PDID].Name, SDSNames: []string{}}
	for _, x := range w.sdss {
		if x.FaultSetID == f.ID {
			v.SDSNames = append(v.SDSNames, x.Name)
		}
	}
	sort.Strings(v.SDSNames)
	return v
}

type sdsView struct {
	ID                   string `json:"id"`
	Name                 string `json:"name"`
	ProtectionDomainID   string `json:"protection_domain_id"`
	ProtectionDomainName string `json:"protection_domain_name"`
	FaultSetID           string `json:"fault_set_id"`   // "" : the SDS is its own fault set
	FaultSetName         string `json:"fault_set_name"` // ""
	Address              string `json:"address"`
	State                string `json:"state"`
	RebuildMBps          int    `json:"rebuild_mbps"`
	Up                   bool   `json:"up"` // holds its liveness lease
	DeviceCount          int    `json:"device_count"`
	Capacity             int64  `json:"capacity"`      // raw bytes, devices in state normal
	RawAllocated         int64  `json:"raw_allocated"` // raw bytes in allocated chunks, as last reported
	// IO: served as primary since the SDS started (rates: /statistics).
	IO          model.IOCounters `json:"io"`
	Maintenance maintenanceView  `json:"maintenance"`
	// ResyncBytes: delta-resync bytes this SDS sent as primary (to copies
	// returning from maintenance) since it started.
	ResyncBytes int64 `json:"resync_bytes"`
}

func (w *world) sdsView(x model.SDS) sdsView {
	v := sdsView{ID: x.ID, Name: x.Name, ProtectionDomainID: x.PDID, ProtectionDomainName: w.pds[x.PDID].Name,
		FaultSetID: x.FaultSetID, FaultSetName: w.faultSets[x.FaultSetID].Name, Address: x.Address, State: x.State,
		RebuildMBps: x.RebuildMBps, Up: w.up(x.ID)}
	for _, d := range w.devices {
		if d.SDSID != x.ID {
			continue
		}
		v.DeviceCount++
		if d.State == model.DeviceNormal {
			v.Capacity += d.Capacity
		}
		if u, ok := w.deviceUsage(d); ok {
			v.RawAllocated += u.Used
		}
	}
	v.IO = w.stats[x.ID].Total
	v.Maintenance = w.maintenanceOf(x)
	v.ResyncBytes = w.stats[x.ID].Rebuild.ResyncBytes
	return v
}

type deviceView struct {
	ID           string `json:"id"`
	Name         string `json:"name"`
	SDSID        string `json:"sds_id"`
	SDSName      string `json:"sds_name"`
	PoolID       string `json:"pool_id"`
	PoolName     string `json:"pool_name"`
	Path         string `json:"path"`
	Capacity     int64  `json:"capacity"`      // raw bytes usable for chunks
	RawAllocated int64  `json:"raw_allocated"` // bytes in allocated chunks, as last reported
	State        string `json:"state"`
	// ReportedState is the state the SDS last published (e.g. "error"),
	// "" while the SDS is not publishing.
	ReportedState string `json:"reported_state"`
	Error         string `json:"error"`
}

func (w *world) deviceView(d model.Device) deviceView {
	v := deviceView{ID: d.ID, Name: d.Name, SDSID: d.SDSID, SDSName: w.sdss[d.SDSID].Name, PoolID: d.PoolID, PoolName: w.pools[d.PoolID].Name,
		Path: d.Path, Capacity: d.Capacity, State: d.State, Error: d.Error}
	if u, ok := w.deviceUsage(d); ok {
		v.RawAllocated, v.ReportedState = u.Used, u.State
		if u.Error != "" && v.Error == "" {
			v.Error = u.Error
		}
	}
	return v
}

// capacityView is the one capacity unit set of systems and pools
// (docs/api.md section 6): bytes; usable figures are after the two copies,
// raw ones are named raw*.
type capacityView struct {
	Raw                   int64   `json:"raw"`
	Usable                int64   `json:"usable"`
	SpareReserved         int64   `json:"spare_reserved"`
	Allocated             int64   `json:"allocated"`
	RawAllocated          int64   `json:"raw_allocated"`
	Free                  int64   `json:"free"`
	ThickReserved         int64   `json:"thick_reserved"`
	ThinProvisioned       int64   `json:"thin_provisioned"`
	OverProvisioningRatio float64 `json:"over_provisioning_ratio"`
}

// finish derives the dependent figures from raw, usable, raw_allocated and
// the provisioned sizes.
func (c *capacityView) finish() {
	c.SpareReserved = c.Raw/2 - c.Usable
	c.Allocated = c.RawAllocated / 2
	c.Free = max(0, c.Usable-c.Allocated)
	c.OverProvisioningRatio = 0
	if c.Usable > 0 {
		c.OverProvisioningRatio = math.Round(1000*float64(c.ThinProvisioned+c.ThickReserved)/float64(c.Usable)) / 1000
	}
}

func (c *capacityView) add(o capacityView) {
	c.Raw += o.Raw
	c.Usable += o.Usable
	c.RawAllocated += o.RawAllocated
	c.ThickReserved += o.ThickReserved
	c.ThinProvisioned += o.ThinProvisioned
}

type poolView struct {
	ID                   string       `json:"id"`
	Name                 string       `json:"name"`
	ProtectionDomainID   string       `json:"protection_domain_id"`
	ProtectionDomainName string       `json:"protection_domain_name"`
	SparePercent         int          `json:"spare_percent"`
	PGCount              int          `json:"pg_count"`
	ZeroPadding          bool         `json:"zero_padding"`
	RebuildPolicy        string       `json:"rebuild_policy"`
	RebuildMaxIO         int          `json:"rebuild_max_io"`
	VolumeCount          int          `json:"volume_count"`
	DeviceCount          int          `json:"device_count"` // in state normal
	SDSCount             int          `json:"sds_count"`
	FaultDomainCount     int          `json:"fault_domain_count"`
	Capacity             capacityView `json:"capacity"`
	// Redundant: the devices span two fault domains, so volumes can be created.
	Redundant bool `json:"redundant"`
	// The QoS rule deriving volume limits from their size (0: off).
	model.PoolQoS
}

func (w *world) poolView(p model.StoragePool) poolView {
	c := model.ComputePoolCapacity(p, values(w.devices), values(w.sdss), values(w.volumes))
	v := poolView{ID: p.ID, Name: p.Name, ProtectionDomainID: p.PDID, ProtectionDomainName: w.pds[p.PDID].Name,
		SparePercent: p.SparePercent, PGCount: p.PGCount, ZeroPadding: p.ZeroPadding,
		RebuildPolicy: p.Policy(), RebuildMaxIO: p.RebuildMaxIO, // "" in pools created before policies: unlimited
		DeviceCount: c.Devices, SDSCount: c.SDSs, FaultDomainCount: c.FaultDomains, Redundant: c.FaultDomains >= 2,
		Capacity: capacityView{Raw: c.Raw, Usable: c.Usable, ThickReserved: c.ThickUsed}, PoolQoS: p.PoolQoS}
	for _, vol := range w.volumes {
		if vol.PoolID == p.ID {
			v.VolumeCount++
			if vol.Thin {
				v.Capacity.ThinProvisioned += vol.Size
			}
		}
	}
	for _, d := range w.devices {
		if u, ok := w.deviceUsage(d); ok && d.PoolID == p.ID {
			v.Capacity.RawAllocated += u.Used
		}
	}
	v.Capacity.finish()
	return v
}

type mappingView struct {
	HostID   string `json:"host_id"`
	HostName string `json:"host_name"`
	LUN      int    `json:"lun"`
	ReadOnly bool   `json:"read_only"`
	model.QoSLimits
}

type volumeView struct {
	ID       string `json:"id"`
	Name     string `json:"name"`
	PoolID   string `json:"pool_id"`
	PoolName string `json:"pool_name"`
	Size     int64  `json:"size"`
	Thin     bool   `json:"thin"`
	WWN      string `json:"wwn"`
	Serial   string `json:"serial"`
	// Allocated: usable bytes in the volume's chunks (one copy), as the
	// SDSs last reported.
	Allocated int64            `json:"allocated"`
	Created   time.Time        `json:"created"`
	Mappings  []mappingView    `json:"mappings"`
	IO        model.IOCounters `json:"io"`
	// The volume's own limits (0: none) and the ones frontends enforce.
	model.QoSLimits
	effectiveQoS
}

func (w *world) volumeView(v model.Volume) volumeView {
	out := volumeView{ID: v.ID, Name: v.Name, PoolID: v.PoolID, PoolName: w.pools[v.PoolID].Name, Size: v.Size, Thin: v.Thin,
		WWN: v.WWN, Serial: v.Serial, Created: v.Created, Mappings: []mappingView{}, IO: w.volumeIO(v.ID),
		QoSLimits: v.QoSLimits, effectiveQoS: w.effectiveQoS(v)}
	var chunks int64
	for _, st := range w.stats {
		chunks += st.VolumeChunks[v.ID]
	}
	out.Allocated = chunks / 2 * model.ChunkSize // two copies
	for _, m := range v.Mappings {
		out.Mappings = append(out.Mappings, mappingView{HostID: m.HostID, HostName: w.hosts[m.HostID].Name, LUN: m.LUN, ReadOnly: m.ReadOnly, QoSLimits: m.QoSLimits})
	}
	return out
}

// hostView never carries the CHAP secret.
type hostView struct {
	ID          string   `json:"id"`
	Name        string   `json:"name"`
	Type        string   `json:"type"`
	IQN         string   `json:"iqn"`
	CHAPUser    string   `json:"chap_user"`
	CHAP        bool     `json:"chap"`         // a CHAP secret is set
	VolumeNames []string `json:"volume_names"` // mapped volumes
}

func (w *world) hostView(h model.Host) hostView {
	v := hostView{ID: h.ID, Name: h.Name, Type: h.Type, IQN: h.IQN, CHAPUser: h.CHAPUser, CHAP: h.CHAP, VolumeNames: []string{}}
	for _, vol := range w.volumes {
		for _, m := range vol.Mappings {
			if m.HostID == h.ID {
				v.VolumeNames = append(v.VolumeNames, vol.Name)
			}
		}
	}
	sort.Strings(v.VolumeNames)
	return v
}

// userView never carries the password hash.
type userView struct {
	Name     string `json:"name"`
	Role     string `json:"role"`
	Delegate bool   `json:"delegate"`
}

func userViewOf(u model.User) userView {
	return userView{Name: u.Name, Role: u.Role, Delegate: u.Delegate}
}

// names returns the id -> name of every object of a kind.
func (w *world) names(kind string) map[string]string {
	switch kind {
	case model.KindPD:
		return namesOf(w.pds, func(v model.ProtectionDomain) string { return v.Name })
	case model.KindFaultSet:
		return namesOf(w.faultSets, func(v model.FaultSet) string { return v.Name })
	case model.KindSDS:
		return namesOf(w.sdss, func(v model.SDS) string { return v.Name })
	case model.KindDevice:
		return namesOf(w.devices, func(v model.Device) string { return v.Name })
	case model.KindPool:
		return namesOf(w.pools, func(v model.StoragePool) string { return v.Name })
	case model.KindVolume:
		return namesOf(w.volumes, func(v model.Volume) string { return v.Name })
	case model.KindHost:
		return namesOf(w.hosts, func(v model.Host) string { return v.Name })
	case model.KindUser:
		return namesOf(w.users, func(v model.User) string { return v.Name })
	}
	return map[string]string{}
}

// namesOf maps the ids of a kind's objects to their names.
func namesOf[T any](m map[string]T, name func(T) string) map[string]string {
	out := make(map[string]string, len(m))
	for id, v := range m {
		out[id] = name(v)
	}
	return out
}

// nameOf returns an object's name ("" if it does not exist).
func (w *world) nameOf(kind, id string) string { return w.names(kind)[id] }

// byName returns the id of the object of a kind with that name, or "".
func (w *world) byName(kind, name string) string {
	for id, n := range w.names(kind) {
		if n == name {
			return id
		}
	}
	return ""
}

// resolve turns an id or a name into the id, "" when nothing matches.
func (w *world) resolve(kind, ref string) string {
	names := w.names(kind)
	if _, ok := names[ref]; ok {
		return ref
	}
	return w.byName(kind, ref)
}
