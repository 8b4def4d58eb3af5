// Package qos owns the token buckets that enforce per-volume (and per
// mapping) IOPS and bandwidth limits on the data path. It is pure logic:
// no I/O, no goroutines, no clock of its own (callers pass the time), so
// frontends decide how to wait and tests drive it with a fake clock.
package qos

import (
	"math"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// Limits of one volume as a frontend enforces them; 0 means unlimited.
type Limits struct {
	IOPS           int64 // I/O requests per second
	BytesPerSecond int64 // payload bytes per second
}

// Min combines two sets of limits: for each dimension the smaller non-zero
// one (a volume limit and a per-mapping limit both apply).
func Min(a, b Limits) Limits {
	pick := func(x, y int64) int64 {
		switch {
		case x == 0:
			return y
		case y == 0:
			return x
		}
		return min(x, y)
	}
	return Limits{IOPS: pick(a.IOPS, b.IOPS), BytesPerSecond: pick(a.BytesPerSecond, b.BytesPerSecond)}
}

// Bucket is a token bucket refilled at rate tokens per second that holds
// at most one second of tokens: an idle volume may burst up to one second
// of its limit, never more.
//
// Invariant: tokens <= rate (the burst). Take may drive tokens below zero
// (debt): the request is admitted and its caller waits until the debt is
// repaid, so requests larger than the burst still pass (a 1 MiB write
// under a 512 KiB/s limit waits two seconds) and waiting callers queue in
// the order they took. A zero rate is unlimited and never waits.
type Bucket struct {
	rate   float64 // tokens per second; 0: unlimited
	tokens float64
	last   time.Time // time of the last refill
}

// NewBucket returns a full bucket.
func NewBucket(rate int64, now time.Time) *Bucket {
	return &Bucket{rate: float64(rate), tokens: float64(rate), last: now}
}

func (b *Bucket) refill(now time.Time) {
	if d := now.Sub(b.last); d > 0 {
		b.tokens = min(b.rate, b.tokens+d.Seconds()*b.rate)
		b.last = now
	}
}

// Take takes n tokens at now and returns how long the caller must wait
// before the request may proceed (0: at once).
func (b *Bucket) Take(n int64, now time.Time) time.Duration {
	if b.rate == 0 {
		return 0
	}
	b.refill(now)
	b.tokens -= float64(n)
	if b.tokens >= 0 {
		return 0
	}
	return time.Duration(-b.tokens / b.rate * float64(time.Second))
}

// SetRate changes the rate at now. Tokens above the new burst are dropped;
// a debt is kept (it was admitted under the old rate and is repaid at the
// new one). Switching from unlimited starts with a full bucket.
func (b *Bucket) SetRate(rate int64, now time.Time) {
	b.refill(now)
	old := b.rate
	b.rate = float64(rate)
	switch {
	case old == 0:
		b.tokens = b.rate
	case b.rate == 0:
		b.tokens = 0
	default:
		b.tokens = min(b.tokens, b.rate)
	}
	b.last = now
}

// Limiter applies a Limits pair of buckets to requests. It is safe for
// concurrent use; it only computes waits, it never sleeps.
type Limiter struct {
	// unlimited lets Admit skip the lock on the common path (no limits):
	// frontends of fast volumes call it for every request.
	unlimited atomic.Bool
	mu        sync.Mutex
	limits    Limits
	ops       Bucket
	bytes     Bucket
	throttled time.Duration // sum of the waits returned
}

// NewLimiter returns a limiter with full buckets.
func NewLimiter(l Limits, now time.Time) *Limiter {
	lim := &Limiter{limits: l, ops: *NewBucket(l.IOPS, now), bytes: *NewBucket(l.BytesPerSecond, now)}
	lim.unlimited.Store(l == Limits{})
	return lim
}

// Admit accounts one request of n payload bytes at now and returns how
// long to hold it: the longer of the two buckets' waits (both debts are
// repaid meanwhile).
func (l *Limiter) Admit(n int64, now time.Time) time.Duration {
	return l.AdmitOps(1, n, now)
}

// AdmitOps accounts one command that costs ios I/Os and n payload bytes
// (an offloaded command worth several ordinary ones: WRITE SAME, EXTENDED
// COPY) and returns how long to hold it, as Admit does. A cost beyond the
// burst is admitted as debt, so the wait grows with it.
func (l *Limiter) AdmitOps(ios, n int64, now time.Time) time.Duration {
	if l.unlimited.Load() {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.limits == (Limits{}) {
		return 0
	}
	w := max(l.ops.Take(ios, now), l.bytes.Take(n, now))
	l.throttled += w
	return w
}

// Set changes the limits at now (a live change takes effect for the next
// request).
func (l *Limiter) Set(lim Limits, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if lim == l.limits {
		return
	}
	l.limits = lim
	l.unlimited.Store(lim == Limits{})
	l.ops.SetRate(lim.IOPS, now)
	l.bytes.SetRate(lim.BytesPerSecond, now)
}

// Limits returns the limits in force.
func (l *Limiter) Limits() Limits {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.limits
}

// Throttled returns the total wait Admit has imposed (cumulative).
func (l *Limiter) Throttled() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.throttled
}

// Demand is one frontend's recent use of a volume's limit, in one
// dimension (I/Os or bytes per second).
type Demand struct {
	Rate      float64 // admitted per second over the last interval
	Throttled bool    // its limiter held requests back then: it wants more
}

// headroom is what an unthrottled frontend is owed beyond its rate, so
// that a growing load shows as throttling at the next interval.
const headroom = 1.25

// Share returns the part of a volume's limit that self may admit while
// other frontends serve the same volume (an ESXi host's round robin over
// several SVMs' targets, or several hosts' NBD servers): the limit is the
// volume's, not each frontend's. It is max-min fair (water-filling): a
// throttled frontend demands without bound, one that was not demands its
// rate plus a quarter; every participant is owed at least limit/(4n), so a
// frontend whose load just started is never starved while the others
// learn of it. Every frontend computes it from the same published rates,
// so the shares add up to the limit, up to the interval's staleness.
// Without others, the whole limit.
func Share(limit float64, self Demand, others []Demand) float64 {
	if len(others) == 0 || limit <= 0 {
		return limit
	}
	n := len(others) + 1
	floor := limit / float64(4*n)
	want := func(d Demand) float64 {
		if d.Throttled {
			return math.Inf(1)
		}
		return max(floor, d.Rate*headroom)
	}
	mine := want(self)
	ds := make([]float64, 0, n)
	for _, o := range others {
		ds = append(ds, want(o))
	}
	ds = append(ds, mine)
	sort.Float64s(ds)
	// Serve the demands smallest first; the first that reaches the fair
	// part of what is left sets the level everyone from there on gets.
	// The level only rises as smaller demands are served, so a demand
	// served before it (mine, perhaps) is below it: min gives each its due.
	left := limit
	for i, d := range ds {
		fair := left / float64(n-i)
		if d >= fair {
			return min(mine, fair)
		}
		left -= d
	}
	return mine // every demand fits
}
