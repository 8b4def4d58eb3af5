package wire

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// coldHandler answers reads with Length bytes of the offset's low byte.
// Offset 1 is "cold": its inline attempt answers WouldBlock, and its second
// run waits for release. It records every run: offset and Inline.
type coldHandler struct {
	release chan struct{}
	mu      sync.Mutex
	runs    []run
}

type run struct {
	off    uint64
	inline bool
}

func (h *coldHandler) serve(ctx context.Context, r *Request) (Response, func()) {
	h.mu.Lock()
	h.runs = append(h.runs, run{r.Offset, r.Inline})
	h.mu.Unlock()
	if r.Offset == 1 {
		if r.Inline {
			return WouldBlock(), nil
		}
		<-h.release
	}
	return Response{Payload: bytes.Repeat([]byte{byte(r.Offset)}, int(r.Length))}, nil
}

func (h *coldHandler) seen() []run {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]run(nil), h.runs...)
}

// coldThenHot sends the cold read and then a hot one on c without waiting,
// and checks that the hot one is answered while the cold one still waits
// (no head-of-line blocking), then that the cold one is answered in full
// once released, and that the handler ran the cold read twice (inline,
// then off the reader) and the hot one once, inline.
func coldThenHot(t *testing.T, c *Client, h *coldHandler, hold bool) {
	t.Helper()
	type answer struct {
		resp *Response
		err  error
	}
	cold, hot := make(chan answer, 1), make(chan answer, 1)
	c.Go(&Request{Op: OpRead, Offset: 1, Length: 8}, nil, 5*time.Second, hold, func(r *Response, err error) { cold <- answer{r, err} })
	c.Go(&Request{Op: OpRead, Offset: 2, Length: 8}, nil, 5*time.Second, hold, func(r *Response, err error) { hot <- answer{r, err} })
	c.FlushHeld()
	select {
	case a := <-hot:
		if a.err != nil || !bytes.Equal(a.resp.Payload, bytes.Repeat([]byte{2}, 8)) {
			t.Fatalf("hot read: %v %v", a.resp, a.err)
		}
	case <-cold:
		t.Fatal("the cold read was answered before it was released")
	case <-time.After(5 * time.Second):
		t.Fatal("the hot read waited behind the cold one")
	}
	close(h.release)
	select {
	case a := <-cold:
		if a.err != nil || !bytes.Equal(a.resp.Payload, bytes.Repeat([]byte{1}, 8)) {
			t.Fatalf("cold read: %v %v", a.resp, a.err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the cold read was never answered")
	}
	want := map[run]int{{1, true}: 1, {1, false}: 1, {2, true}: 1}
	got := map[run]int{}
	for _, r := range h.seen() {
		got[r]++
	}
	if len(got) != len(want) || got[run{1, true}] != 1 || got[run{1, false}] != 1 || got[run{2, true}] != 1 {
		t.Fatalf("handler runs %v, want the cold read inline then off the reader, the hot one inline once", h.seen())
	}
}

// A request served on the connection's reader that would wait for a device
// (the handler answers WouldBlock) is run again on a goroutine; the
// requests behind it do not wait for it, and nothing is sent for the first
// attempt.
func TestWouldBlockRunsOffTheReader(t *testing.T) {
	h := &coldHandler{release: make(chan struct{})}
	addr := startServer(t, h.serve, func(r *Request) bool { return r.Op == OpRead })
	c := NewClient(addr, 1)
	defer c.Close()
	coldThenHot(t, c, h, true)
}

// The same through a server in this process (ServeLocal): the inline
// attempt runs on the caller's goroutine, the second run on a goroutine of
// its own, and the caller is not held up by it.
func TestWouldBlockLocal(t *testing.T) {
	addr := closedAddr(t)
	h := &coldHandler{release: make(chan struct{})}
	stop := ServeLocal(addr, h.serve, func(r *Request) bool { return r.Op == OpRead })
	defer stop()
	c := NewClient(addr, 1)
	defer c.Close()
	coldThenHot(t, c, h, false)
}

// WouldBlock is for inline requests only: a handler that answers it to a
// request on its own goroutine has a bug, and the client gets an internal
// error rather than a hang or a reply with an unknown status.
func TestWouldBlockNotInline(t *testing.T) {
	h := func(ctx context.Context, r *Request) (Response, func()) { return WouldBlock(), nil }
	for name, addr := range map[string]string{
		"network": startServer(t, h, nil),
		"local":   closedAddr(t),
	} {
		t.Run(name, func(t *testing.T) {
			if name == "local" {
				defer ServeLocal(addr, h, nil)()
			}
			c := NewClient(addr, 1)
			defer c.Close()
			_, err := c.Do(context.Background(), &Request{Op: OpRead, Length: 8}, nil)
			var se *StatusError
			if !errors.As(err, &se) || se.Status != StatusInternal {
				t.Fatalf("err = %v, want StatusInternal", err)
			}
		})
	}
}

// Together puts the requests it selects on the first connection and
// spreads the rest over all of them.
func TestTogetherFirstConnection(t *testing.T) {
	addr := startEcho(t)
	c := NewClient(addr, 2)
	defer c.Close()
	c.Together = func(r *Request) bool { return r.Op == OpRead }
	ctx := context.Background()
	for i := 0; i < 10; i++ {
		if _, err := c.Do(ctx, &Request{Op: OpRead, Offset: 2, Length: 4}, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Do(ctx, &Request{Op: OpWrite, Payload: []byte("abcd")}, nil); err != nil {
			t.Fatal(err)
		}
	}
	sent := make([]uint64, len(c.conns))
	for i := range c.conns {
		if cc := c.conns[i].Load(); cc != nil {
			cc.mu.Lock()
			sent[i] = cc.nextID
			cc.mu.Unlock()
		}
	}
	// 10 reads on the first; the 10 writes alternate.
	if sent[0] != 15 || sent[1] != 5 {
		t.Fatalf("requests per connection %v, want [15 5]", sent)
	}
}
