package server

import (
	"fmt"
	"math"
	"math/big"
	"net/http"
	"sync"
	"time"

	"github.com/cairn-storage/cairn/vcenter-plugin/internal/gateway"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/plan"
)

// The dashboards' read side: I/O statistics of a system or one of its
// objects, and the copy work (rebuild, rebalance, resync) with an ETA
// from the rate this server observed.

// statisticsKinds maps the API's kind parameter to the gateway's
// collection under /statistics/.
var statisticsKinds = map[string]string{
	"system": gateway.KindSystem, "pool": gateway.KindPools, "volume": gateway.KindVolumes,
	"sds": gateway.KindSDS, "device": gateway.KindDevices, "host": gateway.KindHosts,
}

// StatisticsView is GET /api/v1/systems/{system}/statistics: the gateway's
// statistics of the object, named.
type StatisticsView struct {
	System string `json:"system"`
	Kind   string `json:"kind"`
	Name   string `json:"name,omitempty"`
	*gateway.Statistics
}

func (s *Server) statistics(w http.ResponseWriter, r *http.Request, us *userSession) {
	q := r.URL.Query()
	kind, name := q.Get("kind"), q.Get("name")
	if kind == "" {
		kind = "system"
	}
	gk, ok := statisticsKinds[kind]
	if !ok {
		writeError(w, http.StatusBadRequest, "kind %q: give system, pool, volume, sds, device or host", kind)
		return
	}
	if kind == "system" && name != "" {
		writeError(w, http.StatusBadRequest, "kind system takes no name (got %q): drop name= or give kind=pool|volume|sds|device|host", name)
		return
	}
	if kind != "system" && name == "" {
		writeError(w, http.StatusBadRequest, "kind %s needs name=<the %s's name or id>", kind, kind)
		return
	}
	api, _, err := s.systemGateway(w, r, us, "read the statistics of system")
	if err != nil {
		return
	}
	st, err := api.Statistics(r.Context(), gk, name)
	if err != nil {
		writeGatewayError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, StatisticsView{System: r.PathValue("system"), Kind: kind, Name: name, Statistics: st})
}

// systemGateway connects to the gateway of the path's system for a read
// (what, completed by the system's name, is said in a refusal), answering
// the error itself when it cannot. It returns the system's plan too.
func (s *Server) systemGateway(w http.ResponseWriter, r *http.Request, us *userSession, what string) (gateway.API, *plan.Plan, error) {
	return s.systemGatewayAs(w, r, us, PrivMonitor, what)
}

// systemGatewayAs is systemGateway with the privilege need.
func (s *Server) systemGatewayAs(w http.ResponseWriter, r *http.Request, us *userSession, need, what string) (gateway.API, *plan.Plan, error) {
	system := r.PathValue("system")
	if _, err := s.savedPlan(system); err != nil {
		writeError(w, http.StatusNotFound, "%v", err)
		return nil, nil, err
	}
	// The signed-in user's rights on the system's cluster.
	api, p, err := s.systemFor(r.Context(), us, system, need, what+" "+system)
	if err != nil {
		writeRightsError(w, err)
		return nil, nil, err
	}
	return api, p, nil
}

// ETA states of RebuildProgress.
const (
	ETAIdle       = "idle"       // nothing to copy
	ETAEstimating = "estimating" // copying, no rate observed yet
	ETAKnown      = "known"      // ETASeconds = pending / observed rate
)

// RebuildProgress is GET /api/v1/systems/{system}/rebuild.
type RebuildProgress struct {
	System string `json:"system"`
	gateway.Rebuild
	// ObservedRateBytesPerSecond: copied bytes over the last
	// WindowSeconds as this server saw them (nil while estimating); the
	// gateway's own rate_bytes_per_second spans its last 2 s only.
	ObservedRateBytesPerSecond *float64 `json:"observed_rate_bytes_per_second"`
	WindowSeconds              float64  `json:"window_seconds"`
	// ETAState: ETAIdle, ETAEstimating or ETAKnown; ObservedETASeconds is
	// set when known. The gateway's own eta_seconds stays as it gave it.
	ETAState           string    `json:"eta_state"`
	ObservedETASeconds *float64  `json:"observed_eta_seconds"`
	Observed           time.Time `json:"observed"`
}

// etaWindow is how far back the observed rate looks; etaMinSpan the least
// time between the samples it is taken from.
const (
	etaWindow  = 60 * time.Second
	etaMinSpan = time.Second
)

// rebuildTracker keeps, per system, the copy progress samples this server
// observed (each read of the rebuild route is one), to derive a rate over
// a window: remaining / rate is steadier than the gateway's 2 s rate.
// The zero value is ready.
type rebuildTracker struct {
	mu      sync.Mutex
	now     func() time.Time // nil: time.Now
	samples map[string][]copySample
}

type copySample struct {
	at      time.Time
	done    int64
	pending int64
}

// observe records r for system and answers the progress with its ETA.
func (t *rebuildTracker) observe(system string, r gateway.Rebuild) RebuildProgress {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := time.Now()
	if t.now != nil {
		now = t.now()
	}
	if t.samples == nil {
		t.samples = map[string][]copySample{}
	}
	out := RebuildProgress{System: system, Rebuild: r, Observed: now.UTC(), ETAState: ETAIdle}
	if r.PendingBytes <= 0 {
		delete(t.samples, system) // work done: the next work starts afresh
		return out
	}
	h := t.samples[system]
	if n := len(h); n > 0 && (r.DoneBytes < h[n-1].done || !now.After(h[n-1].at)) {
		h = nil // an SDS restarted (its counters began again), or a clock step
	}
	h = append(h, copySample{at: now, done: r.DoneBytes, pending: r.PendingBytes})
	// Keep the window, and one sample older than it so that a slow poller
	// still has a span.
	cut := 0
	for cut < len(h)-2 && now.Sub(h[cut+1].at) >= etaWindow {
		cut++
	}
	h = append([]copySample(nil), h[cut:]...)
	t.samples[system] = h
	out.ETAState = ETAEstimating
	first, last := h[0], h[len(h)-1]
	span := last.at.Sub(first.at)
	out.WindowSeconds = math.Round(span.Seconds()*10) / 10
	if span < etaMinSpan || last.done <= first.done {
		return out
	}
	rate := float64(last.done-first.done) / span.Seconds()
	eta := etaSeconds(r.PendingBytes, last.done-first.done, span)
	out.ObservedRateBytesPerSecond, out.ObservedETASeconds, out.ETAState = &rate, &eta, ETAKnown
	return out
}

// etaSeconds is pending / (copied / span), rounded up to whole seconds,
// in exact integers: the float quotient of an exact 30 s came out as
// 30.000000000000004 and showed 31.
func etaSeconds(pending, copied int64, span time.Duration) float64 {
	q := new(big.Int).Mul(big.NewInt(pending), big.NewInt(int64(span)))
	d := new(big.Int).Mul(big.NewInt(copied), big.NewInt(int64(time.Second)))
	q.Add(q, d).Sub(q, big.NewInt(1)) // ceiling division
	q.Quo(q, d)
	if !q.IsInt64() {
		return math.MaxInt64
	}
	return float64(q.Int64())
}

func (s *Server) rebuild(w http.ResponseWriter, r *http.Request, us *userSession) {
	api, _, err := s.systemGateway(w, r, us, "read the rebuild progress of system")
	if err != nil {
		return
	}
	rb, err := api.Rebuild(r.Context())
	if err != nil {
		writeGatewayError(w, err)
		return
	}
	if rb == nil {
		writeGatewayError(w, fmt.Errorf("the gateway answered no rebuild progress"))
		return
	}
	writeJSON(w, http.StatusOK, s.progress.observe(r.PathValue("system"), *rb))
}
