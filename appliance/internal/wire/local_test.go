package wire

import (
	"bytes"
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairn-storage/cairn/appliance/internal/pki"
	"github.com/cairn-storage/cairn/appliance/internal/pki/pkitest"
)

// closedAddr is an address no connection can be made to (its port is not
// a number): a request that reaches the network fails. Each test has its
// own, since registrations are process-wide.
func closedAddr(t *testing.T) string { return "127.0.0.1:1#" + t.Name() }

// A server registered with ServeLocal answers this process's clients of
// its address without the network: payloads land in dst, the handler's
// buffer is released, statuses become StatusErrors, the client's identity
// is the peer, and small requests run on the caller's goroutine only when
// nothing is held behind them.
func TestServeLocal(t *testing.T) {
	addr := closedAddr(t)
	kit := pkitest.New(t)
	var released, calls atomic.Int32
	type seen struct {
		peer  pki.Peer
		alone bool
	}
	gate := make(chan struct{})
	seenCh := make(chan seen, 16)
	h := func(ctx context.Context, r *Request) (Response, func()) {
		calls.Add(1)
		p, _ := PeerFrom(ctx)
		seenCh <- seen{peer: p, alone: r.Alone}
		if r.Aux == 1 {
			<-gate // served on a goroutine of its own, or Go never returns
		}
		switch r.Op {
		case OpRead:
			buf := bytes.Repeat([]byte{byte(r.Offset)}, int(r.Length))
			return Response{Payload: buf}, func() { released.Add(1); clear(buf) }
		case OpWrite:
			return Response{Status: StatusNotPrimary, Epoch: 7, Payload: []byte("not mine")}, nil
		}
		return Response{}, nil
	}
	stop := ServeLocal(addr, h, func(r *Request) bool { return r.Op == OpRead })
	defer stop()

	c := NewClient(addr, 1)
	defer c.Close()
	sec, err := NewSecurity(ModeAuthenticated, kit.Identity(pki.RoleNBD, "nbd-1"))
	if err != nil {
		t.Fatal(err)
	}
	c.Security = sec
	var idle atomic.Int32
	c.OnIdle = func() { idle.Add(1) }

	// Do: the payload in dst, a copy of the handler's (which it cleared on release).
	dst := make([]byte, 4096)
	resp, err := c.Do(context.Background(), &Request{Op: OpRead, Offset: 9, Length: 4096}, dst)
	if err != nil {
		t.Fatalf("local Do: %v", err)
	}
	if &resp.Payload[0] != &dst[0] || !bytes.Equal(dst, bytes.Repeat([]byte{9}, 4096)) {
		t.Fatal("the local answer is not in dst, or not the handler's data")
	}
	if released.Load() != 1 {
		t.Fatalf("handler's buffer released %d times, want 1", released.Load())
	}
	s := <-seenCh
	if s.peer.Role != pki.RoleNBD || s.peer.Name != "nbd-1" {
		t.Fatalf("handler saw peer %v, want the client's identity nbd/nbd-1", s.peer)
	}

	// A status becomes a StatusError with its epoch, as over the network.
	_, err = c.Do(context.Background(), &Request{Op: OpWrite, Length: 512, Payload: make([]byte, 512)}, nil)
	var se *StatusError
	if !errors.As(err, &se) || se.Status != StatusNotPrimary || se.Epoch != 7 || se.Message != "not mine" {
		t.Fatalf("local status: %v, want not primary at epoch 7", err)
	}
	<-seenCh

	// Go, nothing held, inline op: done and OnIdle have run when Go returns.
	var got []byte
	c.Go(&Request{Op: OpRead, Offset: 3, Length: 512}, make([]byte, 512), time.Second, false, func(r *Response, err error) {
		if err == nil {
			got = r.Payload
		}
	})
	if !bytes.Equal(got, bytes.Repeat([]byte{3}, 512)) || idle.Load() != 1 {
		t.Fatalf("inline Go: done not run (or wrong data) when Go returned, idle hook ran %d times, want 1", idle.Load())
	}
	if s := <-seenCh; !s.alone {
		t.Fatal("a request sent with nothing held reached the handler without Alone")
	}

	// Go with hold (more requests at hand), and a write: each is served on a
	// goroutine of its own (its handler waits at the gate while Go returns).
	for _, req := range []*Request{{Op: OpRead, Length: 512, Aux: 1}, {Op: OpWrite, Length: 512, Aux: 1, Payload: make([]byte, 512)}} {
		hold := req.Op == OpRead
		errCh := make(chan error, 1)
		c.Go(req, nil, time.Second, hold, func(_ *Response, err error) { errCh <- err })
		if s := <-seenCh; s.alone == hold {
			t.Fatalf("op %d hold=%v reached the handler with Alone=%v", req.Op, hold, s.alone)
		}
		gate <- struct{}{}
		err := <-errCh
		if (req.Op == OpWrite) != (err != nil) {
			t.Fatalf("op %d: %v", req.Op, err)
		}
	}

	// Over the limit of a frame: refused before the handler.
	before := calls.Load()
	if _, err := c.Do(context.Background(), &Request{Op: OpWrite, Payload: make([]byte, MaxPayload+1)}, nil); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("oversized local request: %v, want ErrTooLarge", err)
	}
	if calls.Load() != before {
		t.Fatal("the handler ran for an oversized request")
	}

	// After stop the client goes to the network again (nothing listens).
	stop()
	if _, err := c.Do(context.Background(), &Request{Op: OpRead, Length: 512}, nil); err == nil || calls.Load() != before {
		t.Fatalf("after stop: err %v, handler calls %d (want a network error and no call)", err, calls.Load()-before)
	}
}

// stop waits for the requests being served, refuses later ones, and only
// removes its own registration.
func TestServeLocalStopDrains(t *testing.T) {
	addr := closedAddr(t)
	entered, release := make(chan struct{}), make(chan struct{})
	stop := ServeLocal(addr, func(ctx context.Context, r *Request) (Response, func()) {
		close(entered)
		<-release
		return Response{}, nil
	}, nil)
	c := NewClient(addr, 1)
	defer c.Close()
	done := make(chan error, 1)
	go func() { _, err := c.Do(context.Background(), &Request{Op: OpPing}, nil); done <- err }()
	<-entered
	stopped := make(chan struct{})
	go func() { stop(); close(stopped) }()
	select {
	case <-stopped:
		t.Fatal("stop returned while a request was being served")
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	<-stopped
	if err := <-done; err != nil {
		t.Fatalf("the request being served at stop: %v", err)
	}

	// A newer registration of the address survives an older one's stop.
	newer := ServeLocal(addr, func(ctx context.Context, r *Request) (Response, func()) { return Response{}, nil }, nil)
	defer newer()
	stopOld := ServeLocal(addr+"x", nil, nil)
	stopOld()
	stop() // already stopped: must not remove the newer one
	if _, err := c.Do(context.Background(), &Request{Op: OpPing}, nil); err != nil {
		t.Fatalf("the newer registration was removed: %v", err)
	}
}
