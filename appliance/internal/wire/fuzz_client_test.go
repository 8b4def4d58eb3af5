package wire

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"
)

// FuzzClientResponses: whatever a server (or something posing as one)
// sends back, the client neither panics nor hangs nor allocates beyond
// MaxPayload: a request ends, answered or failed, within its deadline.
func FuzzClientResponses(f *testing.F) {
	h := make([]byte, RespHeader)
	PutResponseHeader(h, &Response{ID: 1, Payload: []byte("data")})
	f.Add(append(h, "data"...))
	f.Add(h[:20])
	bad := append([]byte(nil), h...)
	binary.BigEndian.PutUint32(bad[32:], 1<<31) // a payload of 2 GiB announced
	f.Add(bad)
	other := append([]byte(nil), h...)
	binary.BigEndian.PutUint64(other[8:], 99) // an id nobody asked for
	f.Add(append(other, "data"...))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		f.Fatal(err)
	}
	defer l.Close()
	answers := make(chan []byte)
	go func() {
		for b := range answers {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_ = c.SetDeadline(time.Now().Add(2 * time.Second))
			_, _ = io.ReadFull(c, make([]byte, ReqHeader))
			_, _ = c.Write(b)
			c.Close()
		}
	}()
	defer close(answers)
	f.Fuzz(func(t *testing.T, b []byte) {
		cl := NewClient(l.Addr().String(), 1)
		defer cl.Close()
		answers <- b
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		start := time.Now()
		r, err := cl.Do(ctx, &Request{Op: OpRead, Volume: 1, Length: 4}, nil)
		if d := time.Since(start); d > 4*time.Second {
			t.Fatalf("a request took %s", d)
		}
		if err == nil && len(r.Payload) > MaxPayload {
			t.Fatalf("a %d-byte payload accepted", len(r.Payload))
		}
	})
}
