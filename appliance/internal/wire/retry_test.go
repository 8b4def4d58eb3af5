package wire

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// view is an EpochSource whose epoch the test moves.
type view struct {
	mu      sync.Mutex
	epoch   uint64
	waitFor []uint64 // the epochs WaitEpoch was asked for
}

func (v *view) Epoch() uint64 { v.mu.Lock(); defer v.mu.Unlock(); return v.epoch }

func (v *view) WaitEpoch(ctx context.Context, e uint64) error {
	v.mu.Lock()
	v.waitFor = append(v.waitFor, e)
	v.epoch = max(v.epoch, e) // this view learns the epoch at once
	v.mu.Unlock()
	return nil
}

// TestRetryStale: a request answered "stale" is sent again at the
// responder's epoch once the view has it, as often as allowed, and the last
// answer is returned.
func TestRetryStale(t *testing.T) {
	// The responder's epoch rises by one at each request: every request is
	// stale until it carries epoch 3.
	var served atomic.Uint64
	addr := startServer(t, func(ctx context.Context, r *Request) (Response, func()) {
		cur := served.Add(1)
		if r.Epoch < 3 {
			return Response{Status: StatusStaleEpoch, Epoch: min(cur, 3)}, nil
		}
		return Response{Aux: r.Epoch}, nil
	}, nil)
	c := NewClient(addr, 1)
	defer c.Close()
	ctx := context.Background()

	v := &view{}
	stale := 0
	req := &Request{Op: OpPing, Epoch: 0}
	resp, err := RetryStale(ctx, c, v, req, 5, time.Second, func() { stale++ })
	if err != nil || resp.Aux != 3 {
		t.Fatalf("answer %+v, err %v; want success at epoch 3", resp, err)
	}
	if stale != 3 || req.Epoch != 3 || fmt.Sprint(v.waitFor) != "[1 2 3]" {
		t.Fatalf("stale %d times, final epoch %d, waited for %v; want 3 stale answers, epoch 3, waits for 1, 2, 3", stale, req.Epoch, v.waitFor)
	}

	// With no retries left the stale answer itself is returned.
	served.Store(0)
	_, err = RetryStale(ctx, c, &view{}, &Request{Op: OpPing}, 0, time.Second, nil)
	if !IsStatus(err, StatusStaleEpoch) {
		t.Fatalf("err %v; want the stale answer", err)
	}
	// Any other error is not retried and not waited for.
	v = &view{}
	down := NewClient("127.0.0.1:1", 1)
	defer down.Close()
	_, err = RetryStale(ctx, down, v, &Request{Op: OpPing}, 5, time.Second, nil)
	if err == nil || IsStatus(err, StatusStaleEpoch) || len(v.waitFor) != 0 {
		t.Fatalf("err %v, waits %v; want a connection error, no wait", err, v.waitFor)
	}
	if WaitIfStale(ctx, v, err) {
		t.Fatal("WaitIfStale took a connection error for a stale answer")
	}
}
