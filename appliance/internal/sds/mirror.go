package sds

// mirror.go: mirroring: a change applied at the primary reaches every
// active copy of the current map before it is acknowledged.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cairn-storage/cairn/appliance/internal/model"
	"github.com/cairn-storage/cairn/appliance/internal/wire"
)

// mutate applies a change locally and, at the primary, on the secondary in
// parallel, holding the range so overlapping changes apply in one order on
// both copies. The route is resolved once the range is held.
func (c *chunkRequest) mutate(ctx context.Context, fwd *wire.Request, local func() error) (wire.Response, func()) {
	unlock := c.lockRange()
	defer unlock()
	if answer, ok := c.resolve(ctx); !ok {
		return answer, nil
	}
	return c.mutateLocked(ctx, fwd, local)
}

// mutateLocked is mutate for a caller that holds the range and has
// resolved the route since it took it.
func (c *chunkRequest) mutateLocked(ctx context.Context, fwd *wire.Request, local func() error) (wire.Response, func()) {
	var targets, away []model.CopyRef
	if c.primary {
		// The route was read with the range held: the copies to reach are
		// those of the current map, not of the map the request was routed
		// with. A fill takes the same locks, so every write either
		// completes before a chunk is sent to a new copy, or sees the new
		// copy in the map and reaches it itself.
		for _, cp := range c.route.Copies[1:] {
			if cp.Active() {
				targets = append(targets, cp)
			} else {
				away = append(away, cp)
			}
		}
		if len(targets) == 0 && !c.s.leaseValid() {
			// Fencing: a write reaching only this copy is acknowledged
			// only under a current lease, so a partitioned SDS never
			// acknowledges what the other side will not see.
			return errResp(wire.StatusUnavailable, errors.New("single copy and no current MDM lease: write not acknowledged"))
		}
		if len(away) > 0 {
			// The route names no pool: read it (maintenance only).
			if v, ok := c.s.cat.Volume(c.key.vol); ok {
				c.s.heal.track(pgRef{v.PoolID, int(c.pg)}, away, c.key)
			}
		}
	}
	// The copies' writes are sent before the local one starts and run
	// beside it; their answers arrive on the peer connections' readers,
	// which hand them straight to this goroutine (no goroutine per copy).
	// remote has room for every answer: a reader never blocks on it, even
	// after this request gave up waiting.
	remote := make(chan error, len(targets))
	for _, t := range targets {
		c.forward(fwd, t, remote)
	}
	lerr := local()
	if lerr == nil && c.req.Flags&wire.FlagFUA != 0 {
		lerr = c.dev.sync() // the index needs none: every commit is synced
	}
	var rerr error
wait:
	for range targets {
		select {
		case err := <-remote:
			if err != nil && rerr == nil {
				rerr = err
			}
		case <-ctx.Done():
			// Shutting down: a copy not heard from is not acknowledged.
			if rerr == nil {
				rerr = ctx.Err()
			}
			break wait
		}
	}
	switch {
	case lerr != nil:
		return c.s.localError(c.dev, lerr)
	case rerr != nil:
		// Not "stale epoch" even if a copy said so: the local write has
		// happened, so the outcome is not definite (the client treats
		// Unavailable as possibly applied); it retries with a fresh map.
		// A copy that answered "stale" knows a newer map: fetch it now,
		// so that the client's retry finds this SDS up to date.
		if wire.IsStatus(rerr, wire.StatusStaleEpoch) {
			go wire.WaitIfStale(context.Background(), c.s.cat, rerr)
		}
		return errResp(wire.StatusUnavailable, fmt.Errorf("mirror copy: %w", rerr))
	}
	return ok()
}

// forward sends the change to one copy without waiting; its outcome
// arrives on done (nil, or why the copy did not apply it), within
// forwardTimeout.
func (c *chunkRequest) forward(fwd *wire.Request, to model.CopyRef, done chan<- error) {
	addr, live := c.s.cat.SDSAddress(to.SDSID)
	if !live {
		done <- fmt.Errorf("SDS %s of a copy is not live", to.SDSID)
		return
	}
	r := *fwd
	r.Flags |= wire.FlagReplica
	r.Epoch = max(c.req.Epoch, c.route.Epoch)
	c.s.cl.Peer(addr).Go(&r, nil, forwardTimeout, false, func(_ *wire.Response, err error) { done <- err })
}

// forwardTimeout bounds a copy's answer to a forwarded change: a copy that
// does not answer in time fails the write (Unavailable), and the client
// retries.
const forwardTimeout = 5 * time.Second
