package gateway

import (
	"fmt"
	"net/http"
	"sort"
	"time"

	"github.com/cairn-storage/cairn/appliance/internal/model"
)

// Health states of GET /system.
const (
	HealthOK              = "ok"               // every SDS up, no device in error, every pool redundant
	HealthDegraded        = "degraded"         // something needs attention; data is still served
	HealthDown            = "down"             // no SDS is up
	HealthEmpty           = "empty"            // bootstrapped, no SDS yet
	HealthNotBootstrapped = "not_bootstrapped" // POST /system/bootstrap first
)

type systemHealth struct {
	Status string `json:"status"`
	SDSs   int    `json:"sds_count"`
	SDSsUp int    `json:"sds_up_count"`
	// SDSsDown, DevicesInError and PoolsNotRedundant hold names.
	SDSsDown          []string `json:"sds_down_names"`
	DevicesInError    []string `json:"device_error_names"`
	PoolsNotRedundant []string `json:"pool_not_redundant_names"`
	Messages          []string `json:"messages"` // what to look at, for humans
}

type systemResponse struct {
	Bootstrapped bool           `json:"bootstrapped"`
	System       *model.System  `json:"system"`
	Health       systemHealth   `json:"health"`
	Capacity     capacityView   `json:"capacity"` // sums over the pools`
	Counts       map[string]int `json:"counts"`
	Rebuild      rebuildView    `json:"rebuild"`
	// Leader is the name of the MDM leader ("" while none is elected).
	Leader string `json:"leader"`
}

func (s *Server) getSystem(c *call) (int, any, error) {
	w, err := c.world()
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, w.systemView(s.prog.rebuildView(w)), nil
}

func (w *world) systemView(rb rebuildView) systemResponse {
	r := systemResponse{Bootstrapped: w.system != nil, System: w.system, Rebuild: rb, Leader: w.leader,
		Counts: map[string]int{"protection_domains": len(w.pds), "fault_sets": len(w.faultSets), "sds": len(w.sdss),
			"devices": len(w.devices), "pools": len(w.pools), "volumes": len(w.volumes), "hosts": len(w.hosts)}}
	h := systemHealth{SDSs: len(w.sdss), SDSsDown: []string{}, DevicesInError: []string{}, PoolsNotRedundant: []string{}, Messages: []string{}}
	for _, x := range w.sdss {
		if w.up(x.ID) {
			h.SDSsUp++
		} else {
			h.SDSsDown = append(h.SDSsDown, x.Name)
		}
	}
	for _, d := range w.devices {
		v := w.deviceView(d)
		if d.State == model.DeviceError || v.ReportedState == model.DeviceError {
			h.DevicesInError = append(h.DevicesInError, d.Name)
		}
	}
	for _, p := range w.pools {
		v := w.poolView(p)
		r.Capacity.add(v.Capacity)
		if !v.Redundant {
			h.PoolsNotRedundant = append(h.PoolsNotRedundant, p.Name)
		}
	}
	r.Capacity.finish()
	sort.Strings(h.SDSsDown)
	sort.Strings(h.DevicesInError)
	sort.Strings(h.PoolsNotRedundant)
	modeOf := map[string]string{}
	for _, x := range w.sdss {
		modeOf[x.Name] = model.MaintenanceMode(x.State)
	}
	for _, n := range h.SDSsDown {
		if m := modeOf[n]; m != "" {
			h.Messages = append(h.Messages, fmt.Sprintf("SDS %s is down while in %s maintenance: start it again, then `cairnctl sds maintenance exit %s`", n, m, n))
			continue
		}
		h.Messages = append(h.Messages, fmt.Sprintf("SDS %s is down (no liveness lease): check `cairn sds` on its host", n))
	}
	if rb.DegradedGroups > 0 {
		eta := "unknown"
		if rb.ETASeconds != nil {
			eta = (time.Duration(*rb.ETASeconds) * time.Second).String()
		}
		h.Messages = append(h.Messages, fmt.Sprintf("%d placement groups have fewer than 2 complete copies (rebuilding %d, resyncing %d; %.1f%% of running work done, ETA %s): data is served but not protected against another failure; watch `cairnctl system info`",
			rb.DegradedGroups, rb.RebuildingGroups, rb.ResyncingGroups, rb.Percent, eta))
	}
	for _, n := range h.DevicesInError {
		h.Messages = append(h.Messages, fmt.Sprintf("device %s is in error: see `cairnctl device info %s`", n, n))
	}
	for _, n := range h.PoolsNotRedundant {
		h.Messages = append(h.Messages, fmt.Sprintf("pool %s has devices on fewer than 2 fault domains: add devices on another SDS/fault set", n))
	}
	switch {
	case w.system == nil:
		h.Status = HealthNotBootstrapped
		h.Messages = append(h.Messages, "bootstrap the system: cairnctl system bootstrap --name NAME")
	case len(w.sdss) == 0:
		h.Status = HealthEmpty
	case h.SDSsUp == 0:
		h.Status = HealthDown
	case len(h.Messages) > 0:
		h.Status = HealthDegraded
	default:
		h.Status = HealthOK
	}
	r.Health = h
	return r
}
