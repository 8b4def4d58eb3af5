package sds

// chunkop.go: the execution of one chunk request, opcode by opcode.

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/cairn-storage/cairn/appliance/internal/bufpool"
	"github.com/cairn-storage/cairn/appliance/internal/catalog"
	"github.com/cairn-storage/cairn/appliance/internal/iostats"
	"github.com/cairn-storage/cairn/appliance/internal/wire"
)

// chunkRequest is one chunk-level request being served.
type chunkRequest struct {
	s       *Server
	req     *wire.Request
	key     chunkKey
	in, n   int64 // the range within the chunk
	primary bool  // a client's request (this SDS as primary), not a copy's
	// Set by resolve: the chunk's group in the route's map (int32 packs
	// beside primary: the struct stays in its 96-byte size class), the
	// route, and the device of this SDS's copy (nil until resolved).
	pg    int32
	route catalog.Route
	dev   *device
}

// count adds the request's bytes and latency to x (extents move no data).
func (c *chunkRequest) count(x *iostats.Counters, took time.Duration) {
	switch c.req.Op {
	case wire.OpRead:
		x.Read(c.n, took)
	case wire.OpExtents:
	default:
		x.Write(c.n, took)
	}
}

func (c *chunkRequest) lockRange() func() {
	const a = 4096 // covers any device alignment: unaligned writes RMW within it
	start := c.in &^ (a - 1)
	end := (c.in + c.n + a - 1) &^ (a - 1)
	return c.s.locks.lock(c.key, start, end)
}

func (c *chunkRequest) run(ctx context.Context) (wire.Response, func()) {
	s := c.s
	switch c.req.Op {
	case wire.OpChunkPut:
		return c.chunkPut(ctx)
	case wire.OpRead:
		if answer, ok := c.resolve(ctx); !ok {
			return answer, nil
		}
		buf := bufpool.Get(int(c.n))
		unlock := c.lockRange()
		// On a connection's reader, with more requests buffered behind it,
		// a read the page cache cannot answer at once goes to a goroutine:
		// waiting there for the device would hold them all up. Alone (queue
		// depth 1 on the connection), it waits where it is: a hand-off
		// would only add a wake-up (same-run A/B: 1.12x the CPU per cold
		// read at QD 1).
		err := c.readLocal(buf, c.req.Inline && !c.req.Alone)
		unlock()
		if errors.Is(err, errWouldBlock) {
			bufpool.Put(buf)
			return wire.WouldBlock(), nil
		}
		if err != nil {
			bufpool.Put(buf)
			return s.localError(c.dev, err)
		}
		return wire.Response{Payload: buf}, func() { bufpool.Put(buf) }
	case wire.OpExtents:
		if answer, ok := c.resolve(ctx); !ok {
			return answer, nil
		}
		_, mapped := s.idx.lookup(c.key)
		b := []byte{0}
		if mapped {
			b[0] = 1
		}
		return wire.Response{Payload: b}, nil
	case wire.OpCopyFrom:
		if !c.primary || len(c.req.Payload) != 8 {
			return errResp(wire.StatusInvalid, errors.New("copy: bad request"))
		}
		// Read the source before locking the destination: the source may
		// be this very chunk, whose lock we are about to take.
		src, err := s.cl.OpenID(binary.BigEndian.Uint64(c.req.Payload))
		if err != nil {
			return errResp(wire.StatusNotFound, err)
		}
		buf := bufpool.Get(int(c.n))
		defer bufpool.Put(buf)
		if err := src.ReadAt(ctx, buf, int64(c.req.Aux)); err != nil {
			return errResp(wire.StatusIOError, fmt.Errorf("copy: read source: %w", err))
		}
		fwd := *c.req
		fwd.Op, fwd.Payload, fwd.Aux = wire.OpWrite, buf, 0
		return c.mutate(ctx, &fwd, func() error { return c.writeLocal(buf) })
	case wire.OpWrite:
		return c.mutate(ctx, c.req, func() error { return c.writeLocal(c.req.Payload) })
	case wire.OpWriteSame:
		pat := c.req.Payload
		if len(pat) == 0 || c.n%int64(len(pat)) != 0 {
			return errResp(wire.StatusInvalid, errors.New("write same: pattern does not divide the range"))
		}
		return c.mutate(ctx, c.req, func() error {
			buf := bufpool.Get(int(c.n))
			defer bufpool.Put(buf)
			for o := 0; o < len(buf); o += len(pat) {
				copy(buf[o:], pat)
			}
			return c.writeLocal(buf)
		})
	case wire.OpWriteZeroes, wire.OpUnmap:
		return c.mutate(ctx, c.req, func() error { return c.zeroLocal(c.req.Flags&wire.FlagUnmap != 0 || c.req.Op == wire.OpUnmap) })
	case wire.OpCompareWrite:
		if int64(len(c.req.Payload)) != 2*c.n {
			return errResp(wire.StatusInvalid, errors.New("compare-and-write: payload must hold compare and write data"))
		}
		if !c.primary {
			return errResp(wire.StatusInvalid, errors.New("compare-and-write is executed at the primary only"))
		}
		cmp, data := c.req.Payload[:c.n], c.req.Payload[c.n:]
		unlock := c.lockRange()
		defer unlock()
		if answer, ok := c.resolve(ctx); !ok {
			return answer, nil
		}
		cur := bufpool.Get(int(c.n))
		defer bufpool.Put(cur)
		if err := c.readLocal(cur, false); err != nil {
			return s.localError(c.dev, err)
		}
		if c.req.Flags&wire.FlagRetry != 0 && !bytes.Equal(cur, cmp) && bytes.Equal(cur, data) {
			// A retry after an attempt whose outcome the client did not
			// learn: the block already holds this request's data, so that
			// attempt took effect here. Mirror it again (the copies may
			// have missed it) and report the success it was.
			fwd := *c.req
			fwd.Op, fwd.Payload, fwd.Flags = wire.OpWrite, data, c.req.Flags&^wire.FlagRetry
			return c.mutateLocked(ctx, &fwd, func() error { return nil })
		}
		for i := range cur {
			if cur[i] != cmp[i] {
				// A normal answer (VMFS heartbeats miscompare all the
				// time): no log line.
				return wire.Response{Status: wire.StatusMiscompare, Aux: uint64(i)}, nil
			}
		}
		fwd := *c.req
		fwd.Op, fwd.Payload = wire.OpWrite, data
		return c.mutateLocked(ctx, &fwd, func() error { return c.writeLocal(data) })
	}
	return errResp(wire.StatusUnsupported, fmt.Errorf("opcode %d", c.req.Op))
}
