package sds

// gc.go: chunk collection: freeing the chunks of deleted volumes and of
// groups this SDS no longer holds a copy of.

import (
	"github.com/cairn-storage/cairn/appliance/internal/model"
	"github.com/cairn-storage/cairn/appliance/internal/placement"
)

// collectDeletedVolumes frees the chunks of volumes that no longer exist.
// A chunk of a volume this SDS has never seen cannot exist: every data
// request is checked against the catalog first.
func (s *Server) collectDeletedVolumes() {
	if s.cat.Epoch() == 0 {
		return // no map yet: the snapshot may be empty
	}
	// Data is only freed when its volume was absent at two passes in a
	// row, so a momentarily incomplete snapshot can never destroy data.
	missing := map[uint64]bool{}
	freed := 0
	for _, k := range s.idx.chunks() {
		if _, ok := s.cat.Volume(k.vol); ok {
			continue
		}
		missing[k.vol] = true
		if !s.gcSeen[k.vol] {
			continue
		}
		if s.freeChunk(k, func() bool { _, ok := s.cat.Volume(k.vol); return !ok }) {
			freed++
		}
	}
	s.gcSeen = missing
	if freed > 0 {
		s.log.Info("freed chunks of deleted volumes", "chunks", freed)
	}
}

// collectForeignChunks frees chunks of groups this SDS no longer holds a
// copy of (after a failure it was replaced; after a move it was trimmed).
// Like volume collection, a chunk must be foreign at two passes in a row.
func (h *healer) collectForeignChunks() {
	if h.s.cat.Epoch() == 0 {
		return
	}
	me := h.s.id
	seen := map[chunkKey]bool{}
	freed := 0
	for _, k := range h.s.idx.chunks() {
		v, ok := h.s.cat.Volume(k.vol)
		if !ok {
			continue // volume collection handles it
		}
		m, ok := h.s.cat.Map(v.PoolID)
		if !ok || m.PGCount == 0 {
			continue
		}
		held := false
		for _, c := range m.PGs[placement.PG(k.vol, k.chunk, m.PGCount)] {
			if c.SDSID == me {
				held = true
			}
		}
		if held {
			continue
		}
		seen[k] = true
		if !h.gcSeen[k] {
			continue
		}
		if h.s.freeChunk(k, nil) {
			freed++
		}
	}
	h.mu.Lock()
	h.gcSeen = seen
	h.mu.Unlock()
	if freed > 0 {
		h.s.log.Info("freed chunks of groups no longer held here", "chunks", freed)
	}
}

// freeChunk zeroes and frees chunk k under its whole-chunk lock, so that no
// request is using it, if gone (when not nil) still holds once the lock is
// held. It reports whether the chunk was freed; a chunk that cannot be
// zeroed stays allocated (a later pass tries again).
func (s *Server) freeChunk(k chunkKey, gone func() bool) bool {
	unlock := s.locks.lock(k, 0, model.ChunkSize)
	defer unlock()
	if gone != nil && !gone() {
		return false
	}
	loc, ok := s.idx.lookup(k)
	if !ok {
		return false
	}
	if err := loc.dev.zero(loc.dev.slotOffset(loc.slot), model.ChunkSize); err != nil {
		return false
	}
	return s.idx.free(k) == nil
}
