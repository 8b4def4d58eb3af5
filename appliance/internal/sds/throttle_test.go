package sds

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/cairn-storage/cairn/appliance/internal/model"
)

// fakeClock advances only when someone waits on it: After(d) moves the
// time by d and fires at once. Single-goroutine tests are deterministic.
type fakeClock struct {
	mu     sync.Mutex
	t      time.Time
	slept  time.Duration
	onWait func() // called after every advance
	// stall: After's channel never fires (the waiter is being cancelled
	// by onWait: it must not get a second look on a tick)
	stall bool
}

func newFakeClock() *fakeClock { return &fakeClock{t: time.Unix(1_000_000, 0)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.slept += d
	ch := make(chan time.Time, 1)
	if !c.stall {
		ch <- c.t
	}
	f := c.onWait
	c.mu.Unlock()
	if f != nil {
		f()
	}
	return ch
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func (c *fakeClock) elapsed() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.slept
}

func TestTokenBucketRate(t *testing.T) {
	clk := newFakeClock()
	b := newTokenBucket(clk)
	ctx := context.Background()
	// No cap: never waits.
	for i := 0; i < 100; i++ {
		if err := b.wait(ctx, model.ChunkSize); err != nil {
			t.Fatal(err)
		}
	}
	if clk.elapsed() != 0 {
		t.Fatalf("uncapped bucket slept %s", clk.elapsed())
	}
	// 10 MB/s from an empty bucket: 40 chunks take 40 MiB / 10 MB/s.
	b.setRate(10e6)
	for i := 0; i < 40; i++ {
		if err := b.wait(ctx, model.ChunkSize); err != nil {
			t.Fatal(err)
		}
	}
	want := time.Duration(40 * model.ChunkSize / 10e6 * float64(time.Second))
	if got := clk.elapsed(); got < want-5*time.Millisecond || got > want+5*time.Millisecond {
		t.Fatalf("40 MiB at 10 MB/s took %s, want %s", got, want)
	}
	// Idle time refills at most the burst (one chunk at this rate).
	clk.advance(10 * time.Second)
	s0 := clk.elapsed()
	for i := 0; i < 3; i++ {
		b.wait(ctx, model.ChunkSize)
	}
	want = time.Duration(2 * model.ChunkSize / 10e6 * float64(time.Second))
	if got := clk.elapsed() - s0; got < want-5*time.Millisecond || got > want+5*time.Millisecond {
		t.Fatalf("after idle, 3 MiB took %s, want %s (burst one chunk)", got, want)
	}
}

func TestTokenBucketRateChange(t *testing.T) {
	clk := newFakeClock()
	b := newTokenBucket(clk)
	b.setRate(1e6) // 1 MB/s: one chunk needs about a second
	b.wait(context.Background(), model.ChunkSize)
	// A waiter blocked at 1 MB/s sees the cap raised while it sleeps.
	waits := 0
	clk.onWait = func() {
		waits++
		if waits == 2 {
			b.setRate(100e6)
		}
	}
	s0 := clk.elapsed()
	b.wait(context.Background(), model.ChunkSize)
	if got := clk.elapsed() - s0; got > 150*time.Millisecond {
		t.Fatalf("raising the cap did not shorten a wait: %s", got)
	}
	// Removing the cap releases waiters at once.
	b.setRate(1e6)
	b.wait(context.Background(), 10*model.ChunkSize) // drain
	clk.onWait = func() { b.setRate(0) }
	s0 = clk.elapsed()
	b.wait(context.Background(), model.ChunkSize)
	if got := clk.elapsed() - s0; got > 50*time.Millisecond {
		t.Fatalf("removing the cap did not end a wait: %s", got)
	}
}

func TestTokenBucketCancel(t *testing.T) {
	b := newTokenBucket(realClock{})
	b.setRate(1000) // 1 kB/s: a chunk would take ~17 min
	b.wait(context.Background(), 1000)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := b.wait(ctx, model.ChunkSize); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("wait: %v", err)
	}
	if time.Since(start) > 2*time.Second {
		t.Fatal("cancelled wait did not return promptly")
	}
}

func TestGateBound(t *testing.T) {
	clk := newFakeClock()
	g := newGate(clk)
	ctx := context.Background()
	limit := 2
	var leave []func()
	for i := 0; i < 2; i++ {
		l, err := g.acquire(ctx, func() int { return limit }, time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		leave = append(leave, l)
	}
	// A third waits; raising the bound lets it in without anyone leaving.
	clk.onWait = func() { limit = 3 }
	l, err := g.acquire(ctx, func() int { return limit }, time.Millisecond)
	if err != nil || g.active() != 3 {
		t.Fatalf("acquire after raising the bound: %v, %d in flight", err, g.active())
	}
	leave = append(leave, l)
	clk.onWait = nil
	// At the bound, a cancelled waiter gives up.
	cctx, cancel := context.WithCancel(ctx)
	clk.onWait = cancel
	if _, err := g.acquire(cctx, func() int { return limit }, time.Millisecond); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled acquire: %v", err)
	}
	clk.onWait = nil
	for _, l := range leave {
		l()
	}
	if g.active() != 0 {
		t.Fatalf("%d in flight after all left", g.active())
	}
	// 0: no bound.
	for i := 0; i < 100; i++ {
		if _, err := g.acquire(ctx, func() int { return 0 }, 0); err != nil {
			t.Fatal(err)
		}
	}
}

func TestGateWakesOnRelease(t *testing.T) {
	g := newGate(realClock{})
	ctx := context.Background()
	one := func() int { return 1 }
	l, _ := g.acquire(ctx, one, 0)
	var mu sync.Mutex
	max, cur := 0, 0
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			leave, err := g.acquire(ctx, one, 0)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			cur++
			max = maxInt(max, cur)
			mu.Unlock()
			time.Sleep(time.Millisecond)
			mu.Lock()
			cur--
			mu.Unlock()
			leave()
		}()
	}
	time.Sleep(5 * time.Millisecond)
	l()
	wg.Wait()
	if max != 1 {
		t.Fatalf("%d pushes in flight under a bound of 1", max)
	}
}

func maxInt(a, b int) int {
	if a > b {
		return a
	}
	return b
}

func TestPacerPolicies(t *testing.T) {
	clk := newFakeClock()
	pools := map[string]model.StoragePool{}
	capMBs := 0
	var ops uint64
	p := newPacer(clk, func(id string) (model.StoragePool, bool) { pl, ok := pools[id]; return pl, ok },
		func() int { return capMBs }, func() uint64 { return ops })
	ctx := context.Background()
	// admitN enters n pushes of pool at once and reports how many got in
	// before one would have to wait (a wait moves the fake clock).
	admitN := func(pool string, n int) (in int, leave func()) {
		var ls []func()
		for i := 0; i < n; i++ {
			s0 := clk.elapsed()
			cctx, cancel := context.WithCancel(ctx)
			clk.onWait, clk.stall = cancel, true
			l, err := p.admit(cctx, pool, model.ChunkSize)
			clk.onWait, clk.stall = nil, false
			cancel()
			if err == nil && clk.elapsed() != s0 {
				l() // got in, but only after a wait
			}
			if err != nil || clk.elapsed() != s0 {
				break
			}
			ls = append(ls, l)
		}
		return len(ls), func() {
			for _, l := range ls {
				l()
			}
		}
	}
	pools["u"] = model.StoragePool{ID: "u"} // created before policies: unlimited
	if in, leave := admitN("u", 40); in != maxPushes {
		t.Errorf("unlimited: %d pushes at once, want the SDS bound %d", in, maxPushes)
	} else {
		leave()
	}
	pools["l"] = model.StoragePool{ID: "l", RebuildPolicy: model.RebuildLimitIO, RebuildMaxIO: 3}
	in, leave := admitN("l", 10)
	if in != 3 {
		t.Errorf("limit-concurrent-io 3: %d pushes at once", in)
	}
	// Another pool is not bound by this one's limit (only by the SDS's).
	if in2, leave2 := admitN("u", 40); in2 != maxPushes-3 {
		t.Errorf("other pool beside a limited one: %d", in2)
	} else {
		leave2()
	}
	leave()
	// Changed live: the next admissions see the new number.
	pools["l"] = model.StoragePool{ID: "l", RebuildPolicy: model.RebuildLimitIO, RebuildMaxIO: 5}
	if in, leave := admitN("l", 10); in != 5 {
		t.Errorf("limit raised to 5: %d", in)
	} else {
		leave()
	}
	// favor-app-io: idle -> as unlimited; application I/O within the
	// window -> one at a time.
	pools["f"] = model.StoragePool{ID: "f", RebuildPolicy: model.RebuildFavorAppIO}
	if in, leave := admitN("f", 40); in != maxPushes {
		t.Errorf("favor-app-io, idle: %d", in)
	} else {
		leave()
	}
	ops++ // an application I/O completed
	if in, leave := admitN("f", 10); in != 1 {
		t.Errorf("favor-app-io, busy: %d pushes at once, want 1", in)
	} else {
		leave()
	}
	clk.advance(appBusyWindow) // quiet for the window: idle again
	if in, leave := admitN("f", 40); in != maxPushes {
		t.Errorf("favor-app-io, idle again: %d", in)
	} else {
		leave()
	}
	// The SDS cap applies to every pool: 20 MB/s, 21 chunks.
	capMBs = 20
	s0 := clk.elapsed()
	for i := 0; i < 21; i++ {
		l, err := p.admit(ctx, "u", model.ChunkSize)
		if err != nil {
			t.Fatal(err)
		}
		l()
	}
	want := time.Duration(21 * model.ChunkSize / 20e6 * float64(time.Second))
	if got := clk.elapsed() - s0; got < want-5*time.Millisecond || got > want+5*time.Millisecond {
		t.Errorf("21 MiB under a 20 MB/s cap took %s, want %s", got, want)
	}
	// An absent chunk (n = 0) costs no tokens.
	s0 = clk.elapsed()
	l, _ := p.admit(ctx, "u", 0)
	l()
	if clk.elapsed() != s0 {
		t.Error("a zero-byte push waited for bandwidth")
	}
}
