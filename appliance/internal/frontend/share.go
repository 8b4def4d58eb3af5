package frontend

// share.go: a volume's limits hold for the volume, not for each frontend.
// An ESXi host spreads a LUN's I/O over several SVMs' targets (round
// robin), and a datastore's LUN is served to every host of the cluster:
// with each frontend enforcing the whole limit, the volume would get N
// times it. So every frontend reads the others' published counters each
// interval, derives their rates, and admits only its max-min fair share
// of the volume's own limits (qos.Share). Per-mapping limits (one host's)
// are not shared: one NBD server serves a host.

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cairn-storage/cairn/appliance/internal/model"
	"github.com/cairn-storage/cairn/appliance/internal/qos"
)

// peer is what one frontend instance (this one included) last published.
type peer struct {
	started, time time.Time
	vols          map[string]model.IOCounters
	rates         map[string]rates // by volume id (16 hex digits)
}

// rates is one frontend's use of one volume over its last interval.
type rates struct {
	ops, bytes qos.Demand
}

// ratesOf derives the rates between two snapshots dt apart.
func ratesOf(prev, cur model.IOCounters, dt float64) rates {
	ops := float64((cur.ReadOps + cur.WriteOps) - (prev.ReadOps + prev.WriteOps))
	bytes := float64((cur.ReadBytes + cur.WriteBytes) - (prev.ReadBytes + prev.WriteBytes))
	held := cur.ThrottledNs > prev.ThrottledNs
	return rates{ops: qos.Demand{Rate: ops / dt, Throttled: held}, bytes: qos.Demand{Rate: bytes / dt, Throttled: held}}
}

// counterReset reports whether cur cannot follow prev (a restart).
func counterReset(prev, cur model.IOCounters) bool {
	return cur.ReadOps < prev.ReadOps || cur.WriteOps < prev.WriteOps || cur.ReadBytes < prev.ReadBytes ||
		cur.WriteBytes < prev.WriteBytes || cur.ThrottledNs < prev.ThrottledNs
}

// scaled is a limit times a share (0: unlimited stays unlimited; never
// below 1).
func scaled(limit int64, share float64) int64 {
	if limit == 0 || share >= 1 || share <= 0 {
		return limit
	}
	return max(1, int64(float64(limit)*share+0.5))
}

// rebalance reads every frontend's published counters (this one's too:
// its own rates come from the same records, by the same arithmetic) and
// sets each limited volume's share here. Others whose counters are older
// than stale are left out (stopped, or cut off).
func (f *IO) rebalance(ctx context.Context, cli *clientv3.Client, now time.Time, stale time.Duration) error {
	gctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	r, err := cli.Get(gctx, model.FrontendStatsPrefix, clientv3.WithPrefix())
	if err != nil {
		return fmt.Errorf("read the other frontends' statistics: %w", err)
	}
	seen := map[string]bool{}
	for _, kv := range r.Kvs {
		var st model.FrontendStats
		if json.Unmarshal(kv.Value, &st) != nil || now.Sub(st.Time) > stale {
			continue
		}
		seen[st.Instance] = true
		p, ok := f.peers[st.Instance]
		switch {
		case !ok || !p.started.Equal(st.Started):
			f.peers[st.Instance] = &peer{started: st.Started, time: st.Time, vols: st.Volumes, rates: map[string]rates{}}
		case st.Time.After(p.time):
			dt := st.Time.Sub(p.time).Seconds()
			next := map[string]rates{}
			for id, cur := range st.Volumes {
				if prev, ok := p.vols[id]; ok && !counterReset(prev, cur) {
					next[id] = ratesOf(prev, cur, dt)
				}
			}
			p.time, p.vols, p.rates = st.Time, st.Volumes, next
		}
	}
	for id := range f.peers {
		if !seen[id] {
			delete(f.peers, id)
		}
	}

	f.mu.Lock()
	defer f.mu.Unlock()
	self := f.peers[f.instance] // nil until published twice: no rate yet
	for id, s := range f.vols {
		key := fmt.Sprintf("%016x", id)
		var mine rates
		if self != nil {
			mine = self.rates[key]
		}
		var ops, bytes []qos.Demand
		for inst, p := range f.peers {
			if o, ok := p.rates[key]; ok && inst != f.instance && (o.ops.Rate > 0 || o.ops.Throttled) {
				ops, bytes = append(ops, o.ops), append(bytes, o.bytes)
			}
		}
		v, ok := f.cat.Volume(id)
		if !ok {
			continue
		}
		pool, _ := f.cat.Pool(v.PoolID)
		e := model.EffectiveQoS(v, pool)
		s.shareIOPS, s.shareBytes = 1, 1
		if e.IOPSLimit > 0 {
			s.shareIOPS = qos.Share(float64(e.IOPSLimit), mine.ops, ops) / float64(e.IOPSLimit)
		}
		if e.BandwidthLimit > 0 {
			s.shareBytes = qos.Share(float64(e.BandwidthLimit), mine.bytes, bytes) / float64(e.BandwidthLimit)
		}
	}
	return nil
}
