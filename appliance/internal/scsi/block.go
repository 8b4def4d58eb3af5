package scsi

import (
	"bytes"
	"context"
	"errors"

	"github.com/cairn-storage/cairn/appliance/internal/blockdev"
)

// blockRange is the LBA and block count of a READ/WRITE-family CDB.
type blockRange struct {
	lba, n uint64
	// lenField is the CDB byte where the transfer length starts, for
	// field pointers.
	lenField int
}

// parseBlockRange decodes the LBA and transfer (or verification, write
// same, prefetch, sync) length by CDB size: the operation code group
// fixes the layout (SBC-3 4.2.2).
func parseBlockRange(cdb []byte) blockRange {
	switch cdb[0] >> 5 {
	case 0: // 6-byte: 21-bit LBA, 8-bit length where 0 means 256
		lba := uint64(cdb[1]&0x1F)<<16 | uint64(cdb[2])<<8 | uint64(cdb[3])
		n := uint64(cdb[4])
		if n == 0 {
			n = 256
		}
		return blockRange{lba: lba, n: n, lenField: 4}
	case 1, 2: // 10-byte
		return blockRange{lba: uint64(be32(cdb[2:])), n: uint64(be16(cdb[7:])), lenField: 7}
	case 5: // 12-byte
		return blockRange{lba: uint64(be32(cdb[2:])), n: uint64(be32(cdb[6:])), lenField: 6}
	default: // 16-byte
		return blockRange{lba: be64(cdb[2:]), n: uint64(be32(cdb[10:])), lenField: 10}
	}
}

// fua reports the FUA bit; 6-byte CDBs have none (byte 1 holds LBA bits).
func fua(cdb []byte) blockdev.WriteFlags {
	if cdb[0]>>5 != 0 && cdb[1]&0x08 != 0 {
		return blockdev.FUA
	}
	return 0
}

// transfer checks a data-transferring command's length against MAXIMUM
// TRANSFER LENGTH and its range against the capacity.
func (l *LUN) transfer(b blockRange) *checkCondition {
	if b.n > uint64(l.maxTransfer) {
		return invalidCDB(b.lenField, -1)
	}
	return l.checkRange(b.lba, b.n)
}

// read serves READ(6/10/12/16). If the transport's buffer is shorter than
// the CDB asks (an iSCSI overflow), only what fits is read; the transport
// reports the residual.
func (l *LUN) read(ctx context.Context, r *request) (int, *checkCondition) {
	b := parseBlockRange(r.cdb)
	if cc := l.transfer(b); cc != nil {
		return 0, cc
	}
	avail := min(b.n*BlockSize, uint64(len(r.dataIn)))
	if err := l.readInto(ctx, r.dataIn[:avail], b.lba); err != nil {
		return 0, l.volumeError(ctx, "read", ioRead, err)
	}
	return int(avail), nil
}

// readInto fills p from lba on; p need not be a whole number of blocks.
func (l *LUN) readInto(ctx context.Context, p []byte, lba uint64) error {
	full := len(p) / BlockSize * BlockSize
	off := int64(lba * BlockSize)
	if full > 0 {
		if err := l.vol.ReadAt(ctx, p[:full], off); err != nil {
			return err
		}
	}
	if full < len(p) {
		var blk [BlockSize]byte
		if err := l.vol.ReadAt(ctx, blk[:], off+int64(full)); err != nil {
			return err
		}
		copy(p[full:], blk[:])
	}
	return nil
}

// writeData returns the part of the data-out buffer a write of b covers:
// all of it, or the whole blocks the initiator actually sent when it sent
// fewer than the CDB says (the transport reports the overflow). A partial
// trailing block cannot be written and is refused.
func writeData(r *request, b blockRange) ([]byte, *checkCondition) {
	want := b.n * BlockSize
	if uint64(len(r.dataOut)) >= want {
		return r.dataOut[:want], nil
	}
	if len(r.dataOut)%BlockSize != 0 {
		return nil, newCC(keyIllegalRequest, ascInvalidFieldInIU)
	}
	return r.dataOut, nil
}

// write serves WRITE(6/10/12/16).
func (l *LUN) write(ctx context.Context, r *request) (int, *checkCondition) {
	b := parseBlockRange(r.cdb)
	if cc := l.transfer(b); cc != nil {
		return 0, cc
	}
	if cc := l.checkWritable(); cc != nil {
		return 0, cc
	}
	data, cc := writeData(r, b)
	if cc != nil || len(data) == 0 {
		return 0, cc
	}
	if err := l.vol.WriteAt(ctx, data, int64(b.lba*BlockSize), fua(r.cdb)); err != nil {
		return 0, l.volumeError(ctx, "write", ioWrite, err)
	}
	return 0, nil
}

// writeAndVerify serves WRITE AND VERIFY(10/12/16): the data is written
// durably (FUA) and read back from the volume; BYTCHK=1 and BYTCHK=0 both
// compare, since reading back is how the medium is verified here.
func (l *LUN) writeAndVerify(ctx context.Context, r *request) (int, *checkCondition) {
	if (r.cdb[1]>>1)&0x03 > 1 {
		return 0, invalidCDB(1, 2)
	}
	b := parseBlockRange(r.cdb)
	if cc := l.transfer(b); cc != nil {
		return 0, cc
	}
	if cc := l.checkWritable(); cc != nil {
		return 0, cc
	}
	data, cc := writeData(r, b)
	if cc != nil || len(data) == 0 {
		return 0, cc
	}
	off := int64(b.lba * BlockSize)
	if err := l.vol.WriteAt(ctx, data, off, blockdev.FUA); err != nil {
		return 0, l.volumeError(ctx, "write and verify", ioWrite, err)
	}
	back := make([]byte, len(data))
	if err := l.vol.ReadAt(ctx, back, off); err != nil {
		return 0, l.volumeError(ctx, "write and verify", ioRead, err)
	}
	if i := firstDiff(back, data); i >= 0 {
		l.log.WarnContext(ctx, "scsi: WRITE AND VERIFY read back different data", "lba", b.lba, "offset", i)
		return 0, miscompare(int64(i))
	}
	return 0, nil
}

// verifyChunk bounds the buffer VERIFY reads through: a verification
// length can reach 2^32 blocks, far more than may be allocated at once.
const verifyChunk = chunkBlocks

// verify serves VERIFY(10/12/16). BYTCHK 00b verifies that the range reads
// back; 01b compares it with the data-out buffer; 11b compares every block
// with the single block sent. A difference is MISCOMPARE with the byte
// offset of the first differing byte.
func (l *LUN) verify(ctx context.Context, r *request) (int, *checkCondition) {
	bytchk := (r.cdb[1] >> 1) & 0x03
	if bytchk == 2 {
		return 0, invalidCDB(1, 2)
	}
	b := parseBlockRange(r.cdb)
	if bytchk == 1 && b.n > uint64(l.maxTransfer) {
		return 0, invalidCDB(b.lenField, -1)
	}
	if cc := l.checkRange(b.lba, b.n); cc != nil {
		return 0, cc
	}
	if b.n == 0 {
		return 0, nil
	}
	switch bytchk {
	case 1:
		data := r.dataOut[:min(uint64(len(r.dataOut)), b.n*BlockSize)]
		got := make([]byte, len(data))
		if err := l.readInto(ctx, got, b.lba); err != nil {
			return 0, l.volumeError(ctx, "verify", ioRead, err)
		}
		if i := firstDiff(got, data); i >= 0 {
			l.log.DebugContext(ctx, "scsi: VERIFY miscompare", "lba", b.lba, "offset", i)
			return 0, miscompare(int64(i))
		}
		return 0, nil
	case 3:
		if len(r.dataOut) < BlockSize {
			return 0, newCC(keyIllegalRequest, ascInvalidFieldInIU)
		}
	}
	pattern := r.dataOut
	buf := make([]byte, min(b.n, verifyChunk)*BlockSize)
	for done := uint64(0); done < b.n; {
		k := min(b.n-done, verifyChunk)
		p := buf[:k*BlockSize]
		if err := l.vol.ReadAt(ctx, p, int64((b.lba+done)*BlockSize)); err != nil {
			return 0, l.volumeError(ctx, "verify", ioRead, err)
		}
		if bytchk == 3 {
			for j := 0; j < len(p); j += BlockSize {
				if i := firstDiff(p[j:j+BlockSize], pattern[:BlockSize]); i >= 0 {
					return 0, miscompare(int64(done*BlockSize) + int64(j+i))
				}
			}
		}
		done += k
	}
	return 0, nil
}

// compareAndWrite serves COMPARE AND WRITE (SBC-3 5.2): the data-out
// buffer holds the verify data followed by the write data. The volume
// executes it atomically at the data server, whichever SVM sent it.
func (l *LUN) compareAndWrite(ctx context.Context, r *request) (int, *checkCondition) {
	lba := be64(r.cdb[2:])
	n := uint64(r.cdb[13])
	if n > maxCompareAndWrite {
		return 0, invalidCDB(13, -1)
	}
	if cc := l.checkRange(lba, n); cc != nil {
		return 0, cc
	}
	if cc := l.checkWritable(); cc != nil {
		return 0, cc
	}
	// The data-out buffer must hold exactly 2*n blocks: a compare and
	// write cannot be done in part. A mismatch means the NUMBER OF LOGICAL
	// BLOCKS field disagrees with what the initiator sent.
	if uint64(len(r.dataOut)) != 2*n*BlockSize {
		return 0, invalidCDB(13, -1)
	}
	if n == 0 {
		return 0, nil
	}
	half := n * BlockSize
	err := l.vol.CompareAndWrite(ctx, r.dataOut[:half], r.dataOut[half:], int64(lba*BlockSize), fua(r.cdb))
	var mis *blockdev.MiscompareError
	if errors.As(err, &mis) {
		// A normal answer (VMFS heartbeats miscompare all the time).
		l.log.DebugContext(ctx, "scsi: COMPARE AND WRITE miscompare", "lba", lba, "offset", mis.Offset)
		return 0, miscompare(mis.Offset)
	}
	if err != nil {
		return 0, l.volumeError(ctx, "compare and write", ioWrite, err)
	}
	return 0, nil
}

// writeSame serves WRITE SAME(10/16) (SBC-3 5.42, 5.43). With UNMAP the
// range is deallocated whatever the data block holds: SBC-3 lets the device
// server unmap instead of writing, LBPRZ tells the initiator the blocks now
// read as zeros, and that is what initiators (and libiscsi's
// WriteSame10.UnmapUntilEnd, and LIO) expect. Without UNMAP, zeros become
// WriteZeroes (whole chunks deallocated, which LBPRZ makes invisible) and
// any other pattern is expanded by the data servers. NDOB (16 only) means
// zeros without a data-out buffer. A NUMBER OF LOGICAL BLOCKS of zero means
// "to the last LBA" (WSNZ=0).
func (l *LUN) writeSame(ctx context.Context, r *request) (int, *checkCondition) {
	b := parseBlockRange(r.cdb)
	unmapBit := r.cdb[1]&0x08 != 0
	ndob := r.cdb[0] == opWriteSame16 && r.cdb[1]&0x01 != 0
	if b.n == 0 {
		nb := l.numBlocks()
		if b.lba > nb {
			return 0, lbaOutOfRange()
		}
		b.n = nb - b.lba
	}
	if b.n > maxWriteSame {
		return 0, invalidCDB(b.lenField, -1)
	}
	if cc := l.checkRange(b.lba, b.n); cc != nil {
		return 0, cc
	}
	if cc := l.checkWritable(); cc != nil {
		return 0, cc
	}
	var pattern []byte
	if !ndob {
		// Exactly one logical block of data-out.
		if len(r.dataOut) != BlockSize {
			return 0, newCC(keyIllegalRequest, ascInvalidFieldInIU)
		}
		pattern = r.dataOut
	}
	if b.n == 0 {
		return 0, nil
	}
	off, length := int64(b.lba*BlockSize), int64(b.n*BlockSize)
	var err error
	if unmapBit || pattern == nil || blockdev.AllZero(pattern) {
		err = l.vol.WriteZeroes(ctx, off, length, unmapBit)
	} else {
		err = l.vol.WriteSame(ctx, pattern, off, length)
	}
	if err != nil {
		return 0, l.volumeError(ctx, "write same", ioWrite, err)
	}
	return 0, nil
}

// prefetch serves PRE-FETCH(10/16): there is no cache in the LUN to load,
// so after the range check it completes with GOOD (SBC-3 5.8: GOOD when the
// blocks will not all fit in the cache).
func (l *LUN) prefetch(_ context.Context, r *request) (int, *checkCondition) {
	b := parseBlockRange(r.cdb)
	return 0, l.checkRange(b.lba, b.n)
}

// synchronizeCache serves SYNCHRONIZE CACHE(10/16): the whole volume is
// flushed on every copy, whatever range is named. IMMED is honoured by
// completing after the flush, which SBC allows.
func (l *LUN) synchronizeCache(ctx context.Context, r *request) (int, *checkCondition) {
	b := parseBlockRange(r.cdb)
	if cc := l.checkRange(b.lba, b.n); cc != nil {
		return 0, cc
	}
	if err := l.vol.Flush(ctx); err != nil {
		return 0, l.volumeError(ctx, "synchronize cache", ioWrite, err)
	}
	return 0, nil
}

func (l *LUN) readCapacity10(_ context.Context, r *request) (int, *checkCondition) {
	pmi := r.cdb[8]&0x01 != 0
	if !pmi && be32(r.cdb[2:]) != 0 {
		return 0, invalidCDB(2, -1)
	}
	b := make([]byte, 8)
	last := uint64(0xFFFFFFFF)
	if nb := l.numBlocks(); nb > 0 && nb-1 < last {
		last = nb - 1
	} else if nb == 0 {
		last = 0
	}
	put32(b[0:], uint32(last))
	put32(b[4:], BlockSize)
	return r.reply(b, 8), nil
}

// readCapacity16 returns READ CAPACITY(16) data (SBC-3 5.16): last LBA,
// block length, logical blocks per physical block, LBPME (UNMAP and
// WRITE SAME with UNMAP work) and LBPRZ (deallocated blocks read zeros).
func (l *LUN) readCapacity16(_ context.Context, r *request) (int, *checkCondition) {
	b := make([]byte, 32)
	if nb := l.numBlocks(); nb > 0 {
		put64(b[0:], nb-1)
	}
	put32(b[8:], BlockSize)
	b[13] = l.physExp
	b[14] = 0x80 | 0x40
	return r.reply(b, be32(r.cdb[10:])), nil
}

// firstDiff returns the index of the first byte where a and b differ
// (compared over b's length), or -1.
func firstDiff(a, b []byte) int {
	if bytes.Equal(a[:len(b)], b) {
		return -1
	}
	for i := range b {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
}
