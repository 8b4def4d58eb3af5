package wire

import (
	"bytes"
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"
)

// silentServer accepts connections and never answers; with closeOnRequest
// it closes each connection once a request arrives.
func silentServer(t *testing.T, closeOnRequest bool) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
			go func() {
				var b [ReqHeader]byte
				if _, err := c.Read(b[:]); err == nil && closeOnRequest {
					c.Close()
				}
			}()
		}
	}()
	return l.Addr().String()
}

func goWait(c *Client, req *Request, dst []byte, timeout time.Duration) (*Response, error) {
	type result struct {
		r   *Response
		err error
	}
	ch := make(chan result, 1)
	c.Go(req, dst, timeout, false, func(r *Response, err error) { ch <- result{r, err} })
	res := <-ch
	return res.r, res.err
}

// Inline reads and goroutine writes on one connection, many in flight,
// through Go and Do together: every answer reaches its caller.
func TestGoWithInlineServer(t *testing.T) {
	addr := startServer(t, func(ctx context.Context, r *Request) (Response, func()) {
		switch r.Op {
		case OpRead:
			return Response{Payload: bytes.Repeat([]byte{byte(r.Offset)}, int(r.Length))}, nil
		case OpWrite:
			time.Sleep(time.Millisecond)
			return Response{Aux: uint64(len(r.Payload))}, nil
		}
		return Errorf(StatusUnsupported, "op %d", r.Op), nil
	}, func(r *Request) bool { return r.Op == OpRead })

	c := NewClient(addr, 2)
	defer c.Close()
	var wg sync.WaitGroup
	for i := 0; i < 300; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			dst := make([]byte, 512*(i%9+1))
			r, err := goWait(c, &Request{Op: OpRead, Offset: uint64(i), Length: uint32(len(dst))}, dst, 5*time.Second)
			if err != nil || !bytes.Equal(r.Payload, bytes.Repeat([]byte{byte(i)}, len(dst))) || &r.Payload[0] != &dst[0] {
				t.Errorf("read %d: err %v or wrong payload", i, err)
			}
			if i%3 == 0 {
				w, err := c.Do(context.Background(), &Request{Op: OpWrite, Payload: dst}, nil)
				if err != nil || w.Aux != uint64(len(dst)) {
					t.Errorf("write %d: %v", i, err)
				}
			}
		}()
	}
	wg.Wait()
	if _, err := goWait(c, &Request{Op: OpCopyFrom}, nil, 5*time.Second); !IsStatus(err, StatusUnsupported) {
		t.Fatalf("unsupported op through Go: %v, want a StatusError", err)
	}
}

// A server that never answers: the call fails with ErrTimeout near its
// deadline, not never.
func TestGoTimeout(t *testing.T) {
	c := NewClient(silentServer(t, false), 1)
	defer c.Close()
	start := time.Now()
	_, err := goWait(c, &Request{Op: OpRead, Length: 512}, nil, 300*time.Millisecond)
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("got %v, want ErrTimeout", err)
	}
	if d := time.Since(start); d < 300*time.Millisecond || d > 3*time.Second {
		t.Fatalf("timed out after %v, want about 300 ms", d)
	}
}

// A connection that breaks: pending calls fail at once with the error, and
// a closed client refuses new ones.
func TestGoConnectionFailure(t *testing.T) {
	c := NewClient(silentServer(t, true), 1)
	_, err := goWait(c, &Request{Op: OpRead, Length: 512}, nil, time.Minute)
	if err == nil || errors.Is(err, ErrTimeout) {
		t.Fatalf("got %v, want a connection error", err)
	}
	c.Close()
	if _, err := goWait(c, &Request{Op: OpRead, Length: 512}, nil, time.Minute); !errors.Is(err, ErrClosed) {
		t.Fatalf("closed client: %v, want ErrClosed", err)
	}
}

// TestIdleBeforeWaitingForPayload: when an answer's payload is still on its
// way, the answers handled before it are followed by OnIdle first (a
// frontend sends its held replies, TCMU rings its doorbell), not only once
// that payload has arrived.
func TestIdleBeforeWaitingForPayload(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	idle := make(chan struct{}, 16)
	rest := make(chan struct{})
	served := make(chan error, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			served <- err
			return
		}
		defer c.Close()
		var req [2]Request
		var hdr [ReqHeader]byte
		for i := range req {
			if err := ReadRequest(c, hdr[:], &req[i], func(n int) []byte { return make([]byte, n) }); err != nil {
				served <- err
				return
			}
		}
		// The first answer whole, then the second's header and a part of
		// its 64 KiB payload; the rest only once the client went idle.
		small := Response{ID: req[0].ID, Payload: []byte("first")}
		big := Response{ID: req[1].ID, Payload: bytes.Repeat([]byte{7}, 64<<10)}
		var rh [RespHeader]byte
		var out []byte
		PutResponseHeader(rh[:], &small)
		out = append(append(out, rh[:]...), small.Payload...)
		PutResponseHeader(rh[:], &big)
		out = append(append(out, rh[:]...), big.Payload[:1000]...)
		if _, err := c.Write(out); err != nil {
			served <- err
			return
		}
		select {
		case <-rest:
		case <-time.After(5 * time.Second):
		}
		_, err = c.Write(big.Payload[1000:])
		served <- err
	}()
	c := NewClient(l.Addr().String(), 1)
	c.OnIdle = func() { idle <- struct{}{} }
	defer c.Close()
	var order []string
	var mu sync.Mutex
	note := func(s string) { mu.Lock(); order = append(order, s); mu.Unlock() }
	first, second := make(chan error, 1), make(chan error, 1)
	c.Go(&Request{Op: OpRead, Length: 5}, nil, 10*time.Second, true, func(_ *Response, err error) { note("first"); first <- err })
	c.Go(&Request{Op: OpRead, Length: 64 << 10}, nil, 10*time.Second, false, func(_ *Response, err error) { note("second"); second <- err })
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	select {
	case <-idle:
		note("idle")
	case <-time.After(3 * time.Second):
		t.Error("no OnIdle after the first answer while the second's payload was still on its way")
	}
	close(rest)
	if err := <-second; err != nil {
		t.Fatal(err)
	}
	if err := <-served; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(order) < 3 || order[0] != "first" || order[1] != "idle" || order[2] != "second" {
		t.Errorf("order %v, want [first idle second]", order)
	}
}
