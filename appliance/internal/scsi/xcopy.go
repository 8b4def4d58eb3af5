package scsi

import (
	"context"
	"errors"

	"github.com/cairn-storage/cairn/appliance/internal/blockdev"
)

// Copy manager limits (RECEIVE COPY RESULTS operating parameters and VPD
// page 8Fh).
const (
	// maxCSCDDescriptors: a source and a destination, as ESXi sends.
	maxCSCDDescriptors = 2
	// maxSegmentDescriptors bounds the work of one EXTENDED COPY: 8
	// segments of at most 65535 blocks (32 MiB) each.
	maxSegmentDescriptors   = 8
	maxDescriptorListLength = 1024
	maxSegmentBytes         = 0xFFFF * BlockSize
	// maxConcurrentCopies is what the LUN reports; copies are not limited
	// here beyond the transport's queue.
	maxConcurrentCopies = 64
	// maxHeldCopyResults bounds the copy status kept for RECEIVE COPY
	// RESULTS; the oldest is discarded first.
	maxHeldCopyResults = 64
)

// Descriptor type codes (SPC-4 6.4.5, 6.4.6).
const (
	segBlockToBlock    = 0x02
	cscdIdentification = 0xE4
	segBlockToBlockLen = 0x18 // DESCRIPTOR LENGTH of a 02h segment descriptor
	cscdLen            = 32
	segLen             = 4 + segBlockToBlockLen
)

// copyStatus is the held data of one EXTENDED COPY with a list identifier.
type copyStatus struct {
	listID   byte
	failed   bool // COPY MANAGER STATUS 01h instead of 00h
	segments uint16
	bytes    uint64
}

// copyResults keeps the most recent copy statuses, oldest first.
//
// List identifiers are defined per I_T nexus, but the transport does not
// tell the LUN which nexus sent a command: held data is kept per LUN and
// a new command with the same list identifier replaces it. No command is
// refused as "operation in progress" for a clashing identifier, since two
// initiators may legitimately use the same one.
type copyResults struct {
	held []copyStatus
}

func (c *copyResults) forget(id byte) {
	for i, s := range c.held {
		if s.listID == id {
			c.held = append(c.held[:i], c.held[i+1:]...)
			return
		}
	}
}

func (c *copyResults) put(s copyStatus) {
	c.forget(s.listID)
	if len(c.held) == maxHeldCopyResults {
		c.held = c.held[1:]
	}
	c.held = append(c.held, s)
}

func (c *copyResults) get(id byte) (copyStatus, bool) {
	for _, s := range c.held {
		if s.listID == id {
			return s, true
		}
	}
	return copyStatus{}, false
}

// cscd is a parsed identification-descriptor CSCD: the NAA designator of a
// logical unit, if the descriptor carries one we can resolve.
type cscd struct {
	wwn    [16]byte
	usable bool
}

type segment struct {
	src, dst       int
	n              uint64
	srcLBA, dstLBA uint64
}

// extendedCopy serves EXTENDED COPY(LID1) (SPC-4 6.4) with identification
// CSCD descriptors (E4h) naming Cairn volumes by NAA WWN and block-to-block
// segments (02h). The whole parameter list is validated, and every named
// volume resolved, before any data moves; the copy itself runs on the data
// servers (Volume.CopyFrom). Parameter list header:
//
//	byte 0     LIST IDENTIFIER
//	byte 1     STR (5), LIST ID USAGE (4-3), PRIORITY (2-0)
//	bytes 2-3  CSCD DESCRIPTOR LIST LENGTH
//	bytes 8-11 SEGMENT DESCRIPTOR LIST LENGTH
//	bytes 12-15 INLINE DATA LENGTH
func (l *LUN) extendedCopy(ctx context.Context, r *request) (int, *checkCondition) {
	paramLen := be32(r.cdb[10:])
	if paramLen == 0 {
		return 0, nil
	}
	p := r.dataOut[:min(uint64(paramLen), uint64(len(r.dataOut)))]
	if len(p) < 16 {
		return 0, paramListLengthError()
	}
	listID := p[0]
	usage := (p[1] >> 3) & 0x03
	switch {
	case usage == 1:
		return 0, invalidParam(1, 4)
	case usage == 3 && listID != 0:
		return 0, invalidParam(0, -1)
	}
	hold := usage == 0
	if usage != 3 {
		// A new command with this identifier supersedes held data of an
		// earlier one; if this one fails validation nothing is held.
		l.mu.Lock()
		l.copies.forget(listID)
		l.mu.Unlock()
	}
	tgtLen := uint64(be16(p[2:]))
	segListLen := uint64(be32(p[8:]))
	inlineLen := uint64(be32(p[12:]))
	if tgtLen+segListLen > maxDescriptorListLength {
		return 0, paramListLengthError()
	}
	if 16+tgtLen+segListLen+inlineLen > uint64(len(p)) {
		return 0, paramListLengthError()
	}
	if inlineLen != 0 {
		return 0, invalidParam(12, -1)
	}

	var targets []cscd
	for off, end := 16, 16+int(tgtLen); off < end; off += cscdLen {
		d := p[off:end]
		if d[0] != cscdIdentification {
			return 0, newCC(keyIllegalRequest, ascUnsupportedTargetDescriptor).fieldPointer(false, off, -1)
		}
		if len(targets) == maxCSCDDescriptors {
			return 0, newCC(keyIllegalRequest, ascTooManyTargetDescriptors)
		}
		if len(d) < cscdLen {
			return 0, paramListLengthError()
		}
		// Byte 1 (LU ID TYPE, NUL, PERIPHERAL DEVICE TYPE) and bytes
		// 28-31 (DISK BLOCK LENGTH) are not checked: the NAA designator
		// names a Cairn volume, a block device with 512-byte blocks, and
		// block counts are in those blocks whatever the descriptor says.
		// LIO (target_core_xcopy.c) and tcmu-runner check neither; a
		// refusal here would turn ESXi's Clone offload off for the device
		// (docs/vsphere.md, EXTENDED COPY).
		var t cscd
		// Designation descriptor at bytes 4-23: code set binary,
		// association logical unit, NAA, 16 bytes.
		codeSet, assoc, typ, dlen := d[4]&0x0F, (d[5]>>4)&0x03, d[5]&0x0F, d[7]
		if codeSet == 1 && assoc == 0 && typ == 3 && dlen == 16 {
			copy(t.wwn[:], d[8:24])
			t.usable = true
		}
		targets = append(targets, t)
	}

	var segs []segment
	for off, end := 16+int(tgtLen), 16+int(tgtLen+segListLen); off < end; off += segLen {
		d := p[off:end]
		if d[0] != segBlockToBlock {
			return 0, newCC(keyIllegalRequest, ascUnsupportedSegmentDescType).fieldPointer(false, off, -1)
		}
		if len(segs) == maxSegmentDescriptors {
			return 0, newCC(keyIllegalRequest, ascTooManySegmentDescriptors)
		}
		if len(d) < 4 {
			return 0, paramListLengthError()
		}
		if be16(d[2:]) != segBlockToBlockLen {
			return 0, invalidParam(off+2, -1)
		}
		if len(d) < segLen {
			return 0, paramListLengthError()
		}
		// DC (byte 1 bit 1) says whose blocks the count is in; source and
		// destination blocks are both 512 bytes, so it changes nothing.
		segs = append(segs, segment{
			src: int(be16(d[4:])), dst: int(be16(d[6:])),
			n:      uint64(be16(d[10:])),
			srcLBA: be64(d[12:]), dstLBA: be64(d[20:]),
		})
	}

	// Resolve and range-check everything before moving any data.
	type resolved struct{ src, dst blockdev.Volume }
	plan := make([]resolved, len(segs))
	for i, s := range segs {
		src, cc := l.copyTarget(targets, s.src, i, 4)
		if cc != nil {
			return 0, cc
		}
		dst, cc := l.copyTarget(targets, s.dst, i, 6)
		if cc != nil {
			return 0, cc
		}
		if !inRange(src, s.srcLBA, s.n) {
			return 0, copyAborted(ascNoAdditionalSense, i, 12)
		}
		if !inRange(dst, s.dstLBA, s.n) {
			return 0, copyAborted(ascNoAdditionalSense, i, 20)
		}
		if dst == l.vol {
			if cc := l.checkWritable(); cc != nil {
				return 0, cc
			}
		}
		plan[i] = resolved{src, dst}
	}

	var copied uint64
	for i, s := range segs {
		if s.n == 0 {
			continue
		}
		length := s.n * BlockSize
		err := plan[i].dst.CopyFrom(ctx, plan[i].src, int64(s.srcLBA*BlockSize), int64(s.dstLBA*BlockSize), int64(length))
		if err != nil {
			if hold {
				l.holdCopyStatus(copyStatus{listID: listID, failed: true, segments: uint16(i), bytes: copied})
			}
			return 0, l.copyError(ctx, err, i)
		}
		copied += length
	}
	if hold {
		l.holdCopyStatus(copyStatus{listID: listID, segments: uint16(len(segs)), bytes: copied})
	}
	return 0, nil
}

func (l *LUN) holdCopyStatus(s copyStatus) {
	l.mu.Lock()
	l.copies.put(s)
	l.mu.Unlock()
}

// copyTarget resolves CSCD descriptor idx, named by segment seg at byte
// field of the segment descriptor.
func (l *LUN) copyTarget(targets []cscd, idx, seg, field int) (blockdev.Volume, *checkCondition) {
	if idx >= len(targets) {
		return nil, copyAborted(ascUnreachableCopyTarget, seg, field)
	}
	t := targets[idx]
	if t.usable {
		if t.wwn == l.vol.WWN() {
			return l.vol, nil
		}
		if l.opts.Resolve != nil {
			if v, ok := l.opts.Resolve(t.wwn); ok && v != nil {
				return v, nil
			}
		}
	}
	return nil, copyAborted(ascCopyTargetNotReachable, seg, field)
}

func inRange(v blockdev.Volume, lba, n uint64) bool {
	nb := uint64(0)
	if s := v.Size(); s > 0 {
		nb = uint64(s) / BlockSize
	}
	return lba <= nb && n <= nb-lba
}

// copyError maps a failed server-side copy: retryable conditions keep
// their meaning, anything else aborts the copy (ESXi then copies through
// the host).
func (l *LUN) copyError(ctx context.Context, err error, seg int) *checkCondition {
	switch {
	case errors.Is(err, blockdev.ErrUnavailable), errors.Is(err, blockdev.ErrReadOnly),
		errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return l.volumeError(ctx, "extended copy", ioWrite, err)
	}
	l.log.WarnContext(ctx, "scsi: EXTENDED COPY failed; the initiator will copy through the host", "segment", seg, "err", err)
	return copyAborted(ascThirdPartyDeviceFailure, seg, 0)
}

// receiveCopyResults serves RECEIVE COPY RESULTS (SPC-4 6.18) service
// actions COPY STATUS and OPERATING PARAMETERS.
func (l *LUN) receiveCopyResults(_ context.Context, r *request) (int, *checkCondition) {
	sa := r.cdb[1] & 0x1F
	listID := r.cdb[2]
	alloc := be32(r.cdb[10:])
	if sa == saOperatingParams {
		b := make([]byte, 46)
		put32(b[0:], uint32(len(b)-4)) // AVAILABLE DATA
		b[4] = 0x01                    // SNLID: LIST ID USAGE 11b is supported
		put16(b[8:], maxCSCDDescriptors)
		put16(b[10:], maxSegmentDescriptors)
		put32(b[12:], maxDescriptorListLength)
		put32(b[16:], maxSegmentBytes)
		// MAXIMUM INLINE DATA LENGTH, HELD DATA LIMIT and MAXIMUM STREAM
		// DEVICE TRANSFER SIZE are 0: no inline data, no held data for
		// RECEIVE DATA, no stream devices.
		put16(b[34:], maxConcurrentCopies)
		b[36] = maxConcurrentCopies
		b[37] = 9 // DATA SEGMENT GRANULARITY: one block
		b[43] = 2 // IMPLEMENTED DESCRIPTOR LIST LENGTH
		b[44], b[45] = segBlockToBlock, cscdIdentification
		return r.reply(b, alloc), nil
	}
	l.mu.Lock()
	s, ok := l.copies.get(listID)
	l.mu.Unlock()
	if !ok {
		return 0, invalidCDB(2, -1)
	}
	// COPY STATUS: AVAILABLE DATA, HDD | COPY MANAGER STATUS, SEGMENTS
	// PROCESSED, TRANSFER COUNT UNITS, TRANSFER COUNT.
	b := make([]byte, 12)
	put32(b[0:], 8)
	if s.failed {
		b[4] = 0x01
	}
	put16(b[5:], s.segments)
	count, units := s.bytes, byte(0x00) // bytes
	if count > 0xFFFFFFFF {
		count, units = count>>10, 0x01 // kibibytes
	}
	b[7] = units
	put32(b[8:], uint32(count))
	return r.reply(b, alloc), nil
}
