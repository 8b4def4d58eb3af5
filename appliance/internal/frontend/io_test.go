package frontend

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairn-storage/cairn/appliance/internal/model"
	"github.com/cairn-storage/cairn/appliance/internal/qos"
	"github.com/cairn-storage/cairn/appliance/internal/testcluster"
)

func ptr[T any](v T) *T { return &v }

// waitLimits waits until the frontend enforces want on v and returns how
// long that took.
func waitLimits(t *testing.T, v *Volume, want qos.Limits) time.Duration {
	t.Helper()
	start := time.Now()
	for v.st.lim.Limits() != want {
		if time.Since(start) > 5*time.Second {
			t.Fatalf("limits %+v after 5 s, want %+v", v.st.lim.Limits(), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return time.Since(start)
}

// TestLimitsFollowTheModel: the frontend learns every kind of limit change
// from its catalog, live, within 2 s: the volume's own limits, unset, the
// pool's per-GiB rule (recomputed when the volume grows) and the host's
// mapping limits; and the rate it lets through follows.
func TestLimitsFollowTheModel(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{SDSs: 2, DevicesPerSDS: 1, PGCount: 16})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := c.Store
	vol := c.CreateVolume("v1", 2*model.AllocationUnit, true)
	if _, err := s.CreateHost(ctx, model.HostSpec{Name: "h1", Type: model.HostNBD}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.MapVolume(ctx, "v1", model.MapSpec{Host: "h1"}); err != nil {
		t.Fatal(err)
	}
	f := NewIO(c.Cat, model.HostNBD, "h1")
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Add(1)
	go func() {
		defer wg.Done()
		f.Run(ctx, c.Etcd, time.Second, slog.New(slog.NewTextHandler(io.Discard, nil)))
	}()
	v := f.Wrap(vol)
	if v.st.lim.Limits() != (qos.Limits{}) {
		t.Fatalf("a volume without limits starts with %+v", v.st.lim.Limits())
	}

	change := func(what string, do func() error, want qos.Limits) {
		t.Helper()
		if err := do(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if d := waitLimits(t, v, want); d > 2*time.Second {
			t.Errorf("%s: took %v to reach the frontend (> 2 s)", what, d)
		} else {
			t.Logf("%s: in force after %v", what, d.Round(time.Millisecond))
		}
	}
	change("volume limit", func() error {
		_, err := s.UpdateVolumeQoS(ctx, "v1", model.VolumeQoSUpdate{IOPSLimit: ptr(int64(100))})
		return err
	}, qos.Limits{IOPS: 100})

	// The rate follows: 4 readers for 2 s after the burst.
	rate := func(limit int64) float64 {
		var n atomic.Int64
		stop := make(chan struct{})
		var rw sync.WaitGroup
		for i := 0; i < 4; i++ {
			rw.Add(1)
			go func() {
				defer rw.Done()
				buf := make([]byte, 4096)
				for {
					select {
					case <-stop:
						return
					default:
					}
					if err := v.ReadAt(ctx, buf, 0); err != nil {
						t.Error(err)
						return
					}
					n.Add(1)
				}
			}()
		}
		// Spend the burst: until a 250 ms window runs at the limit's pace
		// (a loaded machine may take longer than the burst's second to
		// spend it, and the rest would inflate the measured rate).
		for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); {
			a := n.Load()
			time.Sleep(250 * time.Millisecond)
			if n.Load()-a <= limit/4*5/4 {
				break
			}
		}
		n0, t0 := n.Load(), time.Now()
		time.Sleep(2 * time.Second)
		r := float64(n.Load()-n0) / time.Since(t0).Seconds()
		close(stop)
		rw.Wait()
		return r
	}
	if r := rate(100); math.Abs(r-100) > 10 {
		t.Errorf("%.0f IOPS under a 100 IOPS limit", r)
	}
	change("volume limit raised", func() error {
		_, err := s.UpdateVolumeQoS(ctx, "v1", model.VolumeQoSUpdate{IOPSLimit: ptr(int64(300))})
		return err
	}, qos.Limits{IOPS: 300})
	if r := rate(300); math.Abs(r-300) > 30 {
		t.Errorf("%.0f IOPS under a 300 IOPS limit", r)
	}
	change("unset", func() error {
		_, err := s.UpdateVolumeQoS(ctx, "v1", model.VolumeQoSUpdate{IOPSLimit: ptr(int64(0))})
		return err
	}, qos.Limits{})
	change("pool rule", func() error {
		_, err := s.UpdatePool(ctx, "pool1", model.PoolUpdate{QoSIOPSPerGiB: ptr(int64(40)), QoSBandwidthPerGiB: ptr(int64(1 << 20))})
		return err
	}, qos.Limits{IOPS: 80, BytesPerSecond: 2 << 20})
	change("volume grown under the rule", func() error {
		_, err := s.ResizeVolume(ctx, "v1", 3*model.AllocationUnit)
		return err
	}, qos.Limits{IOPS: 120, BytesPerSecond: 3 << 20})
	change("mapping limit tighter than the volume's", func() error {
		_, err := s.MapVolume(ctx, "v1", model.MapSpec{Host: "h1", IOPSLimit: 50})
		return err
	}, qos.Limits{IOPS: 50, BytesPerSecond: 3 << 20})
	change("rule off, mapping limit stays", func() error {
		_, err := s.UpdatePool(ctx, "pool1", model.PoolUpdate{QoSIOPSPerGiB: ptr(int64(0)), QoSBandwidthPerGiB: ptr(int64(0))})
		return err
	}, qos.Limits{IOPS: 50})

	// Another host's frontend does not get h1's mapping limit.
	if _, err := s.CreateHost(ctx, model.HostSpec{Name: "h2", Type: model.HostNBD}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.MapVolume(ctx, "v1", model.MapSpec{Host: "h2"}); err != nil {
		t.Fatal(err)
	}
	if l := NewIO(c.Cat, model.HostNBD, "h2").Wrap(vol).st.lim.Limits(); l != (qos.Limits{}) {
		t.Errorf("host h2 got limits %+v from h1's mapping", l)
	}
}

// TestAsyncPathThrottledAndCounted drives the goroutine-free path the way
// the NBD reader does (one loop sending reads with hold, QD 16): the limit
// holds, every completed read is counted with its latency, and the time
// the loop was held back shows as throttled.
func TestAsyncPathThrottledAndCounted(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{SDSs: 2, DevicesPerSDS: 1, PGCount: 16})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	vol := c.CreateVolume("v1", model.AllocationUnit, true)
	const limit = 250
	if _, err := c.Store.UpdateVolumeQoS(ctx, "v1", model.VolumeQoSUpdate{IOPSLimit: ptr(int64(limit))}); err != nil {
		t.Fatal(err)
	}
	f := NewIO(c.Cat, model.HostISCSI, "")
	wg.Add(1)
	go func() {
		defer wg.Done()
		f.Run(ctx, c.Etcd, time.Second, slog.New(slog.NewTextHandler(io.Discard, nil)))
	}()
	v := f.Wrap(vol)
	waitLimits(t, v, qos.Limits{IOPS: limit})
	slots := make(chan struct{}, 16)
	var done atomic.Int64
	loop := func(d time.Duration) {
		end := time.Now().Add(d)
		for i := 0; time.Now().Before(end); i++ {
			slots <- struct{}{}
			buf := make([]byte, 4096)
			v.ReadAtAsync(ctx, buf, int64(i%1024)*4096, len(slots) < cap(slots), func(err error) {
				if err != nil {
					t.Error(err)
				}
				done.Add(1)
				<-slots
			})
		}
		v.FlushHeld()
		for len(slots) > 0 {
			time.Sleep(time.Millisecond)
		}
	}
	loop(1500 * time.Millisecond) // the burst
	n0, t0 := done.Load(), time.Now()
	loop(3 * time.Second)
	rate := float64(done.Load()-n0) / time.Since(t0).Seconds()
	if math.Abs(rate-limit) > limit*0.1 {
		t.Errorf("async reads ran at %.0f IOPS under a %d IOPS limit", rate, limit)
	}
	vols := f.Stats().Volumes
	st, ok := vols[fmt.Sprintf("%016x", vol.ID())]
	if !ok || len(vols) != 1 {
		t.Fatalf("stats %v", vols)
	}
	if int64(st.ReadOps) != done.Load() || st.ReadBytes != st.ReadOps*4096 || st.WriteOps != 0 {
		t.Errorf("counted %d reads (%d bytes), %d completed", st.ReadOps, st.ReadBytes, done.Load())
	}
	var inHist uint64
	for _, n := range st.ReadHist {
		inHist += n
	}
	if inHist != st.ReadOps || st.ReadLatencyNs == 0 {
		t.Errorf("histogram holds %d of %d reads; latency sum %d ns", inHist, st.ReadOps, st.ReadLatencyNs)
	}
	// 3 s at the limit with a queue always full: the loop waited most of
	// that time.
	if st.ThrottledNs < uint64(2*time.Second) {
		t.Errorf("throttled %v in 4.5 s at the limit", time.Duration(st.ThrottledNs))
	}
}
