package gatewayfake

import (
	"context"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"time"

	"github.com/cairn-storage/cairn/vcenter-plugin/internal/gateway"
)

// The synthetic load. The array stores no data, so to give the dashboards
// figures that mean something it runs a documented workload and derives
// every statistic from the I/O that workload did, the way the gateway
// derives its own from the SDSs' and frontends' counters:
//
//   - Every volume mapped to at least one host is busy (its datastore's
//     VMs): a demand of 1,000-3,000 IOPS (fixed per volume, from a hash of
//     its id) times a factor that walks randomly by up to ±15 % per
//     interval within 0.4-1.6; 70 % of the I/Os are reads of 16 KiB, 30 %
//     writes of 32 KiB. Unmapped volumes are idle.
//   - A volume's effective QoS limits cap what it is served (IOPS and
//     bytes/s, the tighter wins); the time the cut requests waited is its
//     throttled time (what was cut, in seconds of the limit).
//   - Reads go to one copy and writes to two, spread evenly over the SDSs
//     of the volume's pool that hold a device there, are up and in state
//     normal; each SDS spreads its share evenly over its devices. An SDS
//     that is away misses its writes: they are resynced when it is back
//     (below).
//   - Latency: each SDS is an M/M/1 queue with service times of 100 us
//     (read) and 150 us (write) at the utilisation its share gives it; a
//     host adds 50 us of network to a read and 130 us to a write (the
//     mirror hop). An M/M/1 response time is exponential, so the p99 of a
//     mix of SDSs is where the mix of exponentials leaves 1 %.
//   - The array samples every StatsInterval (5 s, as the gateway) and
//     keeps 120 points (10 minutes) per object. Sampling is lazy: the
//     intervals that passed are simulated when someone reads statistics or
//     changes what they depend on (mappings, limits, SDS states), so the
//     array needs no goroutine; an idle gap longer than the history is
//     skipped.
//
// Resync: the writes an SDS missed while away (maintenance or powered
// off) are copied to it when it is back, in ResyncTime (during which
// health says "copies are being resynchronised"); GET /system's rebuild
// shows that work. The array has no placement groups: it counts each SDS
// being resynced as one resyncing group and each SDS that is down as one
// degraded group.

const (
	// DefaultStatsInterval is the gateway's sample interval.
	DefaultStatsInterval = 5 * time.Second
	historyLen           = 120
	readSize             = 16 << 10
	writeSize            = 32 << 10
	readShare            = 0.7
	readServiceUs        = 100.0
	writeServiceUs       = 150.0
	readNetUs            = 50.0
	writeNetUs           = 130.0
)

// counters are cumulative I/O of one object, like the SDSs publish them.
type counters struct {
	readOps, writeOps, readBytes, writeBytes float64
	// latency mix: ops by exponential mean (us), per direction
	readMix, writeMix map[float64]float64
	throttled         float64 // seconds
}

func (c *counters) add(read bool, ops, bytes, meanUs float64) {
	if ops <= 0 {
		return
	}
	if read {
		c.readOps += ops
		c.readBytes += bytes
		if c.readMix == nil {
			c.readMix = map[float64]float64{}
		}
		c.readMix[meanUs] += ops
		return
	}
	c.writeOps += ops
	c.writeBytes += bytes
	if c.writeMix == nil {
		c.writeMix = map[float64]float64{}
	}
	c.writeMix[meanUs] += ops
}

// rate turns one interval's counters into the API's figures.
func rate(ops, bytes float64, mix map[float64]float64, secs float64) gateway.Rate {
	r := gateway.Rate{IOPS: ops / secs, BytesPerSecond: bytes / secs}
	if ops == 0 {
		return r
	}
	var sum, hi float64
	for m, n := range mix {
		sum += m * n
		hi = max(hi, m)
	}
	r.LatencyMeanUs = sum / ops
	// p99: the x where the mix's tail sum(w_i exp(-x/m_i)) is 1 %.
	tail := func(x float64) float64 {
		var t float64
		for m, n := range mix {
			t += n / ops * math.Exp(-x/m)
		}
		return t
	}
	lo, up := 0.0, hi*math.Log(100)
	for range 50 {
		mid := (lo + up) / 2
		if tail(mid) > 0.01 {
			lo = mid
		} else {
			up = mid
		}
	}
	r.LatencyP99Us = math.Round(up*10) / 10
	r.LatencyMeanUs = math.Round(r.LatencyMeanUs*10) / 10
	return r
}

// load is the workload's and the sampler's state.
type load struct {
	rng      *rand.Rand
	factor   map[string]float64 // volume id -> demand factor
	at       time.Time          // end of the last simulated interval
	series   map[string][]gateway.StatPoint
	missed   map[string]float64 // SDS id -> bytes of writes it missed
	resyncs  []resyncWork
	finished float64 // bytes of resyncs that ended
}

type resyncWork struct {
	sdsID      string
	start, end time.Time
	bytes      float64
}

func (a *Array) interval() time.Duration {
	if a.StatsInterval > 0 {
		return a.StatsInterval
	}
	return DefaultStatsInterval
}

func (a *Array) now() time.Time {
	if a.clock != nil {
		return a.clock()
	}
	return time.Now()
}

// SetClock makes the array read time from now (tests step it) and starts
// its statistics afresh at now().
func (a *Array) SetClock(now func() time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.clock = now
	a.load = newLoad(now())
}

func newLoad(at time.Time) *load {
	return &load{rng: rand.New(rand.NewPCG(uint64(at.UnixNano()), 0x636169726e)), factor: map[string]float64{},
		at: at, series: map[string][]gateway.StatPoint{}, missed: map[string]float64{}}
}

// baseIOPS is a volume's demand at factor 1.
func baseIOPS(id string) float64 {
	h := fnv.New32a()
	_, _ = h.Write([]byte(id))
	return 1000 + float64(h.Sum32()%2001)
}

// serving reports whether an SDS serves I/O.
func (a *Array) serving(s *gateway.SDS) bool {
	return !a.down[s.ID] && s.State == gateway.SDSNormal
}

// advance simulates every whole interval up to now. Callers hold a.mu.
func (a *Array) advance() {
	if a.load == nil {
		a.load = newLoad(a.now())
	}
	l, step := a.load, a.interval()
	now := a.now()
	if gap := now.Sub(l.at); gap > historyLen*step {
		l.at = now.Add(-historyLen * step) // idle gap: skipped
	}
	for !l.at.Add(step).After(now) {
		l.at = l.at.Add(step)
		a.simulate(l.at, step.Seconds())
	}
	// Resyncs that ended.
	keep := l.resyncs[:0]
	for _, r := range l.resyncs {
		if !now.Before(r.end) {
			l.finished += r.bytes
			continue
		}
		keep = append(keep, r)
	}
	l.resyncs = keep
}

// simulate runs one interval ending at end and appends a point to every
// object's series.
func (a *Array) simulate(end time.Time, secs float64) {
	l := a.load
	objs := map[string]*counters{}
	get := func(k string) *counters {
		if objs[k] == nil {
			objs[k] = &counters{}
		}
		return objs[k]
	}
	// Which SDSs serve each pool, and their devices there.
	poolSDS := map[string][]*gateway.SDS{}
	devsOf := map[string][]string{} // pool id + "/" + SDS id -> device ids
	sdsByID := map[string]*gateway.SDS{}
	for _, s := range a.sdss {
		sdsByID[s.ID] = s
	}
	for _, d := range a.devs {
		s := sdsByID[d.SDSID]
		if s == nil {
			continue
		}
		k := d.PoolID + "/" + s.ID
		if len(devsOf[k]) == 0 {
			poolSDS[d.PoolID] = append(poolSDS[d.PoolID], s)
		}
		devsOf[k] = append(devsOf[k], d.ID)
	}
	// Pass 1: what each volume asks of each SDS.
	type share struct{ reads, writes float64 }
	type volLoad struct {
		v              *gateway.Volume
		reads, writes  float64 // ops this interval
		serving        []*gateway.SDS
		throttledShare float64
	}
	var vols []volLoad
	sdsLoad := map[string]*share{}
	for _, v := range a.vols {
		f, ok := l.factor[v.ID]
		if !ok {
			f = 0.8 + 0.4*l.rng.Float64()
		}
		f = min(1.6, max(0.4, f*(1+0.3*(l.rng.Float64()-0.5))))
		l.factor[v.ID] = f
		if len(v.Mappings) == 0 {
			continue
		}
		var serving []*gateway.SDS
		for _, s := range poolSDS[v.PoolID] {
			if a.serving(s) {
				serving = append(serving, s)
			}
		}
		if len(serving) == 0 {
			continue // no copy reachable: the volume serves nothing
		}
		demand := baseIOPS(v.ID) * f
		served := demand
		if v.EffectiveIOPSLimit > 0 {
			served = min(served, float64(v.EffectiveIOPSLimit))
		}
		meanSize := readShare*readSize + (1-readShare)*writeSize
		if v.EffectiveBandwidthLimit > 0 {
			served = min(served, float64(v.EffectiveBandwidthLimit)/meanSize)
		}
		ops := math.Round(served * secs)
		reads := math.Round(ops * readShare)
		vl := volLoad{v: v, reads: reads, writes: ops - reads, serving: serving}
		if served < demand {
			// Requests beyond the limit wait: the cut share of the interval.
			vl.throttledShare = (demand - served) / demand * secs
		}
		vols = append(vols, vl)
		n := float64(len(serving))
		for _, s := range serving {
			sh := sdsLoad[s.ID]
			if sh == nil {
				sh = &share{}
				sdsLoad[s.ID] = sh
			}
			sh.reads += vl.reads / n
			sh.writes += 2 * vl.writes / n // both copies
		}
		// Writes the pool's away SDSs miss (their copies), resynced later.
		if away := len(poolSDS[v.PoolID]) - len(serving); away > 0 {
			all := float64(len(poolSDS[v.PoolID]))
			for _, s := range poolSDS[v.PoolID] {
				if !a.serving(s) {
					l.missed[s.ID] += 2 * vl.writes * writeSize / all
				}
			}
		}
	}
	// SDS latency: M/M/1 at its utilisation.
	latency := map[string][2]float64{}
	for id, sh := range sdsLoad {
		u := min(0.95, (sh.reads*readServiceUs+sh.writes*writeServiceUs)/1e6/secs)
		latency[id] = [2]float64{readServiceUs / (1 - u), writeServiceUs / (1 - u)}
		s := sdsByID[id]
		c := get(gateway.KindSDS + "/" + id)
		c.add(true, sh.reads, sh.reads*readSize, latency[id][0])
		c.add(false, sh.writes, sh.writes*writeSize, latency[id][1])
		var devs []string
		for _, d := range a.devs {
			if d.SDSID == s.ID {
				devs = append(devs, d.ID)
			}
		}
		for _, d := range devs {
			n := float64(len(devs))
			dc := get(gateway.KindDevices + "/" + d)
			dc.add(true, sh.reads/n, sh.reads*readSize/n, latency[id][0])
			dc.add(false, sh.writes/n, sh.writes*writeSize/n, latency[id][1])
		}
	}
	// Volumes, their pools, hosts and the system: as hosts see them.
	for _, vl := range vols {
		keys := []string{KindSystemKey, gateway.KindVolumes + "/" + vl.v.ID, gateway.KindPools + "/" + vl.v.PoolID}
		n := float64(len(vl.serving))
		for _, k := range keys {
			c := get(k)
			for _, s := range vl.serving {
				lat := latency[s.ID]
				c.add(true, vl.reads/n, vl.reads*readSize/n, readNetUs+lat[0])
				c.add(false, vl.writes/n, vl.writes*writeSize/n, writeNetUs+lat[1])
			}
			c.throttled += vl.throttledShare
		}
		hosts := float64(len(vl.v.Mappings))
		for _, m := range vl.v.Mappings {
			c := get(gateway.KindHosts + "/" + m.HostID)
			for _, s := range vl.serving {
				lat := latency[s.ID]
				c.add(true, vl.reads/n/hosts, vl.reads*readSize/n/hosts, readNetUs+lat[0])
				c.add(false, vl.writes/n/hosts, vl.writes*writeSize/n/hosts, writeNetUs+lat[1])
			}
			c.throttled += vl.throttledShare / hosts
		}
	}
	// Every object gets a point (zeros when idle).
	keys := []string{KindSystemKey}
	for _, p := range a.pools {
		keys = append(keys, gateway.KindPools+"/"+p.ID)
	}
	for _, v := range a.vols {
		keys = append(keys, gateway.KindVolumes+"/"+v.ID)
	}
	for _, s := range a.sdss {
		keys = append(keys, gateway.KindSDS+"/"+s.ID)
	}
	for _, d := range a.devs {
		keys = append(keys, gateway.KindDevices+"/"+d.ID)
	}
	for _, h := range a.hosts {
		keys = append(keys, gateway.KindHosts+"/"+h.ID)
	}
	next := map[string][]gateway.StatPoint{}
	for _, k := range keys {
		c := get(k)
		p := gateway.StatPoint{Timestamp: end.UTC(), ThrottledSeconds: math.Round(c.throttled*1000) / 1000,
			Read:  rate(c.readOps, c.readBytes, c.readMix, secs),
			Write: rate(c.writeOps, c.writeBytes, c.writeMix, secs)}
		h := append(l.series[k], p)
		if len(h) > historyLen {
			h = append([]gateway.StatPoint(nil), h[len(h)-historyLen:]...)
		}
		next[k] = h
	}
	l.series = next
}

// KindSystemKey is the series key of the whole system.
const KindSystemKey = gateway.KindSystem

// Statistics implements gateway.StatisticsReader.
func (a *Array) Statistics(ctx context.Context, kind, ref string) (*gateway.Statistics, error) {
	if err := gateway.CheckStatisticsKind(kind, ref); err != nil {
		return nil, &gateway.StatusError{Method: "GET", Path: "/api/v1/statistics/" + kind + "/" + ref, Status: 404, Message: err.Error()}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.advance()
	key := KindSystemKey
	if kind != gateway.KindSystem {
		id, ok := a.resolve(kind, ref)
		if !ok {
			return nil, &gateway.StatusError{Method: "GET", Path: "/api/v1/statistics/" + kind + "/" + ref, Status: 404,
				Message: fmt.Sprintf("%s %q not found", kind, ref)}
		}
		key = kind + "/" + id
	}
	h := a.load.series[key]
	out := &gateway.Statistics{IntervalSeconds: a.interval().Seconds(), History: append([]gateway.StatPoint{}, h...)}
	if len(h) > 0 {
		last := h[len(h)-1]
		out.Timestamp = &last.Timestamp
		out.Read, out.Write, out.ThrottledSeconds = last.Read, last.Write, last.ThrottledSeconds
	}
	return out, nil
}

// resolve finds an object's id by id or name.
func (a *Array) resolve(kind, ref string) (string, bool) {
	var id string
	switch kind {
	case gateway.KindPools:
		if p := find(a.pools, ref, poolID, poolName); p != nil {
			id = p.ID
		}
	case gateway.KindVolumes:
		if v := find(a.vols, ref, volID, volName); v != nil {
			id = v.ID
		}
	case gateway.KindSDS:
		if s := find(a.sdss, ref, sdsID, sdsName); s != nil {
			id = s.ID
		}
	case gateway.KindDevices:
		if d := find(a.devs, ref, func(d *gateway.Device) string { return d.ID }, func(d *gateway.Device) string { return d.Name }); d != nil {
			id = d.ID
		}
	case gateway.KindHosts:
		if h := find(a.hosts, ref, hostID, hostName); h != nil {
			id = h.ID
		}
	}
	return id, id != ""
}

// startResync starts copying what s missed while it was away; it ends
// with the health's resync window. Callers hold a.mu and advanced.
func (a *Array) startResync(s *gateway.SDS, now time.Time) {
	l := a.load
	b := l.missed[s.ID]
	delete(l.missed, s.ID)
	if b <= 0 {
		return
	}
	if a.ResyncTime <= 0 {
		l.finished += b
		return
	}
	l.resyncs = append(l.resyncs, resyncWork{sdsID: s.ID, start: now, end: now.Add(a.ResyncTime), bytes: b})
}

// Rebuild implements gateway.StatisticsReader: the resyncs running now.
// It is GET /system's "rebuild", as System reports it, without moving a
// rebalance on.
func (a *Array) Rebuild(ctx context.Context) (*gateway.Rebuild, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.rebuildLocked(), nil
}

// rebuildLocked sums the copy work as the gateway does. Callers hold a.mu.
func (a *Array) rebuildLocked() *gateway.Rebuild {
	a.advance()
	l, now := a.load, a.now()
	r := &gateway.Rebuild{DoneBytes: int64(l.finished), ResyncBytes: int64(l.finished)}
	var running, runningDone, rateSum float64
	for _, w := range l.resyncs {
		frac := min(1, max(0, now.Sub(w.start).Seconds()/w.end.Sub(w.start).Seconds()))
		done := w.bytes * frac
		running += w.bytes
		runningDone += done
		rateSum += w.bytes / w.end.Sub(w.start).Seconds()
		r.ResyncingGroups++
	}
	for _, s := range a.sdss {
		if a.down[s.ID] {
			r.DegradedGroups++
		}
	}
	r.PendingBytes = int64(running - runningDone)
	r.DoneBytes += int64(runningDone)
	r.ResyncBytes = r.DoneBytes
	// A rebalance after an expansion (topology.go) is pending copy work too; it
	// moves on when GET /system is read, not here.
	r.RebalancingGroups = a.rebalancing
	r.Percent = 100
	if a.rebalancing > 0 && r.PendingBytes == 0 && a.rebalanceTotal > 0 {
		r.PendingBytes = int64(a.rebalancing) * 256 << 20
		r.Percent = 100 * float64(a.rebalanceTotal-a.rebalancing) / float64(a.rebalanceTotal)
		eta := float64(a.rebalancing) // a group per read of GET /system
		r.ETASeconds = &eta
		return r
	}
	if r.PendingBytes > 0 {
		r.Percent = math.Round(1000*runningDone/running) / 10
		r.RateBytesPerSecond = rateSum
		eta := math.Ceil(float64(r.PendingBytes) / rateSum)
		r.ETASeconds = &eta
	} else {
		zero := 0.0
		r.ETASeconds = &zero
	}
	return r
}
