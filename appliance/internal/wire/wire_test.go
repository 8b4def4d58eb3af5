package wire

import (
	"bytes"
	"context"
	"encoding/binary"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"
)

// startServer serves h (with inline, if not nil) on a loopback port until
// the test ends, and returns the address.
func startServer(t *testing.T, h Handler, inline func(*Request) bool) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		ServeInline(ctx, l, h, inline, slog.Default())
	}()
	t.Cleanup(func() { cancel(); <-done })
	return l.Addr().String()
}

func startEcho(t *testing.T) string {
	t.Helper()
	return startServer(t, func(ctx context.Context, r *Request) (Response, func()) {
		switch r.Op {
		case OpRead:
			// reply with Length bytes of the offset's low byte; slow for odd offsets
			if r.Offset%2 == 1 {
				time.Sleep(20 * time.Millisecond)
			}
			return Response{Epoch: r.Epoch, Payload: bytes.Repeat([]byte{byte(r.Offset)}, int(r.Length))}, nil
		case OpWrite:
			return Response{Aux: uint64(len(r.Payload))}, nil
		}
		return Errorf(StatusUnsupported, "op %d", r.Op), nil
	}, nil)
}

func TestRoundTripOutOfOrder(t *testing.T) {
	c := NewClient(startEcho(t), 2)
	defer c.Close()
	ctx := context.Background()
	var wg sync.WaitGroup
	for i := 0; i < 64; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			dst := make([]byte, 4096)
			r, err := c.Do(ctx, &Request{Op: OpRead, Offset: uint64(i), Length: 4096, Epoch: 7}, dst)
			if err != nil {
				t.Error(err)
				return
			}
			if r.Epoch != 7 || !bytes.Equal(r.Payload, bytes.Repeat([]byte{byte(i)}, 4096)) || &r.Payload[0] != &dst[0] {
				t.Errorf("request %d: wrong response", i)
			}
			w, err := c.Do(ctx, &Request{Op: OpWrite, Payload: dst[:i*8]}, nil)
			if err != nil || w.Aux != uint64(i*8) {
				t.Errorf("write %d: %v %v", i, w, err)
			}
		}(i)
	}
	wg.Wait()
	_, err := c.Do(ctx, &Request{Op: 99}, nil)
	if !IsStatus(err, StatusUnsupported) {
		t.Fatalf("unsupported op: %v", err)
	}
}

func TestCancelAndServerGone(t *testing.T) {
	addr := startEcho(t)
	c := NewClient(addr, 1)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
	defer cancel()
	if _, err := c.Do(ctx, &Request{Op: OpRead, Offset: 1, Length: 512}, nil); err == nil {
		t.Fatal("expected timeout")
	}
	// the connection stays usable after a cancelled request
	if _, err := c.Do(context.Background(), &Request{Op: OpRead, Offset: 2, Length: 512}, nil); err != nil {
		t.Fatal(err)
	}
	bad := NewClient("127.0.0.1:1", 1)
	if _, err := bad.Do(context.Background(), &Request{Op: OpPing}, nil); err == nil {
		t.Fatal("expected connection refused")
	}
}

func TestCorruptFrameDropsConnection(t *testing.T) {
	addr := startEcho(t)
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	h := make([]byte, ReqHeader)
	PutRequestHeader(h, &Request{Op: OpRead, Length: 512})
	h[33] ^= 1 // flip a bit after the checksum was computed
	nc.Write(h)
	nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := nc.Read(make([]byte, 64)); err == nil {
		t.Fatalf("server answered a corrupt frame with %d bytes", n)
	}
}

func FuzzParseRequest(f *testing.F) {
	h := make([]byte, ReqHeader)
	PutRequestHeader(h, &Request{Op: OpWrite, Payload: []byte("abc")})
	f.Add(append(h, 'a', 'b', 'c'))
	f.Add(make([]byte, 70))
	big := append([]byte(nil), h...)
	binary.BigEndian.PutUint32(big[52:], 1<<31)
	f.Add(big)
	f.Fuzz(func(t *testing.T, b []byte) {
		var r Request
		hdr := make([]byte, ReqHeader)
		_ = ReadRequest(bytes.NewReader(b), hdr, &r, func(n int) []byte {
			if n > MaxPayload {
				t.Fatalf("allocation of %d bytes", n)
			}
			return make([]byte, n)
		})
	})
}

// TestAloneMarksQueueDepthOne: the server tells the inline decision whether
// another request was already buffered behind this one.
func TestAloneMarksQueueDepthOne(t *testing.T) {
	var mu sync.Mutex
	alone := map[uint64]bool{}
	addr := startServer(t, func(ctx context.Context, r *Request) (Response, func()) { return Response{}, nil },
		func(r *Request) bool {
			mu.Lock()
			alone[r.Offset] = r.Alone
			mu.Unlock()
			return true
		})
	c := NewClient(addr, 1)
	defer c.Close()
	ctx := context.Background()
	if _, err := c.Do(ctx, &Request{Op: OpRead, Offset: 100, Length: 1}, nil); err != nil {
		t.Fatal(err)
	}
	// A burst sent in one write: all but the last have company.
	var wg sync.WaitGroup
	for i := uint64(0); i < 4; i++ {
		wg.Add(1)
		c.Go(&Request{Op: OpRead, Offset: i, Length: 1}, nil, 5*time.Second, true, func(_ *Response, err error) {
			if err != nil {
				t.Error(err)
			}
			wg.Done()
		})
	}
	c.FlushHeld()
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if !alone[100] || alone[0] || alone[1] || alone[2] || !alone[3] {
		t.Fatalf("alone by request: %v (want only 100 and 3)", alone)
	}
}
