package gateway_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/cairn-storage/cairn/vcenter-plugin/internal/gateway"
)

// The gateway's answers, as appliance/internal/gateway serves them
// (statistics.go statsResponse, rebuild.go rebuildView, errorf).
const (
	wireStatistics = `{"timestamp":"2026-11-24T07:01:05Z","interval_seconds":5,
 "read":{"iops":1200.0,"bytes_per_second":4915200.0,"latency_mean_us":310.5,"latency_p99_us":1800.0},
 "write":{"iops":800.0,"bytes_per_second":3276800.0,"latency_mean_us":420.0,"latency_p99_us":2500.0},
 "throttled_seconds":0.25,
 "history":[{"timestamp":"2026-11-24T07:01:00Z","read":{"iops":1100,"bytes_per_second":4505600,"latency_mean_us":300,"latency_p99_us":1700},"write":{"iops":700,"bytes_per_second":2867200,"latency_mean_us":400,"latency_p99_us":2400},"throttled_seconds":0},
  {"timestamp":"2026-11-24T07:01:05Z","read":{"iops":1200.0,"bytes_per_second":4915200.0,"latency_mean_us":310.5,"latency_p99_us":1800.0},"write":{"iops":800.0,"bytes_per_second":3276800.0,"latency_mean_us":420.0,"latency_p99_us":2500.0},"throttled_seconds":0.25}]}`
	wireFresh  = `{"timestamp":null,"interval_seconds":5,"read":{"iops":0,"bytes_per_second":0,"latency_mean_us":0,"latency_p99_us":0},"write":{"iops":0,"bytes_per_second":0,"latency_mean_us":0,"latency_p99_us":0},"throttled_seconds":0,"history":[]}`
	wireSystem = `{"bootstrapped":true,"system":{"id":"abc","name":"c1","created":"2026-01-01T00:00:00Z"},"health":{"status":"degraded","sds_count":3,"sds_up_count":3,"sds_down_names":[],"device_error_names":[],"pool_not_redundant_names":[],"messages":[]},"capacity":{"raw":10,"usable":4,"allocated":1,"thick_reserved":0},"counts":{"sds":3},
 "rebuild":{"degraded_groups":12,"rebuilding_groups":12,"resyncing_groups":0,"rebalancing_groups":0,"pending_bytes":1073741824,"done_bytes":3221225472,"resync_bytes":0,"rate_bytes_per_second":104857600,"percent":75,"eta_seconds":11},"leader":"mdm1"}`
)

func TestStatisticsWire(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/v1/login", func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"token":"tok","expires":"2030-01-01T00:00:00Z","user":"admin","role":"admin"}`))
	})
	var paths []string
	mux.HandleFunc("GET /api/v1/statistics", func(w http.ResponseWriter, r *http.Request) {
		paths = append(paths, r.URL.EscapedPath())
		_, _ = w.Write([]byte(wireFresh))
	})
	mux.HandleFunc("GET /api/v1/statistics/{kind}/{ref}", func(w http.ResponseWriter, r *http.Request) {
		paths = append(paths, r.URL.EscapedPath())
		if r.PathValue("ref") != "vol 1" {
			w.WriteHeader(404)
			_, _ = w.Write([]byte(`{"code":"not_found","field":"ref","message":"volume \"` + r.PathValue("ref") + `\" not found"}`))
			return
		}
		_, _ = w.Write([]byte(wireStatistics))
	})
	mux.HandleFunc("GET /api/v1/system", func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte(wireSystem)) })
	ts := httptest.NewTLSServer(mux)
	defer ts.Close()
	c, err := gateway.NewHTTPClient(gateway.Config{URL: ts.URL, Username: "admin", Password: "x", Thumbprint: gateway.Thumbprint(ts.Certificate().Raw)})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	sys, err := c.Statistics(ctx, gateway.KindSystem, "")
	if err != nil || sys.Timestamp != nil || sys.IntervalSeconds != 5 || len(sys.History) != 0 {
		t.Fatalf("fresh system: %+v %v", sys, err)
	}
	v, err := c.Statistics(ctx, gateway.KindVolumes, "vol 1")
	if err != nil || v.Timestamp == nil || v.Read.IOPS != 1200 || v.Write.LatencyP99Us != 2500 || v.ThrottledSeconds != 0.25 ||
		len(v.History) != 2 || v.History[0].Write.BytesPerSecond != 2867200 {
		t.Fatalf("volume: %+v %v", v, err)
	}
	_, err = c.Statistics(ctx, gateway.KindVolumes, "nope")
	var se *gateway.StatusError
	if !errors.As(err, &se) || se.Status != 404 || se.Message != `volume "nope" not found` {
		t.Fatalf("unknown volume: %v", err)
	}
	if _, err := c.Statistics(ctx, "luns", "x"); err == nil || !strings.Contains(err.Error(), "use one of") {
		t.Fatalf("unknown kind asked: %v", err)
	}
	if want := []string{"/api/v1/statistics", "/api/v1/statistics/volumes/vol%201", "/api/v1/statistics/volumes/nope"}; strings.Join(paths, " ") != strings.Join(want, " ") {
		t.Fatalf("paths %v", paths)
	}
	rb, err := c.Rebuild(ctx)
	if err != nil || rb.PendingBytes != 1<<30 || rb.DoneBytes != 3<<30 || rb.Percent != 75 || rb.RebuildingGroups != 12 || rb.ETASeconds == nil || *rb.ETASeconds != 11 {
		t.Fatalf("rebuild %+v %v", rb, err)
	}
}
