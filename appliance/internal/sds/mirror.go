package sds

// mirror.go: mirroring: a change applied at the primary reaches every
// active copy of the current map before it is acknowledged.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cairn-storage/cairn/appliance/internal/model"
	"github.com/cairn-storage/cairn/appliance/internal/placement"
	"github.com/cairn-storage/cairn/appliance/internal/wire"
)

// mutate applies a change locally and, at the primary, on the secondary in
// parallel, holding the range so overlapping changes apply in one order on
// both copies.
func (c *chunkRequest) mutate(ctx context.Context, fwd *wire.Request, local func() error) (wire.Response, func()) {
	unlock := c.lockRange()
	defer unlock()
	return c.mutateLocked(ctx, fwd, local)
}

func (c *chunkRequest) mutateLocked(ctx context.Context, fwd *wire.Request, local func() error) (wire.Response, func()) {
	var targets, away []model.CopyRef
	if c.primary {
		// Re-read the route now that the range is held: the copies to
		// reach are those of the current map, not of the map the request
		// was routed with. A fill takes the same locks, so every write
		// either completes before a chunk is sent to a new copy, or sees
		// the new copy in the map and reaches it itself.
		fresh, ok := c.s.cat.ChunkRoute(c.key.vol, c.key.chunk, placement.PG)
		if !ok || len(fresh.Copies) == 0 || fresh.Copies[0].SDSID != c.s.id || fresh.Copies[0].State != model.CopyReady {
			return wire.Response{Status: wire.StatusStaleEpoch, Epoch: max(fresh.Epoch, c.req.Epoch+1)}, nil
		}
		c.route = fresh
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
			m, _ := c.s.cat.Map(c.s.volumePool(c.req.Volume))
			if m != nil {
				c.s.heal.track(pgRef{m.PoolID, placement.PG(c.key.vol, c.key.chunk, m.PGCount)}, away, c.key)
			}
		}
	}
	remote := make(chan error, len(targets))
	for _, t := range targets {
		go func() { remote <- c.forward(ctx, fwd, t) }()
	}
	lerr := local()
	if lerr == nil && c.req.Flags&wire.FlagFUA != 0 {
		lerr = c.s.flushDevice(c.dev)
	}
	var rerr error
	for range targets {
		if err := <-remote; err != nil && rerr == nil {
			rerr = err
		}
	}
	switch {
	case lerr != nil:
		return c.s.localError(c.dev, lerr)
	case rerr != nil:
		// Not "stale epoch" even if a copy said so: the local write has
		// happened, so the outcome is not definite (the client treats
		// Unavailable as possibly applied); it retries with a fresh map.
		var se *wire.StatusError
		if errors.As(rerr, &se) && se.Status == wire.StatusStaleEpoch {
			go func() {
				wctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
				defer cancel()
				_ = c.s.cat.WaitEpoch(wctx, se.Epoch)
			}()
		}
		return errResp(wire.StatusUnavailable, fmt.Errorf("mirror copy: %w", rerr))
	}
	return ok()
}

func (c *chunkRequest) forward(ctx context.Context, fwd *wire.Request, to model.CopyRef) error {
	addr, live := c.s.cat.SDSAddress(to.SDSID)
	if !live {
		return fmt.Errorf("SDS %s of a copy is not live", to.SDSID)
	}
	r := *fwd
	r.Flags |= wire.FlagReplica
	r.Epoch = max(c.req.Epoch, c.route.Epoch)
	fctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err := c.s.cl.Peer(addr).Do(fctx, &r, nil)
	return err
}

func (s *Server) volumePool(vol uint64) string {
	v, _ := s.cat.Volume(vol)
	return v.PoolID
}
