package gatewayfake_test

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/cairn-storage/cairn/vcenter-plugin/internal/gateway"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/gatewayfake"
)

// cluster builds 3 SDSs with one device each in pool p, volumes v1
// (mapped to esx1) and v2 (not mapped), on a stepped clock.
func cluster(t *testing.T) (*gatewayfake.Array, *time.Time) {
	t.Helper()
	ctx := context.Background()
	a := gatewayfake.New()
	a.ResyncTime = 20 * time.Second
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	a.SetClock(func() time.Time { return now })
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(a.Bootstrap(ctx, "c1"))
	_, err := a.CreatePD(ctx, "pd1")
	must(err)
	_, err = a.CreatePool(ctx, gateway.PoolSpec{Name: "p", PD: "pd1"})
	must(err)
	for _, n := range []string{"a", "b", "c"} {
		_, err = a.CreateSDS(ctx, gateway.SDSSpec{Name: n, PD: "pd1", Address: "10.0.0." + n + ":7070"})
		must(err)
		_, err = a.AddDevice(ctx, gateway.DeviceSpec{SDS: n, Pool: "p", Path: "/dev/sdb", Name: n + "1"})
		must(err)
	}
	for _, v := range []string{"v1", "v2"} {
		_, err = a.CreateVolume(ctx, gateway.VolumeSpec{Name: v, Pool: "p", Size: 8 << 30})
		must(err)
	}
	_, err = a.CreateHost(ctx, gateway.HostSpec{Name: "esx1", Type: "iscsi", IQN: "iqn.x:esx1"})
	must(err)
	must(a.MapVolume(ctx, "v1", "esx1"))
	return a, &now
}

func stats(t *testing.T, a *gatewayfake.Array, kind, ref string) *gateway.Statistics {
	t.Helper()
	s, err := a.Statistics(context.Background(), kind, ref)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-6*math.Max(1, math.Abs(b)) }

func TestStatisticsFollowTheSimulatedLoad(t *testing.T) {
	a, now := cluster(t)
	if s := stats(t, a, gateway.KindSystem, ""); s.Timestamp != nil || len(s.History) != 0 || s.IntervalSeconds != 5 {
		t.Fatalf("before the first interval: %+v", s)
	}
	*now = now.Add(4 * time.Second)
	if s := stats(t, a, gateway.KindSystem, ""); s.Timestamp != nil {
		t.Fatal("a sample before a whole interval passed")
	}
	*now = now.Add(56 * time.Second) // 12 intervals
	sys := stats(t, a, gateway.KindSystem, "")
	v1 := stats(t, a, gateway.KindVolumes, "v1")
	v2 := stats(t, a, gateway.KindVolumes, "v2")
	pool := stats(t, a, gateway.KindPools, "p")
	if len(sys.History) != 12 || sys.Timestamp == nil || !sys.Timestamp.Equal(now.Add(0)) {
		t.Fatalf("system: %d points, last %v", len(sys.History), sys.Timestamp)
	}
	total := v1.Read.IOPS + v1.Write.IOPS
	if total < 1000*0.4 || total > 3000*1.6 || !near(v1.Read.BytesPerSecond, v1.Read.IOPS*16384) || !near(v1.Write.BytesPerSecond, v1.Write.IOPS*32768) {
		t.Fatalf("v1 outside the documented load: %+v", v1)
	}
	if math.Abs(v1.Read.IOPS/total-0.7) > 0.01 {
		t.Fatalf("read share %.3f, want 0.7", v1.Read.IOPS/total)
	}
	if v2.Read.IOPS != 0 || v2.Write.IOPS != 0 || len(v2.History) != 12 {
		t.Fatalf("unmapped v2 is not idle: %+v", v2)
	}
	if !near(sys.Read.IOPS, v1.Read.IOPS) || !near(pool.Write.BytesPerSecond, v1.Write.BytesPerSecond) {
		t.Fatalf("system/pool %+v %+v do not add up to v1 %+v", sys.Read, pool.Write, v1.Read)
	}
	if v1.Read.LatencyMeanUs <= 150 || v1.Read.LatencyP99Us <= v1.Read.LatencyMeanUs*4 || v1.Write.LatencyMeanUs <= v1.Read.LatencyMeanUs {
		t.Fatalf("latency %+v %+v", v1.Read, v1.Write)
	}
	// SDSs serve the reads once and the writes twice (both copies).
	var reads, writes float64
	for _, n := range []string{"a", "b", "c"} {
		s := stats(t, a, gateway.KindSDS, n)
		reads += s.Read.IOPS
		writes += s.Write.IOPS
		d := stats(t, a, gateway.KindDevices, n+"1")
		if !near(d.Write.IOPS, s.Write.IOPS) {
			t.Fatalf("device %s1 %v != SDS %v", n, d.Write.IOPS, s.Write.IOPS)
		}
	}
	if !near(reads, v1.Read.IOPS) || !near(writes, 2*v1.Write.IOPS) {
		t.Fatalf("SDSs read %v write %v for volume read %v write %v", reads, writes, v1.Read.IOPS, v1.Write.IOPS)
	}
	if h := stats(t, a, gateway.KindHosts, "esx1"); !near(h.Read.IOPS, v1.Read.IOPS) {
		t.Fatalf("host %+v", h.Read)
	}
	// The load moves.
	moved := false
	for _, p := range v1.History[1:] {
		moved = moved || p.Read.IOPS != v1.History[0].Read.IOPS
	}
	if !moved {
		t.Fatal("the volume's IOPS never changed in 12 intervals")
	}

	// A QoS limit caps what is served; the cut is throttled time.
	lim := int64(300)
	if _, err := a.UpdateVolume(context.Background(), "v1", gateway.VolumeUpdate{IOPSLimit: &lim}); err != nil {
		t.Fatal(err)
	}
	*now = now.Add(5 * time.Second)
	v1 = stats(t, a, gateway.KindVolumes, "v1")
	if got := v1.Read.IOPS + v1.Write.IOPS; got != 300 || v1.ThrottledSeconds <= 0 {
		t.Fatalf("limited to 300 IOPS: %v, throttled %v", got, v1.ThrottledSeconds)
	}

	// Unknown objects and kinds are the gateway's 404.
	var se *gateway.StatusError
	if _, err := a.Statistics(context.Background(), gateway.KindVolumes, "nope"); !errors.As(err, &se) || se.Status != 404 || !errors.Is(err, gateway.ErrNotFound) {
		t.Fatalf("unknown volume: %v", err)
	}
	if _, err := a.Statistics(context.Background(), "luns", "x"); !errors.As(err, &se) || se.Status != 404 {
		t.Fatalf("unknown kind: %v", err)
	}
}

func TestResyncProgressOfMissedWrites(t *testing.T) {
	a, now := cluster(t)
	ctx := context.Background()
	rb, err := a.Rebuild(ctx)
	if err != nil || rb.PendingBytes != 0 || rb.Percent != 100 || rb.ETASeconds == nil || *rb.ETASeconds != 0 {
		t.Fatalf("idle: %+v %v", rb, err)
	}
	if err := a.EnterSDSMaintenance(ctx, "b", gateway.MaintenanceInstant); err != nil {
		t.Fatal(err)
	}
	*now = now.Add(30 * time.Second)
	v1 := stats(t, a, gateway.KindVolumes, "v1")
	var writes float64
	for _, p := range v1.History {
		writes += p.Write.BytesPerSecond * 5
	}
	if b := stats(t, a, gateway.KindSDS, "b"); b.Read.IOPS != 0 || b.Write.IOPS != 0 {
		t.Fatalf("SDS b in maintenance served I/O: %+v", b)
	}
	if err := a.ExitSDSMaintenance(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	rb, _ = a.Rebuild(ctx)
	// b holds 2 of 3 copies' share of every write: it missed 2/3 of them.
	if want := writes * 2 / 3; math.Abs(float64(rb.PendingBytes)-want) > 1 || rb.Percent != 0 || rb.ResyncingGroups != 1 || rb.ETASeconds == nil || *rb.ETASeconds != 20 {
		t.Fatalf("resync start: %+v, want %v pending", rb, want)
	}
	*now = now.Add(5 * time.Second)
	rb, _ = a.Rebuild(ctx)
	if rb.Percent != 25 || *rb.ETASeconds != 15 || rb.DoneBytes == 0 {
		t.Fatalf("a quarter in: %+v", rb)
	}
	*now = now.Add(15 * time.Second)
	rb, _ = a.Rebuild(ctx)
	if rb.PendingBytes != 0 || rb.Percent != 100 || math.Abs(float64(rb.DoneBytes)-writes*2/3) > 1 {
		t.Fatalf("after ResyncTime: %+v", rb)
	}
}
