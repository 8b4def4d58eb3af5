package server

import (
	"testing"
	"time"

	"github.com/cairn-storage/cairn/vcenter-plugin/internal/gateway"
)

func TestRebuildETAFromTheObservedRate(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	tr := rebuildTracker{now: func() time.Time { return now }}
	at := func(d time.Duration, done, pending int64) RebuildProgress {
		now = now.Add(d)
		return tr.observe("c1", gateway.Rebuild{DoneBytes: done, PendingBytes: pending})
	}
	if p := at(0, 100, 0); p.ETAState != ETAIdle || p.ObservedETASeconds != nil {
		t.Fatalf("idle: %+v", p)
	}
	if p := at(time.Second, 100, 1000); p.ETAState != ETAEstimating || p.ObservedRateBytesPerSecond != nil {
		t.Fatalf("first sample: %+v", p)
	}
	if p := at(500*time.Millisecond, 150, 950); p.ETAState != ETAEstimating {
		t.Fatalf("under the least span: %+v", p)
	}
	// 100 bytes in 2 s: 50 B/s, 900 left: 18 s.
	if p := at(1500*time.Millisecond, 200, 900); p.ETAState != ETAKnown || *p.ObservedRateBytesPerSecond != 50 || *p.ObservedETASeconds != 18 {
		t.Fatalf("known: %+v", p)
	}
	// No progress for the whole window: the rate is over the window only.
	at(30*time.Second, 200, 900)
	at(30*time.Second, 200, 900)
	if p := at(30*time.Second, 200, 900); p.ETAState != ETAEstimating || p.WindowSeconds != 60 {
		t.Fatalf("stalled a minute: %+v", p)
	}
	// An SDS restarted: its counter began again; estimate afresh.
	if p := at(time.Second, 10, 800); p.ETAState != ETAEstimating || p.WindowSeconds != 0 {
		t.Fatalf("after a counter reset: %+v", p)
	}
	if p := at(4*time.Second, 410, 400); p.ETAState != ETAKnown || *p.ObservedETASeconds != 4 {
		t.Fatalf("after the reset: %+v", p)
	}
	// An exact quotient is not rounded up (the float one gave 31 here).
	tr.observe("c3", gateway.Rebuild{DoneBytes: 0, PendingBytes: 690159616})
	now = now.Add(10 * time.Second)
	if p := tr.observe("c3", gateway.Rebuild{DoneBytes: 172539904, PendingBytes: 517619712}); *p.ObservedETASeconds != 30 {
		t.Fatalf("exact 30 s: %v", *p.ObservedETASeconds)
	}
	now = now.Add(10 * time.Second)
	if p := tr.observe("c3", gateway.Rebuild{DoneBytes: 172539905, PendingBytes: 517619711}); *p.ObservedETASeconds != 60 {
		t.Fatalf("a byte over: %v", *p.ObservedETASeconds)
	}
	// Other systems are apart.
	if p := tr.observe("c2", gateway.Rebuild{DoneBytes: 5, PendingBytes: 5}); p.ETAState != ETAEstimating {
		t.Fatalf("c2: %+v", p)
	}
}
