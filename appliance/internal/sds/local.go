package sds

// local.go: I/O on this SDS's own copy of a chunk, and how its errors are
// attributed to the device and answered.

import (
	"errors"
	"fmt"

	"github.com/cairn-storage/cairn/appliance/internal/model"
	"github.com/cairn-storage/cairn/appliance/internal/wire"
)

var errNoSpace = errors.New("no free chunk slot on the device")

// localError turns a local device error into a retryable answer: the
// client retries once the map no longer routes to the failed device.
// (The device that failed was already taken out where the error arose.)
func (s *Server) localError(d *device, err error) (wire.Response, func()) {
	if errors.Is(err, errNoSpace) {
		return errResp(wire.StatusNoSpace, fmt.Errorf("device %s: %w", d.path, err))
	}
	return errResp(wire.StatusUnavailable, fmt.Errorf("local copy: %w", err))
}

// devErr attributes an I/O error to the device that returned it and takes
// that device out of service.
func (s *Server) devErr(d *device, err error) error {
	if err == nil || errors.Is(err, errNoSpace) {
		return err
	}
	s.deviceFailed(d, err)
	return fmt.Errorf("device %s: %w", d.path, err)
}

// readLocal reads the request's range of the local copy. With nowait it
// fails with errWouldBlock rather than wait for the device (see
// readCachedAt).
func (c *chunkRequest) readLocal(buf []byte, nowait bool) error {
	loc, ok := c.s.idx.lookup(c.key)
	if !ok {
		clear(buf) // never written or unmapped: zeros
		return nil
	}
	if loc.dev.failed.Load() {
		return fmt.Errorf("device %s is out of service", loc.dev.path)
	}
	err := loc.dev.readCachedAt(buf, loc.dev.slotOffset(loc.slot)+c.in, nowait)
	if errors.Is(err, errWouldBlock) {
		return err
	}
	return c.s.devErr(loc.dev, err)
}

func (c *chunkRequest) writeLocal(p []byte) error {
	loc, ok := c.s.idx.lookup(c.key)
	if ok && loc.dev.failed.Load() && loc.dev != c.dev {
		// A stale copy on a failed device (this SDS now holds the group's
		// copy on another device): start afresh there.
		if err := c.s.idx.forget(c.key); err != nil {
			return err
		}
		ok = false
	}
	if !ok {
		var err error
		if loc, err = c.s.idx.allocate(c.key, c.dev); err != nil {
			return err
		}
	}
	if loc.dev.failed.Load() {
		return fmt.Errorf("device %s is out of service", loc.dev.path)
	}
	return c.s.devErr(loc.dev, loc.dev.writeAt(p, loc.dev.slotOffset(loc.slot)+c.in))
}

func (c *chunkRequest) zeroLocal(dealloc bool) error {
	loc, ok := c.s.idx.lookup(c.key)
	if !ok {
		return nil // already reads as zeros
	}
	if loc.dev.failed.Load() && loc.dev != c.dev {
		return c.s.idx.forget(c.key)
	}
	base := loc.dev.slotOffset(loc.slot)
	if dealloc && c.in == 0 && c.n == model.ChunkSize {
		if err := loc.dev.zero(base, model.ChunkSize); err != nil {
			return c.s.devErr(loc.dev, err)
		}
		return c.s.idx.free(c.key)
	}
	return c.s.devErr(loc.dev, loc.dev.zero(base+c.in, c.n))
}
