package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cairn-storage/cairn/appliance/internal/iostats"
	"github.com/cairn-storage/cairn/appliance/internal/model"
)

// Statistics: where the samples come from and how rates are made.
//
// Every SDS publishes its cumulative counters (per volume it is primary
// for, per device, total; with latency histograms) to stats/sds/<id> every
// 2 s, and every frontend process (NBD server, iSCSI target) publishes the
// counters of the volumes it serves to stats/frontend/<instance>, both
// under leases. Each gateway samples them every StatsInterval (5 s) and
// keeps, per object, the rates of the last interval and a short history
// (historyLen points: 10 minutes). A rate is a source's counter delta over
// the source's own elapsed time between its two publications; deltas of a
// restarted source (new start time or instance, or a counter going down)
// count from zero, so sums over sources never drop when one restarts.
//
// Volumes, pools, hosts and the system count what frontends served to
// hosts (latency as the host sees it, QoS waits included); SDSs and
// devices count what they served (devices include mirror writes).

const (
	// DefaultStatsInterval between two samples.
	DefaultStatsInterval = 5 * time.Second
	historyLen           = 120
)

// statPoint is one sample of one object (API shape).
type statPoint struct {
	Timestamp        time.Time    `json:"timestamp"`
	Read             iostats.Rate `json:"read"`
	Write            iostats.Rate `json:"write"`
	ThrottledSeconds float64      `json:"throttled_seconds"`
}

// statsResponse is GET /statistics[/{kind}/{ref}].
type statsResponse struct {
	Timestamp        *time.Time   `json:"timestamp"` // null before the first sample
	IntervalSeconds  float64      `json:"interval_seconds"`
	Read             iostats.Rate `json:"read"`
	Write            iostats.Rate `json:"write"`
	ThrottledSeconds float64      `json:"throttled_seconds"`
	History          []statPoint  `json:"history"`
}

// sourceState is what the sampler remembers of one publishing source.
type sourceState struct {
	run  string    // start time or instance: a new run restarts the counters
	time time.Time // of the last publication seen
	objs map[string]model.IOCounters
	// contribution of the last interval, by object key, reused while the
	// source has not published again (it publishes every 2 s, we sample
	// every 5 s: usually it has).
	delta   map[string]model.IOCounters
	elapsed time.Duration
}

type statsSampler struct {
	mu       sync.Mutex
	interval time.Duration
	sources  map[string]*sourceState
	series   map[string][]statPoint // by object key: "system", "<kind>/<id>"
}

func newStatsSampler(interval time.Duration) *statsSampler {
	if interval <= 0 {
		interval = DefaultStatsInterval
	}
	return &statsSampler{interval: interval, sources: map[string]*sourceState{}, series: map[string][]statPoint{}}
}

// runStatistics samples until ctx ends.
func (s *Server) runStatistics(ctx context.Context) {
	t := time.NewTicker(s.stats.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		sctx, cancel := context.WithTimeout(ctx, s.stats.interval)
		if err := s.sampleStatistics(sctx, time.Now().UTC()); err != nil && ctx.Err() == nil {
			s.log.Debug("statistics sample skipped", "err", err)
		}
		cancel()
	}
}

// sampleStatistics reads every source once and appends a point to every
// object's series.
func (s *Server) sampleStatistics(ctx context.Context, now time.Time) error {
	r, err := s.cfg.Etcd.Get(ctx, model.StatsPrefix, clientv3.WithPrefix())
	if err != nil {
		return fmt.Errorf("read statistics: %w", err)
	}
	w, err := s.loadWorld(ctx)
	if err != nil {
		return err
	}
	st := s.stats
	st.mu.Lock()
	defer st.mu.Unlock()
	seen := map[string]bool{}
	for _, kv := range r.Kvs {
		key := string(kv.Key)
		run, started, at, objs, ok := decodeSource(key, kv.Value, w)
		if !ok {
			continue
		}
		seen[key] = true
		src := st.sources[key]
		if src == nil {
			src = &sourceState{}
			st.sources[key] = src
		}
		switch {
		case src.objs == nil && at.Sub(started) <= 3*st.interval && at.After(started):
			// First sight of a run that just started (a restarted
			// frontend has a new key): its counters began at zero.
			src.delta, src.elapsed = objs, at.Sub(started)
		case src.objs == nil: // first sight: nothing to compare with yet
		case !at.After(src.time):
			continue // not published since: keep the last contribution
		default:
			restarted := run != src.run
			from := src.time
			src.delta = map[string]model.IOCounters{}
			for obj, c := range objs {
				src.delta[obj] = iostats.Delta(src.objs[obj], c, restarted)
			}
			src.elapsed = at.Sub(from)
		}
		src.run, src.time, src.objs = run, at, objs
	}
	sums := map[string]*iostats.Sum{}
	for key, src := range st.sources {
		if !seen[key] {
			delete(st.sources, key) // its lease expired: gone
			continue
		}
		// A source late by more than a few of its own periods (it
		// stopped, its lease not yet expired) no longer counts.
		if src.delta == nil || now.Sub(src.time) > 3*max(st.interval, src.elapsed) {
			continue
		}
		for obj, d := range src.delta {
			if sums[obj] == nil {
				sums[obj] = &iostats.Sum{}
			}
			sums[obj].Add(d, src.elapsed)
		}
	}
	// Every object gets a point, zeros when idle; series of objects that
	// are gone are dropped.
	keys := []string{"system"}
	for id := range w.pools {
		keys = append(keys, model.KindPool+"/"+id)
	}
	for id := range w.volumes {
		keys = append(keys, model.KindVolume+"/"+id)
	}
	for id := range w.sdss {
		keys = append(keys, model.KindSDS+"/"+id)
	}
	for id := range w.devices {
		keys = append(keys, model.KindDevice+"/"+id)
	}
	for id := range w.hosts {
		keys = append(keys, model.KindHost+"/"+id)
	}
	next := map[string][]statPoint{}
	for _, k := range keys {
		var sum iostats.Sum
		if x := sums[k]; x != nil {
			sum = *x
		}
		p := statPoint{Timestamp: now, ThrottledSeconds: sum.ThrottledPerSecond * st.interval.Seconds()}
		p.Read, p.Write = sum.Rates()
		h := append(st.series[k], p)
		if len(h) > historyLen {
			h = append([]statPoint(nil), h[len(h)-historyLen:]...)
		}
		next[k] = h
	}
	st.series = next
	return nil
}

// decodeSource parses one published statistics record into its run, its
// time and its counters by object key (one frontend record counts for its
// volumes, their pools, its host and the system).
func decodeSource(key string, val []byte, w *world) (run string, started, at time.Time, objs map[string]model.IOCounters, ok bool) {
	objs = map[string]model.IOCounters{}
	add := func(k string, c model.IOCounters) { objs[k] = iostats.AddCounters(objs[k], c) }
	switch {
	case strings.HasPrefix(key, model.SDSStatsPrefix):
		var st model.SDSStats
		if json.Unmarshal(val, &st) != nil {
			return "", started, at, nil, false
		}
		add(model.KindSDS+"/"+st.SDSID, st.Total)
		for id, c := range st.DeviceIO {
			add(model.KindDevice+"/"+id, c)
		}
		return st.Started.String(), st.Started, st.Time, objs, true
	case strings.HasPrefix(key, model.FrontendStatsPrefix):
		var st model.FrontendStats
		if json.Unmarshal(val, &st) != nil {
			return "", started, at, nil, false
		}
		for id, c := range st.Volumes {
			add(model.KindVolume+"/"+id, c)
			add("system", c)
			if v, ok := w.volumes[id]; ok {
				add(model.KindPool+"/"+v.PoolID, c)
			}
			if st.HostID != "" {
				add(model.KindHost+"/"+st.HostID, c)
			}
		}
		return st.Instance, st.Started, st.Time, objs, true
	}
	return "", started, at, nil, false
}

// statisticsKinds maps the API's collection names to model kinds.
var statisticsKinds = map[string]string{
	"pools": model.KindPool, "volumes": model.KindVolume, "sds": model.KindSDS,
	"devices": model.KindDevice, "hosts": model.KindHost,
}

func (s *Server) getSystemStatistics(c *call) (int, any, error) {
	return http.StatusOK, s.stats.response("system"), nil
}

func (s *Server) getObjectStatistics(c *call) (int, any, error) {
	kind, ok := statisticsKinds[c.r.PathValue("kind")]
	if !ok {
		return 0, nil, errorf(http.StatusNotFound, "no statistics for %q: use one of pools, volumes, sds, devices, hosts (or /statistics for the system)", c.r.PathValue("kind"))
	}
	id, err := s.store.Resolve(c.ctx, kind, c.ref())
	if err != nil {
		return 0, nil, model.WithField(err, "ref")
	}
	return http.StatusOK, s.stats.response(kind + "/" + id), nil
}

func (st *statsSampler) response(key string) statsResponse {
	st.mu.Lock()
	defer st.mu.Unlock()
	h := st.series[key]
	out := statsResponse{IntervalSeconds: st.interval.Seconds(), History: append([]statPoint{}, h...)}
	if len(h) > 0 {
		last := h[len(h)-1]
		out.Timestamp = &last.Timestamp
		out.Read, out.Write, out.ThrottledSeconds = last.Read, last.Write, last.ThrottledSeconds
	}
	return out
}
