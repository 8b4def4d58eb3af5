// Package catalog keeps an in-memory, watch-driven copy of the parts of the
// system model the data path needs (placement maps and epoch, volumes, SDS
// objects and liveness, hosts), so that no I/O waits on etcd.
package catalog

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cairn-storage/cairn/appliance/internal/model"
)

// Catalog is a watched snapshot of the model.
type Catalog struct {
	cli *clientv3.Client
	log *slog.Logger

	mu        sync.RWMutex
	epoch     uint64
	rev       int64
	maps      map[string]*model.PlacementMap
	volumes   map[uint64]*model.Volume
	volByName map[string]uint64
	sds       map[string]*model.SDS
	live      map[string]*model.SDSLive
	hosts     map[string]*model.Host
	devices   map[string]*model.Device
	pools     map[string]*model.StoragePool
	system    model.System
	changed   chan struct{}
}

// Open loads the model and keeps it current until ctx ends.
func Open(ctx context.Context, cli *clientv3.Client, log *slog.Logger) (*Catalog, error) {
	c := &Catalog{cli: cli, log: log, changed: make(chan struct{})}
	if err := c.reload(ctx); err != nil {
		return nil, err
	}
	go c.watch(ctx)
	return c, nil
}

func (c *Catalog) reset() {
	c.maps = map[string]*model.PlacementMap{}
	c.volumes = map[uint64]*model.Volume{}
	c.volByName = map[string]uint64{}
	c.sds = map[string]*model.SDS{}
	c.live = map[string]*model.SDSLive{}
	c.hosts = map[string]*model.Host{}
	c.devices = map[string]*model.Device{}
	c.pools = map[string]*model.StoragePool{}
	c.epoch = 0
}

func (c *Catalog) reload(ctx context.Context) error {
	r, err := c.cli.Get(ctx, model.Prefix, clientv3.WithPrefix())
	if err != nil {
		return fmt.Errorf("load cluster model from etcd: %w", err)
	}
	c.install(r)
	return nil
}

// install makes a read of the whole model the snapshot, unless the snapshot
// is newer already: the watch (or another reload) may have applied later
// events while the read was in flight, and installing it then took the
// snapshot back in time. An SDS that reloaded after a stale-epoch answer
// lost a device added a moment before, detached it as "no longer in the
// model", and failed the writes placed on it (the e2e expansion).
func (c *Catalog) install(r *clientv3.GetResponse) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if r.Header.Revision < c.rev {
		return
	}
	c.reset()
	for _, kv := range r.Kvs {
		c.apply(string(kv.Key), kv.Value, false)
	}
	c.rev = r.Header.Revision
	c.notifyLocked()
}

// ParseVolumeID turns a volume's hex id into its wire id.
func ParseVolumeID(id string) (uint64, error) {
	return strconv.ParseUint(id, 16, 64)
}

// apply updates the snapshot with one key (layout: model/keys.go); mu must
// be held. Keys the snapshot does not hold are ignored.
func (c *Catalog) apply(key string, val []byte, deleted bool) {
	switch key {
	case model.EpochKey:
		if !deleted {
			c.epoch, _ = strconv.ParseUint(string(val), 10, 64)
		}
		return
	case model.SystemKey:
		if !deleted {
			_ = json.Unmarshal(val, &c.system)
		}
		return
	}
	decode := func(v any) bool {
		if err := json.Unmarshal(val, v); err != nil {
			c.log.Warn("undecodable model object", "key", key, "err", err)
			return false
		}
		return true
	}
	if id, ok := strings.CutPrefix(key, model.MapPrefix); ok {
		if deleted {
			delete(c.maps, id)
		} else if m := new(model.PlacementMap); decode(m) {
			c.maps[id] = m
		}
		return
	}
	if sid, ok := strings.CutPrefix(key, model.LivePrefix); ok {
		if deleted {
			delete(c.live, sid)
		} else if l := new(model.SDSLive); decode(l) {
			c.live[sid] = l
		}
		return
	}
	rest, ok := strings.CutPrefix(key, model.Prefix)
	if !ok {
		return
	}
	kind, id, _ := strings.Cut(rest, "/")
	switch kind {
	case model.KindVolume:
		vid, err := ParseVolumeID(id)
		if err != nil {
			return
		}
		if old, ok := c.volumes[vid]; ok {
			delete(c.volByName, old.Name)
		}
		if deleted {
			delete(c.volumes, vid)
		} else if v := new(model.Volume); decode(v) {
			c.volumes[vid] = v
			c.volByName[v.Name] = vid
		}
	case model.KindSDS:
		if deleted {
			delete(c.sds, id)
		} else if s := new(model.SDS); decode(s) {
			c.sds[id] = s
		}
	case model.KindHost:
		if deleted {
			delete(c.hosts, id)
		} else if h := new(model.Host); decode(h) {
			c.hosts[id] = h
		}
	case model.KindDevice:
		if deleted {
			delete(c.devices, id)
		} else if d := new(model.Device); decode(d) {
			c.devices[id] = d
		}
	case model.KindPool:
		if deleted {
			delete(c.pools, id)
		} else if p := new(model.StoragePool); decode(p) {
			c.pools[id] = p
		}
	}
}

func (c *Catalog) notifyLocked() {
	close(c.changed)
	c.changed = make(chan struct{})
}

func (c *Catalog) watch(ctx context.Context) {
	for ctx.Err() == nil {
		c.mu.RLock()
		rev := c.rev
		c.mu.RUnlock()
		wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		wc := c.cli.Watch(wctx, model.Prefix, clientv3.WithPrefix(), clientv3.WithRev(rev+1))
		broken := false
		for resp := range wc {
			if err := resp.Err(); err != nil {
				c.log.Debug("catalog watch interrupted", "err", err)
				broken = true
				break
			}
			c.mu.Lock()
			interesting := false
			// c.rev is the last revision the snapshot holds: an event at or
			// before it is in the snapshot already (a reload read past it)
			// and applying it would take its key back in time. It moves on
			// with the events applied, not with the response header, which
			// may run ahead of events still to come (etcd sends a catch-up
			// in batches under the current revision).
			last := c.rev
			for _, ev := range resp.Events {
				if ev.Kv.ModRevision <= c.rev {
					continue
				}
				last = max(last, ev.Kv.ModRevision)
				k := string(ev.Kv.Key)
				// Statistics and one-time tokens are no part of the
				// snapshot (apply ignores them); skipping them keeps
				// their writes (statistics every few seconds per SDS, a
				// bootstrap token's grant and redemption, since
				// TokenPrefix is written: model/keys.go) from waking
				// the catalog's waiters.
				if strings.HasPrefix(k, model.StatsPrefix) || strings.HasPrefix(k, model.TokenPrefix) {
					continue
				}
				interesting = true
				c.apply(k, ev.Kv.Value, ev.Type == clientv3.EventTypeDelete)
			}
			c.rev = last
			if interesting {
				c.notifyLocked()
			}
			c.mu.Unlock()
		}
		cancel()
		if ctx.Err() != nil {
			return
		}
		_ = broken
		// The watch ended (leader loss, compaction, partition): reload
		// the whole snapshot before watching again, retrying until etcd
		// answers; the data path keeps using the last snapshot meanwhile.
		for ctx.Err() == nil {
			rctx, rcancel := context.WithTimeout(ctx, 3*time.Second)
			err := c.reload(rctx)
			rcancel()
			if err == nil {
				break
			}
			select {
			case <-ctx.Done():
			case <-time.After(500 * time.Millisecond):
			}
		}
	}
}

// Changed returns a channel closed at the next change of the snapshot.
func (c *Catalog) Changed() <-chan struct{} {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.changed
}

// Refresh reloads the snapshot from etcd now (after a stale-epoch answer).
func (c *Catalog) Refresh(ctx context.Context) error { return c.reload(ctx) }

// Epoch returns the current placement epoch.
func (c *Catalog) Epoch() uint64 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.epoch
}

// WaitEpoch waits until the snapshot's epoch is at least e, reloading from
// etcd if the watch has not delivered it soon.
func (c *Catalog) WaitEpoch(ctx context.Context, e uint64) error {
	deadline := time.After(200 * time.Millisecond)
	for {
		c.mu.RLock()
		cur, ch := c.epoch, c.changed
		c.mu.RUnlock()
		if cur >= e {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ch:
		case <-deadline:
			if err := c.reload(ctx); err != nil {
				return err
			}
			deadline = time.After(time.Second)
		}
	}
}

// Route is what the data path needs to send a chunk request.
type Route struct {
	Epoch  uint64
	Copies []model.CopyRef
}

// VolumeInfo returns a volume by wire id.
func (c *Catalog) Volume(id uint64) (model.Volume, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	v, ok := c.volumes[id]
	if !ok {
		return model.Volume{}, false
	}
	return *v, true
}

// VolumeByName resolves a name (or a hex id) to a volume.
func (c *Catalog) VolumeByName(name string) (uint64, model.Volume, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if id, ok := c.volByName[name]; ok {
		return id, *c.volumes[id], true
	}
	if id, err := ParseVolumeID(name); err == nil {
		if v, ok := c.volumes[id]; ok {
			return id, *v, true
		}
	}
	return 0, model.Volume{}, false
}

// Volumes returns every volume.
func (c *Catalog) Volumes() []model.Volume {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make([]model.Volume, 0, len(c.volumes))
	for _, v := range c.volumes {
		out = append(out, *v)
	}
	return out
}

// ChunkRoute returns the copies of the placement group holding a chunk.
func (c *Catalog) ChunkRoute(volume uint64, chunk uint64, pg func(vol, chunk uint64, n int) int) (Route, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	v, ok := c.volumes[volume]
	if !ok {
		return Route{}, false
	}
	m, ok := c.maps[v.PoolID]
	if !ok || m.PGCount == 0 {
		return Route{Epoch: c.epoch}, false
	}
	return Route{Epoch: c.epoch, Copies: m.PGs[pg(volume, chunk, m.PGCount)]}, true
}

// Map returns a pool's placement map.
func (c *Catalog) Map(poolID string) (*model.PlacementMap, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	m, ok := c.maps[poolID]
	return m, ok
}

// SDSAddress returns the data-path address of a live SDS.
func (c *Catalog) SDSAddress(id string) (string, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if l, ok := c.live[id]; ok {
		return l.Address, true
	}
	return "", false
}

// SDS returns an SDS object.
func (c *Catalog) SDS(id string) (model.SDS, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	s, ok := c.sds[id]
	if !ok {
		return model.SDS{}, false
	}
	return *s, true
}

// SDSByName finds an SDS object by name.
func (c *Catalog) SDSByName(name string) (model.SDS, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	for _, s := range c.sds {
		if s.Name == name {
			return *s, true
		}
	}
	return model.SDS{}, false
}

// LiveSDSs returns the ids and addresses of every live SDS.
func (c *Catalog) LiveSDSs() map[string]string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make(map[string]string, len(c.live))
	for id, l := range c.live {
		out[id] = l.Address
	}
	return out
}

// HostByName finds a host by name.
func (c *Catalog) HostByName(name string) (model.Host, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	for _, h := range c.hosts {
		if h.Name == name {
			return *h, true
		}
	}
	return model.Host{}, false
}

// Devices returns the devices of an SDS.
func (c *Catalog) Devices(sdsID string) []model.Device {
	c.mu.RLock()
	defer c.mu.RUnlock()
	var out []model.Device
	for _, d := range c.devices {
		if d.SDSID == sdsID {
			out = append(out, *d)
		}
	}
	return out
}

// System returns the cluster identity.
func (c *Catalog) System() model.System {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.system
}

// Maps returns every placement map.
func (c *Catalog) Maps() []*model.PlacementMap {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make([]*model.PlacementMap, 0, len(c.maps))
	for _, m := range c.maps {
		out = append(out, m)
	}
	return out
}

// Host returns a host by id.
func (c *Catalog) Host(id string) (model.Host, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	h, ok := c.hosts[id]
	if !ok {
		return model.Host{}, false
	}
	return *h, true
}
