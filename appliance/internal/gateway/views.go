package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

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
		live: map[string]model.SDSLive{}, stats: map[string]model.SDSStats{}, maps: map[string]model.PlacementMap{}}
	for _, kv := range r.Kvs {
		rest := strings.TrimPrefix(string(kv.Key), model.Prefix)
		kind, id, _ := strings.Cut(rest, "/")
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

// Response views: the model object plus names of what it references and
// live figures, so clients need one call per screen.

type pdView struct {
	model.ProtectionDomain
	FaultSets int `json:"fault_sets"`
	SDSs      int `json:"sdss"`
	Pools     int `json:"pools"`
}

func (w *world) pdView(pd model.ProtectionDomain) pdView {
	v := pdView{ProtectionDomain: pd}
	for _, f := range w.faultSets {
		if f.PDID == pd.ID {
			v.FaultSets++
		}
	}
	for _, x := range w.sdss {
		if x.PDID == pd.ID {
			v.SDSs++
		}
	}
	for _, p := range w.pools {
		if p.PDID == pd.ID {
			v.Pools++
		}
	}
	return v
}

type faultSetView struct {
	model.FaultSet
	PDName string   `json:"pd_name"`
	SDSs   []string `json:"sdss"` // names
}

func (w *world) faultSetView(f model.FaultSet) faultSetView {
	v := faultSetView{FaultSet: f, PDName: w.pds[f.PDID].Name, SDSs: []string{}}
	for _, x := range w.sdss {
		if x.FaultSetID == f.ID {
			v.SDSs = append(v.SDSs, x.Name)
		}
	}
	sort.Strings(v.SDSs)
	return v
}

type sdsView struct {
	model.SDS
	PDName       string           `json:"pd_name"`
	FaultSetName string           `json:"fault_set_name,omitempty"`
	Up           bool             `json:"up"` // holds its liveness lease
	Devices      int              `json:"devices"`
	Capacity     int64            `json:"capacity"` // bytes, devices in state normal
	Used         int64            `json:"used"`     // bytes, as last reported
	IO           model.IOCounters `json:"io"`       // served as primary since the SDS started
	Maintenance  maintenanceView  `json:"maintenance"`
	// ResyncBytes: delta-resync bytes this SDS sent as primary (to copies
	// returning from maintenance) since it started.
	ResyncBytes int64 `json:"resync_bytes"`
}

func (w *world) sdsView(x model.SDS) sdsView {
	v := sdsView{SDS: x, PDName: w.pds[x.PDID].Name, FaultSetName: w.faultSets[x.FaultSetID].Name, Up: w.up(x.ID)}
	for _, d := range w.devices {
		if d.SDSID != x.ID {
			continue
		}
		v.Devices++
		if d.State == model.DeviceNormal {
			v.Capacity += d.Capacity
		}
		if u, ok := w.deviceUsage(d); ok {
			v.Used += u.Used
		}
	}
	v.IO = w.stats[x.ID].Total
	v.Maintenance = w.maintenanceOf(x)
	v.ResyncBytes = w.stats[x.ID].Rebuild.ResyncBytes
	return v
}

type deviceView struct {
	model.Device
	SDSName  string `json:"sds_name"`
	PoolName string `json:"pool_name"`
	Used     int64  `json:"used"` // bytes in allocated chunks, as last reported
	// Reported is the state the SDS last published (e.g. "error"), empty
	// while the SDS is not publishing.
	Reported string `json:"reported_state,omitempty"`
}

func (w *world) deviceView(d model.Device) deviceView {
	v := deviceView{Device: d, SDSName: w.sdss[d.SDSID].Name, PoolName: w.pools[d.PoolID].Name}
	if u, ok := w.deviceUsage(d); ok {
		v.Used, v.Reported = u.Used, u.State
		if u.Error != "" && v.Error == "" {
			v.Error = u.Error
		}
	}
	return v
}

type poolView struct {
	model.StoragePool
	PDName   string             `json:"pd_name"`
	Volumes  int                `json:"volumes"`
	Capacity model.PoolCapacity `json:"capacity"`
	// Used is the raw bytes allocated on the pool's devices (both copies).
	Used int64 `json:"used"`
	// Redundant: the devices span two fault domains, so volumes can be created.
	Redundant bool `json:"redundant"`
}

func (w *world) poolView(p model.StoragePool) poolView {
	c := model.ComputePoolCapacity(p, values(w.devices), values(w.sdss), values(w.volumes))
	v := poolView{StoragePool: p, PDName: w.pds[p.PDID].Name, Capacity: c, Redundant: c.FaultDomains >= 2}
	v.RebuildPolicy = p.Policy() // "" in pools created before policies: unlimited
	for _, vol := range w.volumes {
		if vol.PoolID == p.ID {
			v.Volumes++
		}
	}
	for _, d := range w.devices {
		if u, ok := w.deviceUsage(d); ok && d.PoolID == p.ID {
			v.Used += u.Used
		}
	}
	return v
}

type mappingView struct {
	HostID   string `json:"host_id"`
	HostName string `json:"host_name"`
	ReadOnly bool   `json:"read_only"`
	model.QoSLimits
}

type volumeView struct {
	model.Volume
	PoolName string           `json:"pool_name"`
	Mappings []mappingView    `json:"mappings"`
	IO       model.IOCounters `json:"io"`
	effectiveQoS
}

func (w *world) volumeView(v model.Volume) volumeView {
	out := volumeView{Volume: v, PoolName: w.pools[v.PoolID].Name, Mappings: []mappingView{}, IO: w.volumeIO(v.ID), effectiveQoS: w.effectiveQoS(v)}
	for _, m := range v.Mappings {
		out.Mappings = append(out.Mappings, mappingView{HostID: m.HostID, HostName: w.hosts[m.HostID].Name, ReadOnly: m.ReadOnly, QoSLimits: m.QoSLimits})
	}
	return out
}

// hostView never carries the CHAP secret.
type hostView struct {
	ID       string   `json:"id"`
	Name     string   `json:"name"`
	Type     string   `json:"type"`
	IQN      string   `json:"iqn,omitempty"`
	CHAPUser string   `json:"chap_user,omitempty"`
	CHAP     bool     `json:"chap"`    // a CHAP secret is set
	Volumes  []string `json:"volumes"` // names of mapped volumes
}

func (w *world) hostView(h model.Host) hostView {
	v := hostView{ID: h.ID, Name: h.Name, Type: h.Type, IQN: h.IQN, CHAPUser: h.CHAPUser, CHAP: h.CHAPSecret != "", Volumes: []string{}}
	for _, vol := range w.volumes {
		for _, m := range vol.Mappings {
			if m.HostID == h.ID {
				v.Volumes = append(v.Volumes, vol.Name)
			}
		}
	}
	sort.Strings(v.Volumes)
	return v
}

// userView never carries the password hash.
type userView struct {
	Name string `json:"name"`
	Role string `json:"role"`
}

func userViewOf(u model.User) userView { return userView{Name: u.Name, Role: u.Role} }
