package iostats

import (
	"math"
	"testing"
	"time"
)

func TestBuckets(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want int
	}{
		{0, 0}, {999 * time.Nanosecond, 0}, {time.Microsecond, 1}, {2 * time.Microsecond, 5},
		{1500 * time.Nanosecond, 3}, {time.Hour, Buckets - 1},
	} {
		if got := BucketOf(c.d); got != c.want {
			t.Errorf("BucketOf(%v) = %d, want %d", c.d, got, c.want)
		}
	}
	// Every latency lies below its bucket's upper bound, and above the
	// previous one's: the bound overestimates by less than 2^(1/4).
	for d := time.Duration(1000); d < 10*time.Second; d = d*9/8 + 1 {
		b := BucketOf(d)
		us := float64(d) / 1e3
		if up := BucketUpper(b); us >= up || us < BucketUpper(b-1) || up/us > math.Pow(2, 0.25)+1e-9 {
			t.Fatalf("%v in bucket %d with bounds [%g, %g) µs", d, b, BucketUpper(b-1), up)
		}
	}
}

func TestQuantileP99(t *testing.T) {
	var h Histogram
	// 990 fast requests (100 µs) and 10 slow ones (20 ms): p99 is the
	// last fast one, p99.5 a slow one.
	for i := 0; i < 990; i++ {
		h.Record(100 * time.Microsecond)
	}
	for i := 0; i < 10; i++ {
		h.Record(20 * time.Millisecond)
	}
	s := h.Snapshot()
	if p := Quantile(s, 0.99); p < 100 || p > 100*1.19 {
		t.Errorf("p99 = %g µs, want 100 µs (+19%%)", p)
	}
	if p := Quantile(s, 0.995); p < 20000 || p > 20000*1.19 {
		t.Errorf("p99.5 = %g µs, want 20 ms (+19%%)", p)
	}
	if Quantile(nil, 0.99) != 0 {
		t.Error("p99 of nothing is not 0")
	}
	if len(s) != BucketOf(20*time.Millisecond)+1 {
		t.Errorf("snapshot not trimmed: %d buckets", len(s))
	}
}

func TestDeltaAcrossRestart(t *testing.T) {
	var c Counters
	for i := 0; i < 100; i++ {
		c.Read(4096, time.Millisecond)
	}
	prev := c.Snapshot()
	for i := 0; i < 50; i++ {
		c.Read(4096, time.Millisecond)
		c.Write(8192, 2*time.Millisecond)
	}
	d := Delta(prev, c.Snapshot(), false)
	if d.ReadOps != 50 || d.WriteOps != 50 || d.ReadBytes != 50*4096 || d.WriteBytes != 50*8192 ||
		d.ReadLatencyNs != uint64(50*time.Millisecond) || sum(d.ReadHist) != 50 || sum(d.WriteHist) != 50 {
		t.Fatalf("delta %+v", d)
	}
	// The process restarted: its counters began again at zero, lower than
	// before. Everything counted since is new; nothing goes negative.
	var fresh Counters
	for i := 0; i < 30; i++ {
		fresh.Read(4096, time.Millisecond)
	}
	d = Delta(c.Snapshot(), fresh.Snapshot(), false)
	if d.ReadOps != 30 || d.WriteOps != 0 || sum(d.ReadHist) != 30 {
		t.Fatalf("delta across a counter reset: %+v", d)
	}
	// A restart noticed by its run id, even where the counters happen to
	// be higher than before.
	for i := 0; i < 200; i++ {
		fresh.Read(4096, time.Millisecond)
	}
	d = Delta(prev, fresh.Snapshot(), true)
	if d.ReadOps != 230 {
		t.Fatalf("delta of a restarted source: %d reads, want 230", d.ReadOps)
	}
}

func TestSumRates(t *testing.T) {
	var a, b Counters
	for i := 0; i < 1000; i++ {
		a.Read(4096, 100*time.Microsecond)
	}
	for i := 0; i < 500; i++ {
		b.Read(4096, 400*time.Microsecond)
	}
	b.Throttled(time.Second)
	var s Sum
	s.Add(a.Snapshot(), 2*time.Second) // two sources over their own windows
	s.Add(b.Snapshot(), time.Second)
	r, w := s.Rates()
	if r.IOPS != 1000 || r.BytesPerSecond != 1000*4096 {
		t.Errorf("read rate %+v, want 1000 IOPS", r)
	}
	if want := (1000*100.0 + 500*400) / 1500; math.Abs(r.LatencyMeanUs-want) > 1e-6 {
		t.Errorf("mean latency %g µs, want %g", r.LatencyMeanUs, want)
	}
	if r.LatencyP99Us < 400 || r.LatencyP99Us > 400*1.19 {
		t.Errorf("p99 %g µs, want 400 µs", r.LatencyP99Us)
	}
	if w != (Rate{}) {
		t.Errorf("write rate %+v without writes", w)
	}
	if s.ThrottledPerSecond != 1 {
		t.Errorf("throttled %g s/s, want 1", s.ThrottledPerSecond)
	}
	var total Sum
	total.Merge(s)
	total.Merge(s)
	if r2, _ := total.Rates(); r2.IOPS != 2000 || r2.LatencyMeanUs != r.LatencyMeanUs {
		t.Errorf("merged %+v", r2)
	}
}

func sum(h []uint64) (n uint64) {
	for _, x := range h {
		n += x
	}
	return n
}
