package frontend

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairn-storage/cairn/appliance/internal/client"
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

// limitedVolume starts a 2-SDS test cluster with volume v1 limited to
// iops. When the test ends, ctx ends and the goroutines counted in wg are
// waited for (before the cluster stops).
func limitedVolume(t *testing.T, iops int64) (*testcluster.Cluster, context.Context, *sync.WaitGroup, *client.Volume) {
	t.Helper()
	c := testcluster.Start(t, testcluster.Options{SDSs: 2, DevicesPerSDS: 1, PGCount: 16})
	ctx, cancel := context.WithCancel(context.Background())
	wg := &sync.WaitGroup{}
	t.Cleanup(func() { cancel(); wg.Wait() })
	vol := c.CreateVolume("v1", model.AllocationUnit, true)
	if _, err := c.Store.UpdateVolumeQoS(ctx, "v1", model.VolumeQoSUpdate{IOPSLimit: ptr(iops)}); err != nil {
		t.Fatal(err)
	}
	return c, ctx, wg, vol
}

// TestAsyncPathThrottledAndCounted drives the goroutine-free path the way
// the NBD reader does (one loop sending reads with hold, QD 16): the limit
// holds, every completed read is counted with its latency, and the time
// the loop was held back shows as throttled.
func TestAsyncPathThrottledAndCounted(t *testing.T) {
	const limit = 250
	c, ctx, wg, vol := limitedVolume(t, limit)
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

// limited wraps vol with a limiter of its own, full now.
func limited(vol *client.Volume, l qos.Limits) *Volume {
	return limitedAt(vol, l, time.Now())
}

// limitedAt wraps vol with a limiter of its own, full at t0.
func limitedAt(vol *client.Volume, l qos.Limits, t0 time.Time) *Volume {
	return &Volume{Volume: vol, st: &volumeIO{lim: qos.NewLimiter(l, t0)}}
}

// TestOffloadCostModel checks what each offloaded command is charged,
// deterministically: the command runs on a fresh limiter of 1 IOPS (or
// 1 MiB/s), full at t0, with its context already cancelled, so no wait is
// slept and the command itself fails at once; the charge is taken before
// it runs and is read off the wait of a probe after it (a one-I/O probe
// waits one second per I/O charged; a 1 MiB probe one second per MiB).
// The probe is stamped t0, before the charge: a bucket never refills
// backwards, so the time the command took (tens of milliseconds on a
// loaded machine, which once read as 1.95 I/Os for 2) does not count.
func TestOffloadCostModel(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{SDSs: 2, DevicesPerSDS: 1, PGCount: 16})
	a := c.CreateVolume("a", model.AllocationUnit, true)
	b := c.CreateVolume("b", model.AllocationUnit, true)
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	pattern := bytes.Repeat([]byte{0xA5}, 512)
	zeros := make([]byte, 512)

	// measure runs cmd on fresh limiters for a and b and returns the I/Os
	// and MiB each was charged.
	type charge struct{ ios, mib float64 }
	measure := func(cmd func(va, vb *Volume)) (ca, cb charge) {
		probe := func(lim qos.Limits, n int64) (float64, float64) {
			t0 := time.Now()
			va, vb := limitedAt(a, lim, t0), limitedAt(b, lim, t0)
			cmd(va, vb)
			return va.st.lim.Admit(n, t0).Seconds(), vb.st.lim.Admit(n, t0).Seconds()
		}
		ca.ios, cb.ios = probe(qos.Limits{IOPS: 1}, 0)
		ca.mib, cb.mib = probe(qos.Limits{BytesPerSecond: 1 << 20}, 1<<20)
		return ca, cb
	}
	near := func(got charge, ios, mib float64) bool {
		return math.Abs(got.ios-ios) < 1e-6 && math.Abs(got.mib-mib) < 1e-6
	}
	cases := []struct {
		what string
		cmd  func(va, vb *Volume)
		a, b charge // want
	}{
		{"WRITE SAME 16 MiB, pattern", func(va, _ *Volume) { _ = va.WriteSame(cancelled, pattern, 0, 16<<20) }, charge{16, 16}, charge{}},
		{"WRITE SAME 4 KiB, pattern", func(va, _ *Volume) { _ = va.WriteSame(cancelled, pattern, 0, 4096) }, charge{1, 4096.0 / (1 << 20)}, charge{}},
		{"WRITE SAME 16 MiB, zeros", func(va, _ *Volume) { _ = va.WriteSame(cancelled, zeros, 0, 16<<20) }, charge{1, 0}, charge{}},
		{"WRITE ZEROES 1 GiB", func(va, _ *Volume) { _ = va.WriteZeroes(cancelled, 0, 1<<30, false) }, charge{2, 0}, charge{}},
		{"UNMAP 512 MiB", func(va, _ *Volume) { _ = va.Unmap(cancelled, 0, 512<<20) }, charge{1, 0}, charge{}},
		{"UNMAP 512 MiB + 512 bytes", func(va, _ *Volume) { _ = va.Unmap(cancelled, 0, 512<<20+512) }, charge{2, 0}, charge{}},
		{"UNMAP the whole volume", func(va, _ *Volume) { _ = va.Unmap(cancelled, 0, a.Size()) }, charge{2, 0}, charge{}},
		{"XCOPY 4 MiB, b to a", func(va, vb *Volume) { _ = va.CopyFrom(cancelled, vb, 0, 0, 4<<20) }, charge{4, 4}, charge{4, 4}},
		{"XCOPY 3 MiB + 512 bytes within a", func(va, _ *Volume) { _ = va.CopyFrom(cancelled, va, 0, 8<<20, 3<<20+512) }, charge{8, 2 * (3 + 512.0/(1<<20))}, charge{}},
		{"XCOPY 4 MiB from a client volume", func(va, _ *Volume) { _ = va.CopyFrom(cancelled, b, 0, 0, 4<<20) }, charge{4, 4}, charge{}},
	}
	for _, tc := range cases {
		ga, gb := measure(tc.cmd)
		if !near(ga, tc.a.ios, tc.a.mib) || !near(gb, tc.b.ios, tc.b.mib) {
			t.Errorf("%s: charged %.2f I/Os %.2f MiB (source %.2f I/Os %.2f MiB); want %v I/Os %v MiB (source %v, %v)",
				tc.what, ga.ios, ga.mib, gb.ios, gb.mib, tc.a.ios, tc.a.mib, tc.b.ios, tc.b.mib)
		}
	}

	// The unit arithmetic at the sizes hosts send: an NBD TRIM of the
	// largest length the protocol can carry, and a whole 2 TiB volume.
	for _, tc := range []struct{ length, unit, want int64 }{
		{0, transferUnit, 1},
		{4 << 20, transferUnit, 4},        // ESXi's default XCOPY segment
		{0xFFFF * 512, transferUnit, 32},  // the largest XCOPY segment
		{1<<32 - 512, deallocUnit, 8},     // the largest NBD TRIM
		{2 << 40, deallocUnit, 4096},      // 2 TiB: 2 s at 2,000 IOPS
		{(1 << 20) * 512, deallocUnit, 1}, // MAXIMUM UNMAP LBA COUNT
		{16 << 20, deallocUnit, 1},        // MAXIMUM WRITE SAME LENGTH
	} {
		if got := commandIOs(tc.length, tc.unit); got != tc.want {
			t.Errorf("commandIOs(%d, %d) = %d, want %d", tc.length, tc.unit, got, tc.want)
		}
	}
}

// TestOffloadsThrottled runs bursts of WRITE SAME, EXTENDED COPY and UNMAP
// for real on a volume limited to 20 IOPS: each phase costs 20 I/Os more
// than the bucket held, so it takes a second; the commands that moved data
// are counted. The same bursts on an unlimited volume are never held.
func TestOffloadsThrottled(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{SDSs: 2, DevicesPerSDS: 1, PGCount: 16})
	ctx := context.Background()
	pattern := bytes.Repeat([]byte{0x5A}, 512)
	src := limited(c.CreateVolume("src", model.AllocationUnit, true), qos.Limits{})
	if err := src.WriteSame(ctx, pattern, 0, 20<<20); err != nil {
		t.Fatal(err)
	}
	bursts := func(v *Volume) (took [3]time.Duration) {
		phase := func(i, n int, cmd func(i int) error) {
			start := time.Now()
			for k := 0; k < n; k++ {
				if err := cmd(k); err != nil {
					t.Fatal(err)
				}
			}
			took[i] = time.Since(start)
		}
		// 10 × 4 MiB: 40 I/Os from a bucket of 20.
		phase(0, 10, func(k int) error { return v.WriteSame(ctx, pattern, int64(k)*4<<20, 4<<20) })
		// 5 × 4 MiB: 20 I/Os on the destination, 20 on the source.
		phase(1, 5, func(k int) error { return v.CopyFrom(ctx, src, int64(k)*4<<20, 64<<20+int64(k)*4<<20, 4<<20) })
		// 10 × the whole 1 GiB volume: 2 I/Os each.
		phase(2, 10, func(int) error { return v.Unmap(ctx, 0, v.Size()) })
		return took
	}

	// The same bursts unlimited first: what the commands themselves take on
	// this machine now (under -race on a shared machine, seconds), so that
	// the limited run is judged by the hold it adds, not by wall time.
	free := limited(c.CreateVolume("free", model.AllocationUnit, true), qos.Limits{})
	freeTook := bursts(free)
	if w, st := free.st.lim.Throttled(), free.st.io.Snapshot(); w != 0 || st.ThrottledNs != 0 {
		t.Errorf("unlimited volume held %v (counted %v)", w, time.Duration(st.ThrottledNs))
	}

	lim := limited(c.CreateVolume("limited", model.AllocationUnit, true), qos.Limits{IOPS: 20})
	for i, d := range bursts(lim) {
		// At least the second the I/Os past the bucket take, and not much
		// more than that second on top of the commands' own time (the bucket
		// refills while they run, so the hold is at most the second).
		if d < 900*time.Millisecond || d > 2*freeTook[i]+3*time.Second {
			t.Errorf("phase %d (20 I/Os past the bucket at 20 IOPS) took %v (unlimited: %v); want about 1 s more than unlimited", i, d, freeTook[i])
		}
	}
	st := lim.st.io.Snapshot()
	if st.WriteOps != 15 || st.WriteBytes != 60<<20 || st.ReadOps != 0 {
		t.Errorf("limited volume counted %d writes (%d bytes), %d reads; want 15 writes of 60 MiB (the unmaps move no data)",
			st.WriteOps, st.WriteBytes, st.ReadOps)
	}
	// The waits add up to 3 s less the time the commands themselves took
	// (the bucket refills meanwhile; the unlimited run says how long that
	// is on this machine now), and never more than the 3 s. Where the
	// commands alone take 3 s or more (a loaded machine), the bucket refills
	// as fast as they drain it and no wait at all is right.
	var commands time.Duration
	for _, d := range freeTook {
		commands += d
	}
	held := time.Duration(st.ThrottledNs)
	if held < 0 || held > 3*time.Second+500*time.Millisecond || held < 3*time.Second-commands-time.Second {
		t.Errorf("limited volume throttled %v; want 3 s less the commands' own time (%v unlimited)", held, commands)
	}
	// Both runs copied 5 × 4 MiB from it.
	if s := src.st.io.Snapshot(); s.ReadOps != 10 || s.ReadBytes != 40<<20 {
		t.Errorf("copy source counted %d reads (%d bytes); want 10 of 40 MiB", s.ReadOps, s.ReadBytes)
	}

	if w := src.st.lim.Throttled(); w != 0 {
		t.Errorf("unlimited copy source held %v", w)
	}
}

// TestLimitSharedAcrossFrontends: a volume's limit holds for the volume
// while two frontends serve it at once (an ESXi host's round robin over two
// SVMs, or two hosts): each learns the other's rate from the published
// counters and admits its share, so together they stay at the limit, and
// one alone gets the whole limit again once the other stops.
func TestLimitSharedAcrossFrontends(t *testing.T) {
	const limit = 300
	c, ctx, wg, vol := limitedVolume(t, limit)
	const interval = 500 * time.Millisecond
	var vs []*Volume
	for range 2 {
		f := NewIO(c.Cat, model.HostISCSI, "")
		wg.Add(1)
		go func() {
			defer wg.Done()
			f.Run(ctx, c.Etcd, interval, slog.New(slog.NewTextHandler(io.Discard, nil)))
		}()
		vs = append(vs, f.Wrap(vol))
	}
	// load keeps 8 reads in flight on v until stop is closed, counting
	// the completed ones.
	load := func(v *Volume, done *atomic.Int64, stop chan struct{}) {
		defer wg.Done()
		var inner sync.WaitGroup
		for w := range 8 {
			inner.Add(1)
			go func() {
				defer inner.Done()
				buf := make([]byte, 4096)
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					if err := v.ReadAt(ctx, buf, int64((i*8+w)%256)*4096); err != nil && ctx.Err() == nil {
						t.Error(err)
						return
					}
					done.Add(1)
				}
			}()
		}
		inner.Wait()
	}
	rate := func(counters []*atomic.Int64, d time.Duration) float64 {
		var n0 int64
		for _, c := range counters {
			n0 += c.Load()
		}
		t0 := time.Now()
		time.Sleep(d)
		var n1 int64
		for _, c := range counters {
			n1 += c.Load()
		}
		return float64(n1-n0) / time.Since(t0).Seconds()
	}
	var a, b atomic.Int64
	stopA, stopB := make(chan struct{}), make(chan struct{})
	wg.Add(2)
	go load(vs[0], &a, stopA)
	go load(vs[1], &b, stopB)
	time.Sleep(4 * interval) // the bursts, and the shares settle
	// Over the limit by more than 15 % is the failure this test is for; under
	// it by up to 30 % is allowed, because a loaded 2-core machine running
	// -race cannot always keep 16 reads at 300 IOPS.
	within := func(got float64) bool { return got <= limit*1.15 && got >= limit*0.7 }
	if got := rate([]*atomic.Int64{&a, &b}, 3*time.Second); !within(got) {
		t.Errorf("two frontends together ran at %.0f IOPS under a %d IOPS volume limit", got, limit)
	}
	close(stopB)
	time.Sleep(4 * interval) // the other's counters go quiet: the whole limit comes back
	if got := rate([]*atomic.Int64{&a}, 3*time.Second); !within(got) {
		t.Errorf("one frontend alone ran at %.0f IOPS under a %d IOPS volume limit", got, limit)
	}
	close(stopA)
}
