package sds

// dispatch.go: request dispatch: every data-path request enters at handle;
// chunk requests are checked against the map (epoch, range, route, role)
// before they run.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/cairn-storage/cairn/appliance/internal/catalog"
	"github.com/cairn-storage/cairn/appliance/internal/model"
	"github.com/cairn-storage/cairn/appliance/internal/placement"
	"github.com/cairn-storage/cairn/appliance/internal/sdsrpc"
	"github.com/cairn-storage/cairn/appliance/internal/wire"
)

func ok() (wire.Response, func()) { return wire.Response{}, nil }

func errResp(status uint16, err error) (wire.Response, func()) { return errAnswer(status, err), nil }

// errAnswer is an error reply: the status, and the message as payload.
func errAnswer(status uint16, err error) wire.Response {
	return wire.Response{Status: status, Payload: []byte(err.Error())}
}

// handle serves one data-path request.
func (s *Server) handle(ctx context.Context, req *wire.Request) (wire.Response, func()) {
	if peer, ok := wire.PeerFrom(ctx); ok && !mayDo(peer.Role, req) {
		return s.forbid(peer, req)
	}
	switch req.Op {
	case wire.OpPing:
		return ok()
	case wire.OpFlush:
		if err := s.flush(); err != nil {
			return errResp(wire.StatusIOError, err)
		}
		return ok()
	case wire.OpPrepareDevice:
		var p sdsrpc.PrepareDeviceRequest
		if err := json.Unmarshal(req.Payload, &p); err != nil {
			return errResp(wire.StatusInvalid, fmt.Errorf("prepare device: %w", err))
		}
		capacity, err := s.prepareDevice(p)
		if errors.Is(err, errDeviceTaken) {
			return errResp(wire.StatusRefused, err)
		} else if err != nil {
			return errResp(wire.StatusInvalid, err)
		}
		b, _ := json.Marshal(sdsrpc.PrepareDeviceResponse{Capacity: capacity})
		return wire.Response{Payload: b}, nil
	case wire.OpChunkList:
		if req.Epoch < s.cat.Epoch() {
			return wire.Response{Status: wire.StatusStaleEpoch, Epoch: s.cat.Epoch()}, nil
		}
		return s.chunkList(req)
	case wire.OpRead, wire.OpWrite, wire.OpCompareWrite, wire.OpWriteZeroes, wire.OpWriteSame, wire.OpUnmap, wire.OpCopyFrom, wire.OpExtents, wire.OpChunkPut:
		return s.chunkOp(ctx, req)
	}
	return errResp(wire.StatusUnsupported, fmt.Errorf("opcode %d", req.Op))
}

// inlineOp: small reads, and small copies' writes from a primary, are
// served on the connection's reader, in order, with their replies batched
// (see wire.ServeInline): one local read or write is shorter than a
// goroutine hand-off and two wake-ups, and a primary's burst of forwarded
// writes is acknowledged with one send. A copy's write forwards nowhere: it
// waits only for its range (held by other local writes, never by a request
// that waits for this connection), the device, and, in the rare request
// routed with a map newer than this SDS's, for that map (bounded, see
// chunkOp). FUA writes, which flush the device, get a goroutine of their
// own.
//
// A primary's small write is served here too when nothing is buffered
// behind it (req.Alone: queue depth 1 on this connection), so no goroutine
// is started and woken for it (A/B at QD 1: 1.21x IOPS, 0.80x CPU per
// write; docs/benchmarks.md). It also waits for its copies' answers, which
// arrive on the peer connections' readers, never on this one, and a copy
// never waits for a primary: so the reader cannot wait on itself. At
// higher queue depths writes keep their goroutines and run in parallel.
func inlineOp(req *wire.Request) bool {
	switch req.Op {
	case wire.OpRead:
		return req.Length <= wire.MaxInlineRead
	case wire.OpWrite:
		return (req.Flags&wire.FlagReplica != 0 || req.Alone) && req.Flags&wire.FlagFUA == 0 && req.Length <= 128<<10
	}
	return false
}

// chunkOp checks a chunk request's epoch and range, runs it (the route is
// looked up by resolve, once, where the operation needs it) and counts it.
func (s *Server) chunkOp(ctx context.Context, req *wire.Request) (wire.Response, func()) {
	cur := s.cat.Epoch()
	if req.Epoch < cur {
		return wire.Response{Status: wire.StatusStaleEpoch, Epoch: cur}, nil
	}
	if req.Epoch > cur {
		wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := s.cat.WaitEpoch(wctx, req.Epoch)
		cancel()
		if err != nil {
			return errResp(wire.StatusUnavailable, fmt.Errorf("SDS has not seen epoch %d yet: %w", req.Epoch, err))
		}
	}
	inChunk := int64(req.Offset % model.ChunkSize)
	n := int64(req.Length)
	if n <= 0 || inChunk+n > model.ChunkSize {
		return errResp(wire.StatusInvalid, fmt.Errorf("range %d+%d crosses a chunk boundary", req.Offset, n))
	}
	key := chunkKey{req.Volume, req.Offset / model.ChunkSize}
	replica := req.Flags&wire.FlagReplica != 0 || req.Op == wire.OpChunkPut
	op := &chunkRequest{s: s, req: req, key: key, in: inChunk, n: n, primary: !replica}
	start := time.Now()
	resp, release := op.run(ctx)
	if op.dev == nil || wire.IsWouldBlock(resp) {
		return resp, release // refused before it reached a device, or to be run again: not counted
	}
	took := time.Since(start)
	op.count(&op.dev.io, took)
	if !replica {
		op.count(&s.counters(req.Volume).Counters, took)
		op.count(&s.total.Counters, took)
	}
	return resp, release
}

// resolve looks up the chunk's route, checks this SDS's role in it and
// picks the device of its copy. It is the request's only route lookup: a
// mutation calls it once it holds its range (see mutateLocked), anything
// else before it runs. When this SDS must not serve the request, ok is
// false and answer is the reply.
func (c *chunkRequest) resolve(ctx context.Context) (answer wire.Response, ok bool) {
	s := c.s
	// The group's index is kept for change tracking (mutateLocked); this
	// closure does not escape, so it costs no allocation.
	pgOf := func(vol, chunk uint64, n int) int {
		pg := placement.PG(vol, chunk, n)
		c.pg = int32(pg)
		return pg
	}
	route, found := s.cat.ChunkRoute(c.key.vol, c.key.chunk, pgOf)
	if !found || len(route.Copies) == 0 {
		// A volume created a moment ago can reach the client's catalog before
		// this SDS's (volumes do not move the epoch): wait for it briefly
		// before answering that it does not exist.
		route, found = s.awaitRoute(ctx, c.key.vol, c.key.chunk, pgOf)
	}
	if !found || len(route.Copies) == 0 {
		return errAnswer(wire.StatusNotFound, fmt.Errorf("volume %016x has no placement here", c.key.vol)), false
	}
	role := -1
	for i, cp := range route.Copies {
		if cp.SDSID == s.id && (role < 0 || (!c.primary && role == 0)) {
			role = i // the primary role wins for client requests, a secondary one for replicas
		}
	}
	switch {
	case c.primary && (role != 0 || route.Copies[0].State != model.CopyReady):
		if route.Epoch > c.req.Epoch {
			// The map moved on after the client routed the request (while
			// it waited for its range, say): the client retries once it
			// has that map.
			return wire.Response{Status: wire.StatusStaleEpoch, Epoch: route.Epoch}, false
		}
		return wire.Response{Status: wire.StatusNotPrimary, Epoch: route.Epoch}, false
	case !c.primary && (role < 1 || !route.Copies[role].Active()):
		// Not (or no longer) an active copy at this epoch: refuse, so a
		// primary that missed a map change cannot count this copy.
		return wire.Response{Status: wire.StatusNotPrimary, Epoch: route.Epoch}, false
	}
	s.mu.RLock()
	dev := s.devices[route.Copies[role].DeviceID]
	s.mu.RUnlock()
	if dev == nil || dev.failed.Load() {
		return errAnswer(wire.StatusUnavailable, fmt.Errorf("device %s of this copy is not in service", route.Copies[role].DeviceID)), false
	}
	c.route, c.dev = route, dev
	return wire.Response{}, true
}

// awaitRoute waits up to one second for the catalog to learn a chunk's
// route, then reloads it from etcd once; only the rare unknown-volume answer
// pays for it.
func (s *Server) awaitRoute(ctx context.Context, vol, chunk uint64, pgOf func(vol, chunk uint64, n int) int) (catalog.Route, bool) {
	deadline := time.NewTimer(time.Second)
	defer deadline.Stop()
	for {
		ch := s.cat.Changed()
		if r, ok := s.cat.ChunkRoute(vol, chunk, pgOf); ok && len(r.Copies) > 0 {
			return r, true
		}
		select {
		case <-ctx.Done():
			return catalog.Route{}, false
		case <-ch:
		case <-deadline.C:
			if err := s.cat.Refresh(ctx); err != nil {
				return catalog.Route{}, false
			}
			return s.cat.ChunkRoute(vol, chunk, pgOf)
		}
	}
}
