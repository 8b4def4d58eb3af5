package gateway

// Self-healing as the API shows it: maintenance of SDSs and fault sets,
// per-SDS maintenance progress, and the cluster's rebuild/resync/rebalance
// progress in GET /system.

import (
	"fmt"
	"math"
	"net/http"
	"sync"
	"time"

	"github.com/cairn-storage/cairn/appliance/internal/model"
)

// Maintenance progress states of an SDS (sdsView.Maintenance.State).
const (
	// MaintEntering: in maintenance, but some of its copies are still
	// ready (protected mode: serving while extra copies are built) or being
	// filled; do not shut it down yet.
	MaintEntering = "entering"
	// MaintIn: none of its copies is ready, rebuilding or resyncing (all
	// are away or gone): safe to shut down.
	MaintIn = "in-maintenance"
	// MaintResyncing: back from maintenance, some copies still resync (or
	// are still away, their resync about to start).
	MaintResyncing = "resyncing"
)

type maintenanceView struct {
	Mode  string `json:"mode"`  // "instant", "protected" or ""
	State string `json:"state"` // MaintEntering, MaintIn, MaintResyncing or ""
}

// maintenanceOf derives an SDS's maintenance progress from the placement
// maps: what the leader has done so far with its copies.
func (w *world) maintenanceOf(x model.SDS) maintenanceView {
	v := maintenanceView{Mode: model.MaintenanceMode(x.State)}
	active, resync := false, false
	for _, m := range w.maps {
		for _, copies := range m.PGs {
			for _, c := range copies {
				if c.SDSID != x.ID {
					continue
				}
				switch c.State {
				case model.CopyReady, model.CopyRebuild:
					active = true
				case model.CopyResync:
					active, resync = true, true
				case model.CopyAway:
					resync = true // back in normal state: its resync starts
				}
			}
		}
	}
	switch {
	case v.Mode != "" && active:
		v.State = MaintEntering
	case v.Mode != "":
		v.State = MaintIn
	case resync:
		v.State = MaintResyncing
	}
	return v
}

// rebuildView is GET /system's "rebuild": placement groups by condition and
// the fill work of the live SDSs.
type rebuildView struct {
	// DegradedGroups have fewer than 2 ready copies on live SDSs.
	DegradedGroups    int `json:"degraded_groups"`
	RebuildingGroups  int `json:"rebuilding_groups"`  // with a copy being rebuilt
	ResyncingGroups   int `json:"resyncing_groups"`   // with a copy resyncing after maintenance
	RebalancingGroups int `json:"rebalancing_groups"` // more than 2 copies, all healthy: a copy is moving
	// PendingBytes still to copy in running fills; DoneBytes copied since
	// the SDSs started; ResyncBytes of which delta resyncs.
	PendingBytes int64 `json:"pending_bytes"`
	DoneBytes    int64 `json:"done_bytes"`
	ResyncBytes  int64 `json:"resync_bytes"`
	// RateBytesPerSecond: copy rate between the last two statistics
	// publications this gateway saw.
	RateBytesPerSecond float64 `json:"rate_bytes_per_second"`
	// Percent of the running work done (100 when nothing is pending).
	Percent float64 `json:"percent"`
	// ETASeconds: pending / rate; null while the rate is unknown or zero.
	ETASeconds *float64 `json:"eta_seconds"`
}

// groupCounts classifies every placement group of every pool.
func (w *world) groupCounts(r *rebuildView) {
	deviceOK := func(id string) bool {
		d, ok := w.devices[id]
		return ok && (d.State == model.DeviceNormal || d.State == model.DeviceRemoving)
	}
	for _, m := range w.maps {
		for _, copies := range m.PGs {
			ready := 0
			rebuilding, resyncing, healthy := false, false, true
			for _, c := range copies {
				x := w.sdss[c.SDSID]
				up := w.up(c.SDSID)
				switch c.State {
				case model.CopyReady:
					if up && deviceOK(c.DeviceID) {
						ready++
					}
				case model.CopyRebuild:
					rebuilding = true
				case model.CopyResync:
					resyncing = true
					healthy = false
				default:
					healthy = false
				}
				if !up || (x.State != model.SDSNormal && x.State != model.SDSRemoving) {
					healthy = false
				}
			}
			if ready < 2 {
				r.DegradedGroups++
			}
			if rebuilding {
				r.RebuildingGroups++
			}
			if resyncing {
				r.ResyncingGroups++
			}
			if len(copies) > 2 && healthy {
				r.RebalancingGroups++
			}
		}
	}
}

// progress remembers, per SDS, the last statistics sample this gateway saw,
// to derive copy rates and the share of running work done. Each gateway
// keeps its own; a fresh gateway shows rate 0 until the next publication.
type progress struct {
	mu  sync.Mutex
	sds map[string]*progressSample
}

type progressSample struct {
	at   time.Time // the SDS's publication time
	done int64
	rate float64 // bytes/s between the last two publications
	// base is done_bytes when this SDS last had nothing pending: the
	// running work's done part is done - base.
	base int64
}

// rebuildView sums the live SDSs' fill statistics and updates the rates.
func (p *progress) rebuildView(w *world) rebuildView {
	var r rebuildView
	w.groupCounts(&r)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.sds == nil {
		p.sds = map[string]*progressSample{}
	}
	for id := range p.sds {
		if _, ok := w.sdss[id]; !ok {
			delete(p.sds, id) // removed SDS: bound the memory
		}
	}
	var running int64
	for id, st := range w.stats {
		if !w.up(id) {
			continue
		}
		rb := st.Rebuild
		s := p.sds[id]
		switch {
		case s == nil:
			s = &progressSample{at: st.Time, done: rb.DoneBytes, base: rb.DoneBytes}
			p.sds[id] = s
		case rb.DoneBytes < s.done:
			// Counter reset: the SDS restarted.
			*s = progressSample{at: st.Time, done: rb.DoneBytes, base: rb.DoneBytes}
		case st.Time.After(s.at):
			s.rate = float64(rb.DoneBytes-s.done) / st.Time.Sub(s.at).Seconds()
			s.at, s.done = st.Time, rb.DoneBytes
		}
		if rb.PendingBytes == 0 {
			s.base = rb.DoneBytes
		}
		r.PendingBytes += rb.PendingBytes
		r.DoneBytes += rb.DoneBytes
		r.ResyncBytes += rb.ResyncBytes
		r.RateBytesPerSecond += s.rate
		running += rb.DoneBytes - s.base
	}
	r.Percent = 100
	if r.PendingBytes > 0 {
		r.Percent = math.Round(1000*float64(running)/float64(running+r.PendingBytes)) / 10
		if r.RateBytesPerSecond > 0 {
			eta := math.Ceil(float64(r.PendingBytes) / r.RateBytesPerSecond)
			r.ETASeconds = &eta
		}
	} else {
		zero := 0.0
		r.ETASeconds = &zero
	}
	return r
}

// maintenanceRequest is the body of POST .../maintenance.
type maintenanceRequest struct {
	Mode string `json:"mode"` // "instant" or "protected"
}

func (s *Server) enterSDSMaintenance(c *call) (int, any, error) {
	var req maintenanceRequest
	if err := c.decode(&req); err != nil {
		return 0, nil, err
	}
	set, err := s.store.EnterMaintenance(c.ctx, []string{c.ref()}, req.Mode)
	if err != nil {
		return 0, nil, err
	}
	if err := s.followMaintenance(c, JobMaintenanceEnter, objectRef{Kind: model.KindSDS, ID: set[0].ID, Name: set[0].Name}, set); err != nil {
		return 0, nil, err
	}
	return s.viewResponse(c, s.kindOf(model.KindSDS), set[0].ID, http.StatusOK)
}

// followMaintenance records a job that follows a maintenance change to its
// end (Location: /api/v1/jobs/{id}); the answer stays the SDS view(s), as
// the change itself is made at once.
func (s *Server) followMaintenance(c *call, kind string, obj objectRef, set []model.SDS) error {
	ids := make([]string, len(set))
	for i, x := range set {
		ids[i] = x.ID
	}
	_, err := s.createJob(c, kind, obj, ids)
	return err
}

// faultSetRef names the fault set of the path.
func (s *Server) faultSetRef(c *call) objectRef {
	fs, err := s.store.GetFaultSet(c.ctx, c.ref())
	if err != nil {
		return objectRef{Kind: model.KindFaultSet, Name: c.ref()}
	}
	return objectRef{Kind: model.KindFaultSet, ID: fs.ID, Name: fs.Name}
}

func (s *Server) exitSDSMaintenance(c *call) (int, any, error) {
	set, err := s.store.ExitMaintenance(c.ctx, []string{c.ref()})
	if err != nil {
		return 0, nil, err
	}
	if err := s.followMaintenance(c, JobMaintenanceExit, objectRef{Kind: model.KindSDS, ID: set[0].ID, Name: set[0].Name}, set); err != nil {
		return 0, nil, err
	}
	return s.viewResponse(c, s.kindOf(model.KindSDS), set[0].ID, http.StatusOK)
}

func (s *Server) enterFaultSetMaintenance(c *call) (int, any, error) {
	var req maintenanceRequest
	if err := c.decode(&req); err != nil {
		return 0, nil, err
	}
	set, err := s.store.EnterFaultSetMaintenance(c.ctx, c.ref(), req.Mode)
	if err != nil {
		return 0, nil, err
	}
	if err := s.followMaintenance(c, JobMaintenanceEnter, s.faultSetRef(c), set); err != nil {
		return 0, nil, err
	}
	return s.sdsViews(c, set)
}

func (s *Server) exitFaultSetMaintenance(c *call) (int, any, error) {
	set, err := s.store.ExitFaultSetMaintenance(c.ctx, c.ref())
	if err != nil {
		return 0, nil, err
	}
	if err := s.followMaintenance(c, JobMaintenanceExit, s.faultSetRef(c), set); err != nil {
		return 0, nil, err
	}
	return s.sdsViews(c, set)
}

// sdsViews answers the views of a set of SDSs, sorted by name.
func (s *Server) sdsViews(c *call, set []model.SDS) (int, any, error) {
	w, err := c.world()
	if err != nil {
		return 0, nil, err
	}
	byID := map[string]model.SDS{}
	for _, x := range set {
		cur, ok := w.sdss[x.ID]
		if !ok {
			return 0, nil, fmt.Errorf("SDS %s vanished while reading it; retry: %w", x.Name, model.ErrConflict)
		}
		byID[x.ID] = cur
	}
	out := []sdsView{}
	for _, x := range sortedByName(byID, func(v model.SDS) string { return v.Name }) {
		out = append(out, w.sdsView(x))
	}
	return http.StatusOK, out, nil
}
