package qos

import (
	"math"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// run admits requests as fast as the limiter lets a single caller (it
// sleeps exactly the returned wait on a fake clock) and returns how many
// passed in d.
func run(l *Limiter, start time.Time, d time.Duration, n int64) (count int, end time.Time) {
	now := start
	for {
		w := l.Admit(n, now)
		now = now.Add(w)
		if now.Sub(start) > d {
			return count, now
		}
		count++
	}
}

func TestBurstIsOneSecondThenRate(t *testing.T) {
	l := NewLimiter(Limits{IOPS: 2000}, t0)
	// A full bucket admits one second's worth at once...
	for i := 0; i < 2000; i++ {
		if w := l.Admit(4096, t0); w != 0 {
			t.Fatalf("request %d of the burst waited %v", i, w)
		}
	}
	// ...and not one more.
	if w := l.Admit(4096, t0); w != 500*time.Microsecond {
		t.Fatalf("first request past the burst: wait %v, want 500µs", w)
	}
	// Then the rate: 10 s at 2000 IOPS.
	n, _ := run(l, t0, 10*time.Second, 4096)
	if n < 19990 || n > 20010 {
		t.Fatalf("%d requests in 10 s after the burst; want 20000", n)
	}
}

func TestIdleRefillsNoMoreThanOneSecond(t *testing.T) {
	l := NewLimiter(Limits{IOPS: 100}, t0)
	run(l, t0, 2*time.Second, 0) // drain
	later := t0.Add(time.Hour)   // an hour idle still buys one second only
	free := 0
	for l.Admit(0, later) == 0 {
		free++
	}
	if free != 100 {
		t.Fatalf("after an hour idle %d requests passed at once; want 100 (one second)", free)
	}
}

func TestBandwidthLimit(t *testing.T) {
	const bw = 10 << 20 // 10 MiB/s
	l := NewLimiter(Limits{BytesPerSecond: bw}, t0)
	n, _ := run(l, t0, 5*time.Second, 64<<10)
	// 5 s at 10 MiB/s = 800 requests of 64 KiB, plus the 1 s burst (160).
	if n < 955 || n > 965 {
		t.Fatalf("%d requests of 64 KiB in 5 s; want 960", n)
	}
}

func TestBiggerThanBurstStillPasses(t *testing.T) {
	l := NewLimiter(Limits{BytesPerSecond: 512 << 10}, t0)
	if w := l.Admit(1<<20, t0); w != time.Second {
		t.Fatalf("1 MiB under 512 KiB/s from a full bucket: wait %v, want 1s", w)
	}
	if w := l.Admit(1<<20, t0.Add(time.Second)); w != 2*time.Second {
		t.Fatalf("the next 1 MiB: wait %v, want 2s", w)
	}
}

func TestBothLimitsTheStricterWins(t *testing.T) {
	// 1000 IOPS and 1 MiB/s with 64 KiB requests: bandwidth allows 16/s.
	l := NewLimiter(Limits{IOPS: 1000, BytesPerSecond: 1 << 20}, t0)
	run(l, t0, 2*time.Second, 64<<10)
	n, _ := run(l, t0.Add(10*time.Second), 10*time.Second, 64<<10)
	if n < 155 || n > 185 { // 160 + whatever the burst left
		t.Fatalf("%d requests in 10 s; want about 160", n)
	}
}

func TestLiveChangeAndUnset(t *testing.T) {
	l := NewLimiter(Limits{IOPS: 1000}, t0)
	_, now := run(l, t0, 3*time.Second, 0)
	l.Set(Limits{IOPS: 100}, now)
	n, now := run(l, now, 10*time.Second, 0)
	if n < 990 || n > 1010 {
		t.Fatalf("after lowering to 100 IOPS: %d in 10 s", n)
	}
	l.Set(Limits{}, now) // unset: unlimited
	for i := 0; i < 1_000_000; i++ {
		if w := l.Admit(1<<20, now); w != 0 {
			t.Fatalf("unlimited volume waited %v", w)
		}
	}
	l.Set(Limits{IOPS: 50}, now) // from unlimited: a fresh full bucket
	free := 0
	for l.Admit(0, now) == 0 {
		free++
	}
	if free != 50 {
		t.Fatalf("limit set again: burst %d, want 50", free)
	}
}

func TestThrottledAccumulates(t *testing.T) {
	l := NewLimiter(Limits{IOPS: 10}, t0)
	run(l, t0, 3*time.Second, 0)
	got := l.Throttled()
	// 10 burst + 30 paced requests, waits 100 ms apart: ~3 s in total.
	if got < 2900*time.Millisecond || got > 3100*time.Millisecond {
		t.Fatalf("throttled %v; want about 3s", got)
	}
}

func TestClockGoingBackwardsGivesNothing(t *testing.T) {
	l := NewLimiter(Limits{IOPS: 10}, t0)
	run(l, t0, time.Second, 0)
	before := l.Admit(0, t0.Add(-time.Hour))
	if before <= 0 {
		t.Fatalf("a clock step backwards refilled the bucket (wait %v)", before)
	}
}

func TestMin(t *testing.T) {
	cases := []struct{ a, b, want Limits }{
		{Limits{}, Limits{}, Limits{}},
		{Limits{IOPS: 5}, Limits{}, Limits{IOPS: 5}},
		{Limits{IOPS: 5, BytesPerSecond: 9}, Limits{IOPS: 3}, Limits{IOPS: 3, BytesPerSecond: 9}},
		{Limits{BytesPerSecond: 9}, Limits{IOPS: 7, BytesPerSecond: 4}, Limits{IOPS: 7, BytesPerSecond: 4}},
	}
	for _, c := range cases {
		if got := Min(c.a, c.b); got != c.want {
			t.Errorf("Min(%+v, %+v) = %+v, want %+v", c.a, c.b, got, c.want)
		}
	}
}

// TestAdmitOpsCostsLikeThatManyRequests: a command worth k I/Os takes k
// tokens, so it drains the burst and paces later requests exactly as k
// one-I/O requests would; its bytes go to the bandwidth bucket once.
func TestAdmitOpsCostsLikeThatManyRequests(t *testing.T) {
	l := NewLimiter(Limits{IOPS: 100}, t0)
	// 100 tokens: six 16-I/O commands pass at once (96), the seventh
	// leaves a debt of 12 I/Os: 120 ms at 100 IOPS.
	for i := 0; i < 6; i++ {
		if w := l.AdmitOps(16, 16<<20, t0); w != 0 {
			t.Fatalf("command %d of the burst waited %v", i, w)
		}
	}
	if w := l.AdmitOps(16, 16<<20, t0); w != 120*time.Millisecond {
		t.Fatalf("16 I/Os with 4 left: wait %v, want 120ms", w)
	}
	// A one-I/O request behind it queues behind the whole debt.
	if w := l.Admit(0, t0); w != 130*time.Millisecond {
		t.Fatalf("the request after: wait %v, want 130ms", w)
	}
	// The rate in commands: 10 s at 100 IOPS is 62.5 commands of 16 I/Os.
	l = NewLimiter(Limits{IOPS: 100}, t0)
	run(l, t0, 2*time.Second, 0) // spend the burst
	now, n := t0.Add(2*time.Second), 0
	for start := now; ; n++ {
		now = now.Add(l.AdmitOps(16, 0, now))
		if now.Sub(start) > 10*time.Second {
			break
		}
	}
	if n < 61 || n > 64 {
		t.Fatalf("%d commands of 16 I/Os in 10 s at 100 IOPS; want 62", n)
	}

	// Bytes: a 32 MiB command under 8 MiB/s from a full bucket waits 3 s
	// whatever its I/O count.
	l = NewLimiter(Limits{IOPS: 1000, BytesPerSecond: 8 << 20}, t0)
	if w := l.AdmitOps(32, 32<<20, t0); w != 3*time.Second {
		t.Fatalf("32 MiB under 8 MiB/s: wait %v, want 3s", w)
	}
	if got := l.Throttled(); got != 3*time.Second {
		t.Fatalf("throttled %v, want 3s", got)
	}

	// Unlimited: any cost passes at once.
	l = NewLimiter(Limits{}, t0)
	if w := l.AdmitOps(1<<30, 1<<40, t0); w != 0 {
		t.Fatalf("unlimited limiter: wait %v", w)
	}
}

// TestShare: a volume's limit split across the frontends that serve it at
// once, max-min fair, adding up to the limit.
func TestShare(t *testing.T) {
	hot := Demand{Throttled: true}
	cases := []struct {
		name   string
		self   Demand
		others []Demand
		want   float64
	}{
		{"alone: the whole limit", hot, nil, 2000},
		{"two throttled: half each", hot, []Demand{hot}, 1000},
		{"three throttled: a third each", hot, []Demand{hot, hot}, 2000.0 / 3},
		{"a light neighbour keeps its rate plus headroom, the rest is mine", hot, []Demand{{Rate: 200}}, 2000 - 250},
		{"light me: my rate plus headroom", Demand{Rate: 200}, []Demand{hot}, 250},
		{"idle me: the floor (limit/4n), never nothing", Demand{}, []Demand{hot}, 250},
		{"two light frontends: their rates plus headroom", Demand{Rate: 400}, []Demand{{Rate: 300}}, 500},
		{"a very light one: the floor", Demand{Rate: 100}, []Demand{{Rate: 300}}, 250},
		{"light ones above the fair part are capped to it", Demand{Rate: 1800}, []Demand{{Rate: 1800}}, 1000},
		{"a neighbour between: water-filling", hot, []Demand{{Rate: 400}, hot}, (2000 - 500) / 2.0},
	}
	for _, c := range cases {
		if got := Share(2000, c.self, c.others); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	// Every frontend computing its own share from the same demands: the
	// shares add up to at most the limit.
	demands := []Demand{hot, {Rate: 400}, {Rate: 10}, hot}
	sum := 0.0
	for i := range demands {
		others := append(append([]Demand(nil), demands[:i]...), demands[i+1:]...)
		sum += Share(2000, demands[i], others)
	}
	if sum > 2000+1e-9 || sum < 1900 {
		t.Errorf("shares add up to %v of 2000", sum)
	}
}
