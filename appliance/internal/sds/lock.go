package sds

import (
	"context"
	"sync"
)

// rangeLocks serialises overlapping operations on a chunk. The primary
// holds a range for the whole of a mutating operation, local write and
// forward to the secondary included, so that overlapping writes reach both
// copies in the same order; non-overlapping operations on the same chunk
// proceed in parallel.
type rangeLocks struct {
	mu     sync.Mutex
	chunks map[chunkKey]*chunkLocks
}

type heldRange struct {
	off, end int64
	done     chan struct{}
}

type chunkLocks struct {
	held []*heldRange
}

func newRangeLocks() *rangeLocks { return &rangeLocks{chunks: map[chunkKey]*chunkLocks{}} }

// lock waits until [off, end) of chunk k overlaps no held range, then holds
// it. The returned function releases it.
func (l *rangeLocks) lock(k chunkKey, off, end int64) func() {
	for {
		l.mu.Lock()
		cl := l.chunks[k]
		if cl == nil {
			cl = &chunkLocks{}
			l.chunks[k] = cl
		}
		var wait chan struct{}
		for _, h := range cl.held {
			if h.off < end && off < h.end {
				wait = h.done
				break
			}
		}
		if wait == nil {
			h := &heldRange{off: off, end: end, done: make(chan struct{})}
			cl.held = append(cl.held, h)
			l.mu.Unlock()
			return func() { l.unlock(k, h) }
		}
		l.mu.Unlock()
		<-wait
	}
}

func (l *rangeLocks) unlock(k chunkKey, h *heldRange) {
	l.mu.Lock()
	cl := l.chunks[k]
	for i, x := range cl.held {
		if x == h {
			cl.held = append(cl.held[:i], cl.held[i+1:]...)
			break
		}
	}
	if len(cl.held) == 0 {
		delete(l.chunks, k)
	}
	l.mu.Unlock()
	close(h.done)
}

// barrier waits until every range held at the time of the call has been
// released. Ranges taken afterwards are not waited for.
func (l *rangeLocks) barrier(ctx context.Context) error {
	l.mu.Lock()
	var waits []chan struct{}
	for _, cl := range l.chunks {
		for _, h := range cl.held {
			waits = append(waits, h.done)
		}
	}
	l.mu.Unlock()
	for _, w := range waits {
		select {
		case <-w:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}
