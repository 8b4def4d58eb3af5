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
	SDSs   int    `json:"sdss"`
	SDSsUp int    `json:"sdss_up"`
	// SDSsDown, DevicesInError and PoolsNotRedundant hold names.
	SDSsDown          []string `json:"sdss_down"`
	DevicesInError    []string `json:"devices_in_error"`
	PoolsNotRedundant []string `json:"pools_not_redundant"`
	Messages          []string `json:"messages"` // what to look at, for humans
}

type systemCapacity struct {
	Raw           int64 `json:"raw"`            // bytes on devices in state normal
	Usable        int64 `json:"usable"`         // for data: (raw - spare) / 2 copies, over pools
	Used          int64 `json:"used"`           // raw bytes allocated on devices (both copies)
	ThickReserved int64 `json:"thick_reserved"` // sizes of thick volumes
}

type systemResponse struct {
	Bootstrapped bool           `json:"bootstrapped"`
	System       *model.System  `json:"system"`
	Health       systemHealth   `json:"health"`
	Capacity     systemCapacity `json:"capacity"`
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
		Counts: map[string]int{"pds": len(w.pds), "fault_sets": len(w.faultSets), "sdss": len(w.sdss),
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
		if d.State == model.DeviceError || v.Reported == model.DeviceError {
			h.DevicesInError = append(h.DevicesInError, d.Name)
		}
		if d.State == model.DeviceNormal {
			r.Capacity.Raw += d.Capacity
		}
		r.Capacity.Used += v.Used
	}
	for _, p := range w.pools {
		v := w.poolView(p)
		r.Capacity.Usable += v.Capacity.Usable
		r.Capacity.ThickReserved += v.Capacity.ThickUsed
		if !v.Redundant {
			h.PoolsNotRedundant = append(h.PoolsNotRedundant, p.Name)
		}
	}
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
