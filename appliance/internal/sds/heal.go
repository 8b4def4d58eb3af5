package sds

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cairn-storage/cairn/appliance/internal/bufpool"
	"github.com/cairn-storage/cairn/appliance/internal/model"
	"github.com/cairn-storage/cairn/appliance/internal/placement"
	"github.com/cairn-storage/cairn/appliance/internal/wire"
)

// fillStreams is the number of chunks one fill sends at once, and
// maxFills the number of fills an SDS runs at once. Pushes in flight over
// all fills are bounded by maxPushes and the pacing (throttle.go); many
// fills side by side keep the pushes flowing while some fills list the
// target's chunks, wait for in-flight writes or report.
const (
	fillStreams = 4
	maxFills    = 16
)

// FilledPrefix is where fill reports go (model/keys.go).
const FilledPrefix = model.FilledPrefix

// pgRef names a placement group of a pool.
type pgRef struct {
	pool string
	pg   int
}

// fillJob is one fill; a watchdog restarts a fill that makes no progress
// for fillStall (a peer that stopped answering, a lost wake-up). Waiting
// for a fill slot or for the pacing (a low bandwidth cap, a busy SDS under
// favor-app-io) is not a stall.
type fillJob struct {
	cancel   context.CancelFunc
	progress atomic.Int64 // Unix ns of the last progress
	done     atomic.Bool
	started  atomic.Bool  // holds a fill slot
	pacing   atomic.Int32 // pushes waiting for the pacing
}

const fillStall = 20 * time.Second

// A fill's requests to its target: each bounded by peerTimeout, and sent
// again at most maxStaleRetries times when answered "stale epoch".
const (
	peerTimeout     = 30 * time.Second
	maxStaleRetries = 20
)

// tracker records the chunks of one group that changed while one of its
// copies was away (instant maintenance), so its return costs only those.
type tracker struct {
	complete bool // tracking began when the copy left: the set is exact
	chunks   map[chunkKey]struct{}
}

// healer is the SDS's share of self-healing: change tracking for away
// copies, and filling copies (rebuild, resync) of groups it is primary of.
type healer struct {
	s *Server

	mu       sync.Mutex
	prev     map[string]*model.PlacementMap // last maps seen, by pool
	trackers map[pgRef]map[string]*tracker  // by group, then away device
	running  map[string]*fillJob            // fills started, by fillID (kept once done)
	gcSeen   map[chunkKey]bool

	sem  chan struct{} // bounds concurrent fills
	pace *pacer        // paces their pushes: policy, bandwidth cap

	pendingBytes atomic.Int64
	doneBytes    atomic.Int64
	resyncBytes  atomic.Int64
	rateBytes    atomic.Int64 // bytes pushed, for the rate
	staleRetries atomic.Int64 // pushes sent again at a newer epoch
}

func newHealer(s *Server) *healer {
	capMBs := func() int {
		x, _ := s.cat.SDS(s.id)
		return x.RebuildMBps
	}
	appOps := func() uint64 { return s.total.Ops() }
	return &healer{s: s, prev: map[string]*model.PlacementMap{}, trackers: map[pgRef]map[string]*tracker{},
		running: map[string]*fillJob{}, sem: make(chan struct{}, maxFills),
		pace: newPacer(realClock{}, s.cat.Pool, capMBs, appOps)}
}

func fillID(r pgRef, dev string, since uint64) string {
	return r.pool + "/" + strconv.Itoa(r.pg) + "/" + dev + "/" + strconv.FormatUint(since, 10)
}

// observe reacts to new maps: starts tracking copies that just went away,
// and starts fills for groups this SDS is primary of.
func (h *healer) observe(ctx context.Context) {
	me := h.s.id
	h.mu.Lock()
	defer h.mu.Unlock()
	wanted := map[string]bool{}
	for _, m := range h.s.cat.Maps() {
		old := h.prev[m.PoolID]
		for pg, copies := range m.PGs {
			if len(copies) == 0 {
				continue
			}
			ref := pgRef{m.PoolID, pg}
			primary := copies[0].SDSID == me
			for _, c := range copies[1:] {
				if c.State == model.CopyAway && primary {
					if h.trackers[ref] == nil {
						h.trackers[ref] = map[string]*tracker{}
					}
					if h.trackers[ref][c.DeviceID] == nil {
						// Exact only if this process saw the copy active
						// in the previous map while holding the group.
						complete := false
						if old != nil && pg < len(old.PGs) {
							wasActive, held := false, false
							for _, oc := range old.PGs[pg] {
								if oc.DeviceID == c.DeviceID && oc.State != model.CopyAway {
									wasActive = true
								}
								if oc.SDSID == me && oc.State == model.CopyReady {
									held = true
								}
							}
							complete = wasActive && held
						}
						h.trackers[ref][c.DeviceID] = &tracker{complete: complete, chunks: map[chunkKey]struct{}{}}
					}
				}
				if primary && c.SDSID != me && (c.State == model.CopyRebuild || c.State == model.CopyResync) {
					id := fillID(ref, c.DeviceID, c.Since)
					wanted[id] = true
					j, ok := h.running[id]
					if ok && !j.done.Load() && j.started.Load() && j.pacing.Load() == 0 && time.Since(time.Unix(0, j.progress.Load())) > fillStall {
						h.s.log.Warn("fill made no progress; restarting it", "pool", ref.pool, "pg", ref.pg, "target", c.DeviceID)
						j.cancel()
						ok = false
					}
					if !ok {
						fctx, cancel := context.WithCancel(ctx)
						j = &fillJob{cancel: cancel}
						j.progress.Store(time.Now().UnixNano())
						h.running[id] = j
						go h.fill(fctx, id, j, ref, m.PGCount, c)
					}
				}
			}
		}
		h.prev[m.PoolID] = m
	}
	for id, j := range h.running {
		if !wanted[id] {
			j.cancel() // the map moved on: this fill is no longer wanted
			delete(h.running, id)
		}
	}
}

// track records a change to a chunk for every away copy of its group.
func (h *healer) track(ref pgRef, away []model.CopyRef, k chunkKey) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, c := range away {
		if h.trackers[ref] == nil {
			h.trackers[ref] = map[string]*tracker{}
		}
		t := h.trackers[ref][c.DeviceID]
		if t == nil {
			t = &tracker{chunks: map[chunkKey]struct{}{}}
			h.trackers[ref][c.DeviceID] = t
		}
		t.chunks[k] = struct{}{}
	}
}

// chunksOf returns this SDS's allocated chunks of a group.
func (h *healer) chunksOf(ref pgRef, pgCount int) []chunkKey {
	var out []chunkKey
	for _, k := range h.s.idx.chunks() {
		v, ok := h.s.cat.Volume(k.vol)
		if ok && v.PoolID == ref.pool && placement.PG(k.vol, k.chunk, pgCount) == ref.pg {
			if loc, ok := h.s.idx.lookup(k); ok && loc.dev.failed.Load() {
				continue // on a failed device: not a copy any more
			}
			out = append(out, k)
		}
	}
	return out
}

// fill copies a group's chunks to one copy being rebuilt or resynced, then
// reports it filled. Each chunk is sent under its full-chunk lock, so no
// write to it is in flight: the copy gets every earlier write in the chunk
// data, and every later write through normal forwarding.
func (h *healer) fill(ctx context.Context, id string, job *fillJob, ref pgRef, pgCount int, target model.CopyRef) {
	defer job.cancel()
	select {
	case h.sem <- struct{}{}:
	case <-ctx.Done():
		return
	}
	var releaseOnce sync.Once
	release := func() { releaseOnce.Do(func() { <-h.sem }) }
	defer release()
	job.started.Store(true)
	job.progress.Store(time.Now().UnixNano())
	log := h.s.log.With("pool", ref.pool, "pg", ref.pg, "target", target.DeviceID, "mode", target.State)
	// Writes already holding a range may have been routed by a map that
	// did not list this copy: wait for them, so that what is listed (or
	// tracked) below includes them. Later writes see the copy in the map.
	if err := h.s.locks.barrier(ctx); err != nil {
		return
	}
	var todo []chunkKey
	delta := false
	var drop []chunkKey
	h.mu.Lock()
	if t := h.trackers[ref][target.DeviceID]; target.State == model.CopyResync && t != nil && t.complete {
		delta = true
		for k := range t.chunks {
			todo = append(todo, k)
		}
	}
	h.mu.Unlock()
	if !delta {
		todo = h.chunksOf(ref, pgCount)
		// Chunks the target holds that the primary does not: drop them.
		theirs, err := h.remoteChunks(ctx, ref, target)
		if err != nil {
			if ctx.Err() == nil {
				log.Warn("fill: list target chunks", "err", err)
				h.retryLater(id, job)
			}
			return
		}
		mine := map[chunkKey]bool{}
		for _, k := range todo {
			mine[k] = true
		}
		for _, k := range theirs {
			if !mine[k] {
				drop = append(drop, k)
			}
		}
	}
	total := int64(len(todo)) * model.ChunkSize
	h.pendingBytes.Add(total)
	defer func() { h.pendingBytes.Add(-total) }()
	start := time.Now()
	stale0 := h.staleRetries.Load()
	var sent atomic.Int64
	// A few chunks in flight per fill keep both devices and the link busy;
	// fills of several groups run side by side (h.sem).
	keys := make(chan chunkKey)
	pctx, stop := context.WithCancel(ctx)
	defer stop()
	var failed atomic.Bool
	var wg sync.WaitGroup
	for w := 0; w < fillStreams; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range keys {
				n, err := h.push(pctx, job, ref.pool, k, target)
				if err != nil {
					if pctx.Err() == nil && failed.CompareAndSwap(false, true) {
						log.Warn("fill: push chunk", "chunk", k.chunk, "err", err)
					}
					stop()
					continue
				}
				sent.Add(n)
				job.progress.Store(time.Now().UnixNano())
				h.pendingBytes.Add(-n)
				h.doneBytes.Add(n)
				h.rateBytes.Add(n)
				if delta {
					h.resyncBytes.Add(n)
				}
			}
		}()
	}
	for _, k := range append(drop, todo...) {
		if pctx.Err() != nil {
			break
		}
		select {
		case keys <- k:
		case <-pctx.Done():
		}
	}
	close(keys)
	wg.Wait()
	total -= sent.Load()
	release() // reporting needs no slot: let the next fill start pushing
	if failed.Load() || ctx.Err() != nil {
		if ctx.Err() == nil {
			h.retryLater(id, job)
		}
		return
	}
	// Report the fill; the leader marks the copy ready in the next map.
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	_, err := h.s.cfg.Etcd.Put(pctx, FilledPrefix+ref.pool+"/"+placement.FillKey(ref.pg, target.DeviceID), strconv.FormatUint(target.Since, 10))
	cancel()
	if err != nil {
		if ctx.Err() == nil {
			log.Warn("fill: report", "err", err)
			h.retryLater(id, job)
		}
		return
	}
	job.done.Store(true)
	if target.State == model.CopyResync {
		h.mu.Lock()
		delete(h.trackers[ref], target.DeviceID)
		h.mu.Unlock()
	}
	log.Info("copy filled", "chunks", len(todo), "dropped", len(drop), "bytes", sent.Load(), "delta", delta, "seconds", time.Since(start).Seconds(),
		"stale_retries_sds", h.staleRetries.Load()-stale0)
}

// retryLater forgets a failed fill so the next observation restarts it.
func (h *healer) retryLater(id string, job *fillJob) {
	time.Sleep(500 * time.Millisecond)
	h.mu.Lock()
	if j, ok := h.running[id]; ok && j == job {
		j.cancel()
		delete(h.running, id)
	}
	h.mu.Unlock()
	select {
	case h.s.kick <- struct{}{}:
	default:
	}
}

func (h *healer) peer(target model.CopyRef) (*wire.Client, error) {
	addr, live := h.s.cat.SDSAddress(target.SDSID)
	if !live {
		return nil, fmt.Errorf("SDS %s of the copy is not live", target.SDSID)
	}
	return h.s.cl.Peer(addr), nil
}

func (h *healer) remoteChunks(ctx context.Context, ref pgRef, target model.CopyRef) ([]chunkKey, error) {
	p, err := h.peer(target)
	if err != nil {
		return nil, err
	}
	// Fills finishing elsewhere bump the epoch all through a rebuild: a
	// list answered "stale" is asked again at the newer epoch rather than
	// failing the fill (which would restart it only after retryLater).
	req := &wire.Request{Op: wire.OpChunkList, Epoch: h.s.cat.Epoch(), Offset: uint64(ref.pg), Payload: []byte(ref.pool)}
	resp, err := wire.RetryStale(ctx, p, h.s.cat, req, maxStaleRetries, peerTimeout, nil)
	if err != nil {
		return nil, err
	}
	var out []chunkKey
	for b := resp.Payload; len(b) >= 16; b = b[16:] {
		out = append(out, chunkKey{binary.BigEndian.Uint64(b), binary.BigEndian.Uint64(b[8:])})
	}
	return out, nil
}

// push sends one whole chunk (or its absence) to the target copy, once the
// pacing admits it.
func (h *healer) push(ctx context.Context, job *fillJob, pool string, k chunkKey, target model.CopyRef) (int64, error) {
	p, err := h.peer(target)
	if err != nil {
		return 0, err
	}
	var size int64
	if _, ok := h.s.idx.lookup(k); ok {
		size = model.ChunkSize // an absent chunk costs no bandwidth
	}
	job.pacing.Add(1)
	leave, err := h.pace.admit(ctx, pool, size)
	job.pacing.Add(-1)
	if err != nil {
		return 0, err
	}
	defer leave()
	job.progress.Store(time.Now().UnixNano())
	unlock := h.s.locks.lock(k, 0, model.ChunkSize)
	defer unlock()
	sender, _ := strconv.ParseUint(h.s.id, 16, 64)
	// Aux names the sender: the target accepts a chunk only from the
	// group's primary at the request's epoch, so a fill that lost its
	// primacy cannot overwrite newer data.
	req := &wire.Request{Op: wire.OpChunkPut, Epoch: h.s.cat.Epoch(), Volume: k.vol, Offset: k.chunk * model.ChunkSize, Length: model.ChunkSize, Aux: sender}
	var n int64
	if loc, ok := h.s.idx.lookup(k); ok {
		buf := bufpool.Get(model.ChunkSize)
		defer bufpool.Put(buf)
		if err := loc.dev.readAt(buf, loc.dev.slotOffset(loc.slot)); err != nil {
			h.s.deviceFailed(loc.dev, err)
			return 0, err
		}
		req.Payload, n = buf, model.ChunkSize
	} else {
		req.Flags = wire.FlagZero
	}
	// Every finished fill bumps the epoch: a push answered "stale" is sent
	// again at the newer epoch (the target still checks it holds an active
	// copy then) instead of restarting the whole fill.
	_, err = wire.RetryStale(ctx, p, h.s.cat, req, maxStaleRetries, peerTimeout, func() { h.staleRetries.Add(1) })
	return n, err
}

// chunkList answers OpChunkList: this SDS's chunks of one group.
func (s *Server) chunkList(req *wire.Request) (wire.Response, func()) {
	m, ok := s.cat.Map(string(req.Payload))
	if !ok || int(req.Offset) >= m.PGCount {
		return errResp(wire.StatusNotFound, errors.New("no such pool or group"))
	}
	keys := s.heal.chunksOf(pgRef{m.PoolID, int(req.Offset)}, m.PGCount)
	b := make([]byte, 0, 16*len(keys))
	for _, k := range keys {
		b = binary.BigEndian.AppendUint64(b, k.vol)
		b = binary.BigEndian.AppendUint64(b, k.chunk)
	}
	return wire.Response{Payload: b}, nil
}

// chunkPut answers OpChunkPut: install a whole chunk of a copy being filled.
func (c *chunkRequest) chunkPut(ctx context.Context) (wire.Response, func()) {
	if answer, ok := c.resolve(ctx); !ok {
		return answer, nil
	}
	if c.in != 0 || c.n != model.ChunkSize {
		return errResp(wire.StatusInvalid, errors.New("chunk put must cover one whole chunk"))
	}
	if fmt.Sprintf("%016x", c.req.Aux) != c.route.Copies[0].SDSID {
		return wire.Response{Status: wire.StatusNotPrimary, Epoch: c.route.Epoch}, nil
	}
	unlock := c.s.locks.lock(c.key, 0, model.ChunkSize)
	defer unlock()
	if c.req.Flags&wire.FlagZero != 0 {
		if err := c.zeroLocal(true); err != nil {
			return c.s.localError(c.dev, err)
		}
		return ok()
	}
	if len(c.req.Payload) != model.ChunkSize {
		return errResp(wire.StatusInvalid, errors.New("chunk put: payload must be one chunk"))
	}
	if err := c.writeLocal(c.req.Payload); err != nil {
		return c.s.localError(c.dev, err)
	}
	return ok()
}
