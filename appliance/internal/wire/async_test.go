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
