package sds

// Pacing of fills (rebuild, resync, rebalance): every chunk a fill pushes
// first passes
//
//  1. the SDS-wide bound on pushes in flight (maxPushes),
//  2. its pool's gate, sized by the pool's rebuild policy:
//     unlimited -> no further bound; limit-concurrent-io -> RebuildMaxIO;
//     favor-app-io -> one push at a time while the SDS served application
//     I/O within appBusyWindow, no further bound when it is idle,
//  3. the SDS's token bucket, at its RebuildMBps cap (0: none).
//
// Settings are read from the catalog at every push, so a change made
// through the API reaches running fills as soon as the catalog watch
// delivers it; held-back pushes re-check at least every policyPoll.

import (
	"context"
	"sync"
	"time"

	"github.com/cairn-storage/cairn/appliance/internal/model"
)

const (
	// maxPushes bounds the chunks one SDS pushes at once over all its
	// fills: enough to keep devices and links busy while each push waits
	// for its answer, few enough that application I/O still gets through.
	maxPushes = 16
	// appBusyWindow: an SDS that completed application I/O within it is
	// busy for favor-app-io.
	appBusyWindow = 5 * time.Millisecond
	// gatePoll: how often a push held back by favor-app-io looks whether
	// the SDS became idle; policyPoll: how often one held back by another
	// bound re-reads the pool's policy (a change lifts it without wake-up).
	gatePoll   = 2 * time.Millisecond
	policyPoll = 100 * time.Millisecond
)

// clock abstracts time for the pacing code, so tests run it on a fake one.
type clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// tokenBucket paces bytes at a rate that may change at any time. Tokens
// accrue at rate up to burst; a wait for n bytes takes them once there are
// n (n larger than burst waits for a full bucket and takes all of it, so
// the long-run rate still holds).
type tokenBucket struct {
	clk clock

	mu     sync.Mutex
	rate   float64 // bytes per second; 0: unlimited
	tokens float64
	last   time.Time
}

// bucketBurst: tokens kept for an idle period: one chunk, or 50 ms worth
// at high rates.
func bucketBurst(rate float64) float64 { return max(model.ChunkSize, rate/20) }

func newTokenBucket(clk clock) *tokenBucket { return &tokenBucket{clk: clk} }

// setRate changes the rate (bytes/s, 0 for none); waiters see it at once.
func (b *tokenBucket) setRate(rate float64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if rate == b.rate {
		return
	}
	b.refill()
	b.rate = rate
	if rate > 0 {
		b.tokens = min(b.tokens, bucketBurst(rate))
	}
}

// refill adds what accrued since last (b.mu held).
func (b *tokenBucket) refill() {
	now := b.clk.Now()
	if b.rate > 0 {
		b.tokens = min(bucketBurst(b.rate), b.tokens+now.Sub(b.last).Seconds()*b.rate)
	}
	b.last = now
}

// wait takes n bytes' worth of tokens, sleeping until they accrue.
func (b *tokenBucket) wait(ctx context.Context, n int64) error {
	for {
		b.mu.Lock()
		if b.rate <= 0 {
			b.mu.Unlock()
			return nil
		}
		b.refill()
		need := min(float64(n), bucketBurst(b.rate))
		if b.tokens >= need {
			b.tokens -= need
			b.mu.Unlock()
			return nil
		}
		d := time.Duration((need - b.tokens) / b.rate * float64(time.Second))
		b.mu.Unlock()
		// Sleep in short steps so a raised (or removed) cap applies soon.
		select {
		case <-b.clk.After(min(max(d, time.Millisecond), 50*time.Millisecond)):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// gate bounds the pushes in flight; the bound is asked anew on every try.
// Waiters queue in order; only the head of the queue is woken (by a push
// leaving, or by its own poll timer: the bound may also rise without a
// push leaving, e.g. a policy change or the SDS going idle), so a crowd of
// waiters costs nothing while it waits.
type gate struct {
	clk clock

	mu       sync.Mutex
	inFlight int
	queue    []chan struct{}
}

func newGate(clk clock) *gate { return &gate{clk: clk} }

// acquire waits until fewer than limit() pushes are in flight (limit() <= 0:
// no bound) and enters; the returned function leaves. poll (0: never) is
// how often the head of the queue looks at limit() again unprompted.
func (g *gate) acquire(ctx context.Context, limit func() int, poll time.Duration) (func(), error) {
	admissible := func() bool { l := limit(); return l <= 0 || g.inFlight < l }
	g.mu.Lock()
	if len(g.queue) == 0 && admissible() {
		g.inFlight++
		g.mu.Unlock()
		return g.release, nil
	}
	me := make(chan struct{}, 1)
	g.queue = append(g.queue, me)
	for {
		head := g.queue[0] == me
		if head && admissible() {
			g.queue = g.queue[1:]
			g.inFlight++
			g.wakeHead() // the next may fit too, and must poll now
			g.mu.Unlock()
			return g.release, nil
		}
		g.mu.Unlock()
		var tick <-chan time.Time
		if head && poll > 0 {
			tick = g.clk.After(poll)
		}
		select {
		case <-me:
		case <-tick:
		case <-ctx.Done():
			g.mu.Lock()
			for i, w := range g.queue {
				if w == me {
					g.queue = append(g.queue[:i], g.queue[i+1:]...)
					break
				}
			}
			g.wakeHead() // in case the wake-up was meant for this waiter
			g.mu.Unlock()
			return nil, ctx.Err()
		}
		g.mu.Lock()
	}
}

// wakeHead prompts the first waiter to look again (g.mu held).
func (g *gate) wakeHead() {
	if len(g.queue) > 0 {
		select {
		case g.queue[0] <- struct{}{}:
		default:
		}
	}
}

func (g *gate) release() {
	g.mu.Lock()
	g.inFlight--
	g.wakeHead()
	g.mu.Unlock()
}

func (g *gate) active() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.inFlight
}

// appActivity tells whether the SDS served application I/O lately, from a
// counter of completed client requests that it samples: a change seen now
// counts as I/O now (it may have been a little earlier: this errs towards
// favouring the application).
type appActivity struct {
	clk   clock
	count func() uint64

	mu         sync.Mutex
	last       uint64
	lastChange time.Time
}

func (a *appActivity) busy() bool {
	c := a.count()
	now := a.clk.Now()
	a.mu.Lock()
	defer a.mu.Unlock()
	if c != a.last {
		a.last, a.lastChange = c, now
	}
	return !a.lastChange.IsZero() && now.Sub(a.lastChange) < appBusyWindow
}

// pacer holds an SDS's fill pacing state.
type pacer struct {
	clk    clock
	all    *gate
	bucket *tokenBucket
	app    *appActivity
	// policy of a pool and the SDS's cap, read at every push.
	pool   func(id string) (model.StoragePool, bool)
	capMBs func() int

	mu    sync.Mutex
	pools map[string]*gate
}

func newPacer(clk clock, pool func(string) (model.StoragePool, bool), capMBs func() int, appOps func() uint64) *pacer {
	return &pacer{clk: clk, all: newGate(clk), bucket: newTokenBucket(clk), app: &appActivity{clk: clk, count: appOps},
		pool: pool, capMBs: capMBs, pools: map[string]*gate{}}
}

func (p *pacer) poolGate(id string) *gate {
	p.mu.Lock()
	defer p.mu.Unlock()
	g := p.pools[id]
	if g == nil {
		g = newGate(p.clk)
		p.pools[id] = g
	}
	return g
}

// poolLimit is the bound the pool's policy sets now (0: none).
func (p *pacer) poolLimit(id string) int {
	pl, ok := p.pool(id)
	if !ok {
		return 0
	}
	switch pl.Policy() {
	case model.RebuildLimitIO:
		return max(pl.RebuildMaxIO, 1)
	case model.RebuildFavorAppIO:
		if p.app.busy() {
			return 1
		}
	}
	return 0
}

// admit waits until one push of n bytes for pool may start; the returned
// function ends it.
func (p *pacer) admit(ctx context.Context, pool string, n int64) (func(), error) {
	leaveAll, err := p.all.acquire(ctx, func() int { return maxPushes }, policyPoll)
	if err != nil {
		return nil, err
	}
	poll := policyPoll
	if pl, ok := p.pool(pool); ok && pl.Policy() == model.RebuildFavorAppIO {
		poll = gatePoll
	}
	leavePool, err := p.poolGate(pool).acquire(ctx, func() int { return p.poolLimit(pool) }, poll)
	if err != nil {
		leaveAll()
		return nil, err
	}
	p.bucket.setRate(float64(p.capMBs()) * 1e6)
	if n > 0 {
		if err := p.bucket.wait(ctx, n); err != nil {
			leavePool()
			leaveAll()
			return nil, err
		}
	}
	return func() { leavePool(); leaveAll() }, nil
}
