package gateway

import (
	"context"
	"fmt"
	"net/http"
	"time"
)

// Statistics and rebuild progress as the gateway serves them
// (docs/api.md sections 8 and 9; appliance/internal/gateway statistics.go
// and rebuild.go): rates of the last sample interval and up to 10 minutes
// of history at that interval, oldest first.

// Statistics kinds: the gateway's collection names under /statistics/.
// KindSystem is the whole system (GET /statistics).
const (
	KindSystem  = "system"
	KindPools   = "pools"
	KindVolumes = "volumes"
	KindSDS     = "sds"
	KindDevices = "devices"
	KindHosts   = "hosts"
)

// StatisticsKinds are the kinds Statistics accepts.
var StatisticsKinds = []string{KindSystem, KindPools, KindVolumes, KindSDS, KindDevices, KindHosts}

// Rate is one direction (read or write) of one sample interval.
type Rate struct {
	IOPS           float64 `json:"iops"`
	BytesPerSecond float64 `json:"bytes_per_second"`
	LatencyMeanUs  float64 `json:"latency_mean_us"`
	LatencyP99Us   float64 `json:"latency_p99_us"`
}

// StatPoint is one sample of one object.
type StatPoint struct {
	Timestamp time.Time `json:"timestamp"`
	Read      Rate      `json:"read"`
	Write     Rate      `json:"write"`
	// ThrottledSeconds: time QoS held this object's requests back during
	// the interval (summed over frontends).
	ThrottledSeconds float64 `json:"throttled_seconds"`
}

// Statistics is GET /statistics and /statistics/{kind}/{ref}. Timestamp is
// nil until the gateway took its first sample.
type Statistics struct {
	Timestamp        *time.Time  `json:"timestamp"`
	IntervalSeconds  float64     `json:"interval_seconds"`
	Read             Rate        `json:"read"`
	Write            Rate        `json:"write"`
	ThrottledSeconds float64     `json:"throttled_seconds"`
	History          []StatPoint `json:"history"`
}

// Rebuild is GET /system's "rebuild": placement groups by condition and
// the copy work of the live SDSs (rebuild, rebalance and resync fills).
type Rebuild struct {
	DegradedGroups    int `json:"degraded_groups"`
	RebuildingGroups  int `json:"rebuilding_groups"`
	ResyncingGroups   int `json:"resyncing_groups"`
	RebalancingGroups int `json:"rebalancing_groups"`
	// PendingBytes still to copy; DoneBytes copied since the SDSs started
	// (cumulative: it drops only when an SDS restarts); ResyncBytes of
	// DoneBytes were delta resyncs.
	PendingBytes int64 `json:"pending_bytes"`
	DoneBytes    int64 `json:"done_bytes"`
	ResyncBytes  int64 `json:"resync_bytes"`
	// RateBytesPerSecond between the gateway's last two samples (2 s).
	RateBytesPerSecond float64 `json:"rate_bytes_per_second"`
	Percent            float64 `json:"percent"`
	// ETASeconds: nil while the gateway knows no rate.
	ETASeconds *float64 `json:"eta_seconds"`
}

// StatisticsReader is the read side the dashboards use.
type StatisticsReader interface {
	// Statistics of the system (kind KindSystem, ref "") or of one
	// object (ref: id or name). An unknown object is ErrNotFound.
	Statistics(ctx context.Context, kind, ref string) (*Statistics, error)
	// Rebuild is the copy work in progress (GET /system's "rebuild").
	Rebuild(ctx context.Context) (*Rebuild, error)
}

// CheckStatisticsKind refuses a kind the gateway has no statistics for.
func CheckStatisticsKind(kind, ref string) error {
	for _, k := range StatisticsKinds {
		if k == kind {
			if kind == KindSystem && ref != "" {
				return fmt.Errorf("the system's statistics take no object name (got %q)", ref)
			}
			if kind != KindSystem && ref == "" {
				return fmt.Errorf("statistics of %s: give the object's name or id", kind)
			}
			return nil
		}
	}
	return fmt.Errorf("no statistics for %q: use one of %v", kind, StatisticsKinds)
}

// Statistics reads GET /api/v1/statistics[/{kind}/{ref}].
func (c *HTTPClient) Statistics(ctx context.Context, kind, ref string) (*Statistics, error) {
	if err := CheckStatisticsKind(kind, ref); err != nil {
		return nil, err
	}
	path := "/api/v1/statistics"
	if kind != KindSystem {
		path += "/" + esc(kind) + "/" + esc(ref)
	}
	var out Statistics
	if err := c.do(ctx, http.MethodGet, path, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Rebuild reads the "rebuild" part of GET /api/v1/system.
func (c *HTTPClient) Rebuild(ctx context.Context) (*Rebuild, error) {
	var out struct {
		Rebuild *Rebuild `json:"rebuild"`
	}
	if err := c.do(ctx, http.MethodGet, "/api/v1/system", nil, &out); err != nil {
		return nil, err
	}
	if out.Rebuild == nil {
		return nil, &StatusError{Method: http.MethodGet, Path: "/api/v1/system", Status: http.StatusNotImplemented,
			Message: "this gateway reports no rebuild progress: upgrade the system's gateways"}
	}
	return out.Rebuild, nil
}
