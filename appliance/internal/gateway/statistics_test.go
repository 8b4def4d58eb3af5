package gateway

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairn-storage/cairn/appliance/internal/frontend"
	"github.com/cairn-storage/cairn/appliance/internal/model"
	"github.com/cairn-storage/cairn/appliance/internal/testcluster"
)

type statsBody struct {
	Timestamp       *time.Time `json:"timestamp"`
	IntervalSeconds float64    `json:"interval_seconds"`
	Read            struct {
		IOPS           float64 `json:"iops"`
		BytesPerSecond float64 `json:"bytes_per_second"`
		LatencyMeanUs  float64 `json:"latency_mean_us"`
		LatencyP99Us   float64 `json:"latency_p99_us"`
	} `json:"read"`
	Write struct {
		IOPS float64 `json:"iops"`
	} `json:"write"`
	ThrottledSeconds float64           `json:"throttled_seconds"`
	History          []json.RawMessage `json:"history"`
}

// TestStatisticsFromARealCluster: a known load through a frontend volume
// (8 readers held to 200 IOPS by the volume's QoS limit) shows in the
// statistics of the volume, its pool, its host, the system and the SDSs;
// an SDS restart does not make any figure drop below zero or jump.
func TestStatisticsFromARealCluster(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{SDSs: 3, DevicesPerSDS: 1, PGCount: 16})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	vol := c.CreateVolume("v1", model.AllocationUnit, true)
	h, err := c.Store.CreateHost(ctx, model.HostSpec{Name: "h1", Type: model.HostNBD})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Store.MapVolume(ctx, "v1", model.MapSpec{Host: "h1"}); err != nil {
		t.Fatal(err)
	}
	const limit = 200
	if _, err := c.Store.UpdateVolumeQoS(ctx, "v1", model.VolumeQoSUpdate{IOPSLimit: ptr(int64(limit))}); err != nil {
		t.Fatal(err)
	}
	fio := frontend.NewIO(c.Cat, model.HostNBD, "h1")
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		fio.Run(ctx, c.Etcd, 300*time.Millisecond, slog.New(slog.NewTextHandler(io.Discard, nil)))
	}()
	fv := fio.Wrap(vol)
	e := newClusterEnv(t, c)
	e.srv.stats = newStatsSampler(time.Second)
	wg.Add(1)
	go func() { defer wg.Done(); e.srv.runStatistics(ctx) }()

	// Before any sample: no timestamp, no history, zeros.
	var s statsBody
	e.get("/api/v1/statistics/volumes/v1", e.admin, &s)
	if s.Timestamp != nil || len(s.History) != 0 || s.IntervalSeconds != 1 {
		t.Fatalf("statistics before the first sample: %+v", s)
	}

	var done atomic.Int64
	stop := make(chan struct{})
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			buf := make([]byte, 4096)
			for n := int64(0); ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				if err := fv.ReadAt(ctx, buf, ((n*8+int64(i))%4096)*4096); err != nil {
					if ctx.Err() == nil {
						t.Error(err)
					}
					return
				}
				done.Add(1)
			}
		}(i)
	}
	t.Cleanup(func() { close(stop); cancel(); wg.Wait() })

	// measured: the readers' own rate over the last 3 s.
	measure := func() float64 {
		n0, t0 := done.Load(), time.Now()
		time.Sleep(3 * time.Second)
		return float64(done.Load()-n0) / time.Since(t0).Seconds()
	}
	time.Sleep(2 * time.Second) // the burst (one second of the limit) is spent
	rate := measure()
	if math.Abs(rate-limit) > limit*0.1 {
		t.Fatalf("readers ran at %.0f IOPS under a %d IOPS limit", rate, limit)
	}
	check := func(path string, want float64, tol float64) statsBody {
		t.Helper()
		var s statsBody
		e.get(path, e.admin, &s)
		if s.Timestamp == nil || time.Since(*s.Timestamp) > 3*time.Second {
			t.Fatalf("%s: stale or no sample: %+v", path, s)
		}
		if math.Abs(s.Read.IOPS-want) > want*tol {
			t.Errorf("%s: read IOPS %.1f, want %.0f ±%.0f%%", path, s.Read.IOPS, want, tol*100)
		}
		return s
	}
	v := check("/api/v1/statistics/volumes/v1", rate, 0.1)
	if v.Read.BytesPerSecond < v.Read.IOPS*4096*0.99 || v.Read.BytesPerSecond > v.Read.IOPS*4096*1.01 {
		t.Errorf("volume read bandwidth %.0f B/s for %.0f IOPS of 4 KiB", v.Read.BytesPerSecond, v.Read.IOPS)
	}
	if v.Read.LatencyMeanUs <= 0 || v.Read.LatencyP99Us < v.Read.LatencyMeanUs {
		t.Errorf("volume latency mean %.0f µs, p99 %.0f µs", v.Read.LatencyMeanUs, v.Read.LatencyP99Us)
	}
	// 8 readers held to 200 IOPS wait most of the time: several seconds of
	// throttling per 1 s interval.
	if v.ThrottledSeconds < 1 {
		t.Errorf("throttled %.2f s per interval, want > 1", v.ThrottledSeconds)
	}
	if v.Write.IOPS != 0 {
		t.Errorf("write IOPS %.1f without writes", v.Write.IOPS)
	}
	if len(v.History) < 3 {
		t.Errorf("history has %d points after 5 s at 1 s", len(v.History))
	}
	check("/api/v1/statistics/volumes/"+vol.Name(), rate, 0.1)
	check("/api/v1/statistics/hosts/"+h.ID, rate, 0.1)
	check("/api/v1/statistics/pools/pool1", rate, 0.1)
	check("/api/v1/statistics", rate, 0.1)
	// Every 4 KiB read is one read at one primary SDS.
	sdsSum := func() float64 {
		var sum float64
		for _, x := range c.SDSs {
			var s statsBody
			e.get("/api/v1/statistics/sds/"+x.Name, e.admin, &s)
			sum += s.Read.IOPS
		}
		return sum
	}
	if got := sdsSum(); math.Abs(got-rate) > rate*0.15 {
		t.Errorf("SDSs served %.0f read IOPS in all; the frontend %.0f", got, rate)
	}

	// An SDS restarts: its counters start again from zero. No figure
	// goes negative or jumps; the volume keeps its rate once the reads
	// flow again.
	c.StopSDS(1)
	c.StartSDS(1)
	time.Sleep(2 * time.Second)
	for i := 0; i < 4; i++ {
		time.Sleep(time.Second)
		for _, x := range c.SDSs {
			var s statsBody
			e.get("/api/v1/statistics/sds/"+x.Name, e.admin, &s)
			if s.Read.IOPS < 0 || s.Read.IOPS > 2*limit {
				t.Errorf("after a restart SDS %s reports %.0f read IOPS", x.Name, s.Read.IOPS)
			}
		}
	}
	// The reads flow again at the limit, and the volume's figure follows
	// them: within 10 % of the readers' own rate, within 20 s (on a loaded
	// machine the first intervals after the restart can still be slower
	// than the 3 s the readers measure: CI once saw 198 against 234).
	for deadline := time.Now().Add(20 * time.Second); ; {
		rate = measure()
		var s statsBody
		e.get("/api/v1/statistics/volumes/v1", e.admin, &s)
		if math.Abs(s.Read.IOPS-rate) <= rate*0.1 {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("after an SDS restart the volume reports %.1f read IOPS, its readers ran at %.0f", s.Read.IOPS, rate)
			break
		}
	}

	// Refused: unknown kinds and objects. (Not e.fails: the running
	// cluster writes to etcd all the time.)
	for _, c := range []struct {
		status      int
		path, token string
		msg         string
	}{
		{404, "/api/v1/statistics/widgets/x", e.admin, `no statistics for "widgets"`},
		{404, "/api/v1/statistics/volumes/nope", e.admin, `volume "nope" not found`},
		{401, "/api/v1/statistics", "", "missing bearer token"},
	} {
		st, body := e.do("GET", c.path, c.token, "")
		m, _ := body.(map[string]any)
		if msg, _ := m["message"].(string); st != c.status || !strings.Contains(msg, c.msg) {
			t.Errorf("GET %s: %d %v; want %d with %q", c.path, st, body, c.status, c.msg)
		}
	}
}

func ptr[T any](v T) *T { return &v }
