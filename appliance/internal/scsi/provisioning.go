package scsi

import (
	"cmp"
	"context"
	"slices"

	"github.com/cairn-storage/cairn/appliance/internal/blockdev"
)

// unmap serves UNMAP (SBC-3 5.28). The parameter list is
//
//	bytes 0-1  UNMAP DATA LENGTH (n-1)
//	bytes 2-3  UNMAP BLOCK DESCRIPTOR DATA LENGTH
//	bytes 4-7  reserved
//	8..        16-byte descriptors: LBA (8), NUMBER OF LOGICAL BLOCKS (4), reserved (4)
//
// Every descriptor is validated before any range is deallocated, so a bad
// list changes nothing. The descriptors are then sorted and overlapping or
// touching ranges merged, so a list of many small neighbouring ranges costs
// one volume call per merged range, not one per descriptor: deallocation is
// the same whatever the order (libiscsi's Unmap.Simple sends 1 to 256
// one-block descriptors, 32,896 in all; one at a time, each a data-path round
// trip, that took 50 s through the TCG guest).
func (l *LUN) unmap(ctx context.Context, r *request) (int, *checkCondition) {
	paramLen := int(be16(r.cdb[7:]))
	if paramLen == 0 {
		return 0, nil
	}
	if cc := l.checkWritable(); cc != nil {
		return 0, cc
	}
	p := r.dataOut[:min(paramLen, len(r.dataOut))]
	if len(p) < 8 {
		return 0, paramListLengthError()
	}
	descLen := int(be16(p[2:]))
	if descLen > len(p)-8 {
		return 0, paramListLengthError()
	}
	count := descLen / 16
	if count > maxUnmapDescriptors {
		return 0, invalidParam(2, -1)
	}
	type extent struct{ lba, n uint64 }
	exts := make([]extent, 0, count)
	var total uint64
	for i := range count {
		d := p[8+16*i:]
		lba, n := be64(d), uint64(be32(d[8:]))
		if cc := l.checkRange(lba, n); cc != nil {
			return 0, cc
		}
		total += n
		if n > maxUnmapBlocks || total > maxUnmapBlocks {
			return 0, invalidParam(8+16*i+8, -1)
		}
		if n > 0 {
			exts = append(exts, extent{lba, n})
		}
	}
	slices.SortFunc(exts, func(a, b extent) int { return cmp.Compare(a.lba, b.lba) })
	merged := exts[:0]
	for _, e := range exts {
		if k := len(merged) - 1; k >= 0 && e.lba <= merged[k].lba+merged[k].n {
			merged[k].n = max(merged[k].n, e.lba+e.n-merged[k].lba)
			continue
		}
		merged = append(merged, e)
	}
	for _, e := range merged {
		if err := l.vol.Unmap(ctx, int64(e.lba*BlockSize), int64(e.n*BlockSize)); err != nil {
			return 0, l.volumeError(ctx, "unmap", ioWrite, err)
		}
	}
	return 0, nil
}

// Provisioning status of an LBA status descriptor.
const (
	lbaMapped      = 0
	lbaDeallocated = 1
)

// getLBAStatus serves GET LBA STATUS (SBC-3 5.6). The answer covers at
// most getLBAStatusWindow blocks from the starting LBA and as many
// descriptors as the allocation length holds; the first descriptor always
// starts at the starting LBA. Parameter data:
//
//	bytes 0-3  PARAMETER DATA LENGTH (n-3)
//	bytes 4-7  reserved
//	8..        16-byte descriptors: LBA (8), NUMBER OF LOGICAL BLOCKS (4),
//	           PROVISIONING STATUS (byte 12, bits 3-0), reserved
func (l *LUN) getLBAStatus(ctx context.Context, r *request) (int, *checkCondition) {
	start := be64(r.cdb[2:])
	alloc := be32(r.cdb[10:])
	nb := l.numBlocks()
	if start >= nb {
		return 0, lbaOutOfRange()
	}
	if alloc == 0 {
		return 0, nil
	}
	room := min(uint64(alloc), uint64(len(r.dataIn)))
	maxDesc := 1
	if room >= 24 {
		maxDesc = int(min((room-8)/16, 1024))
	}
	end := min(nb, start+getLBAStatusWindow)
	// The window is asked for in growing batches (the start's chunk, then
	// 1, 2, 4, ... more chunks: each batch doubles what is known), each a
	// volume call of one data-path request per chunk, until the descriptors
	// the allocation length holds are complete: an initiator that asks for
	// one descriptor of a block whose chunk is followed by one of the other
	// status (libiscsi, qemu's block status) costs two requests, not the
	// window's 64.
	var exts []blockdev.Extent
	for at, chunks := start, uint64(0); at < end; {
		upto := min(end, (at/chunkBlocks+max(1, chunks))*chunkBlocks)
		chunks += (upto - at + chunkBlocks - 1) / chunkBlocks
		got, err := l.vol.Extents(ctx, int64(at*BlockSize), int64((upto-at)*BlockSize))
		if err != nil {
			return 0, l.volumeError(ctx, "get lba status", ioRead, err)
		}
		exts = append(exts, got...)
		at = upto
		if len(lbaRuns(exts, start, end, maxDesc+1)) > maxDesc {
			break // the last descriptor that fits has ended
		}
	}
	ds := lbaRuns(exts, start, end, maxDesc)
	if len(ds) == 0 || ds[0].lba != start {
		// The volume answered nothing usable for the start: report the
		// block as mapped rather than inventing deallocation.
		l.log.WarnContext(ctx, "scsi: volume extents do not cover the requested range", "lba", start)
		ds = append([]lbaRun{{start, 1, lbaMapped}}, ds...)[:1]
	}
	out := make([]byte, 8+16*len(ds))
	put32(out[0:], uint32(len(out)-4))
	for i, d := range ds {
		b := out[8+16*i:]
		put64(b[0:], d.lba)
		put32(b[8:], uint32(d.n))
		b[12] = d.status
	}
	return r.reply(out, alloc), nil
}

// lbaRun is one LBA status descriptor.
type lbaRun struct {
	lba, n uint64
	status byte
}

// lbaRuns turns the volume's extents into at most maxDesc descriptors
// within [start, end): neighbours of one status merged (up to the 32-bit
// block count of a descriptor), the first clipped to start.
func lbaRuns(exts []blockdev.Extent, start, end uint64, maxDesc int) []lbaRun {
	var ds []lbaRun
	for _, e := range exts {
		lba := uint64(e.Offset) / BlockSize
		n := uint64(e.Length) / BlockSize
		if n == 0 || lba+n <= start || lba >= end {
			continue
		}
		if lba < start { // keep the first descriptor at the starting LBA
			n -= start - lba
			lba = start
		}
		n = min(n, end-lba)
		st := byte(lbaDeallocated)
		if e.Mapped {
			st = lbaMapped
		}
		if k := len(ds); k > 0 && ds[k-1].status == st && ds[k-1].lba+ds[k-1].n == lba && ds[k-1].n+n <= 0xFFFFFFFF {
			ds[k-1].n += n
			continue
		}
		if len(ds) == maxDesc {
			break
		}
		ds = append(ds, lbaRun{lba, n, st})
	}
	return ds
}
