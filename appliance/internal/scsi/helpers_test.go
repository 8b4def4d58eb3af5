package scsi

import (
	"bytes"
	"context"
	"encoding/binary"
	"sync"
	"testing"

	"github.com/cairn-storage/cairn/appliance/internal/blockdev"
)

// spyVolume is a MemVolume that records how the LUN called it and can fail
// every data call with err.
type spyVolume struct {
	*blockdev.MemVolume

	mu        sync.Mutex
	err       error
	flags     []blockdev.WriteFlags // WriteAt and CompareAndWrite flags, in order
	zeroes    []zeroCall
	sames     []sameCall
	unmaps    []rangeCall
	extents   []rangeCall
	copies    []copyCall
	readCalls int
}

type zeroCall struct {
	off, length int64
	unmap       bool
}
type sameCall struct {
	pattern     []byte
	off, length int64
}
type rangeCall struct{ off, length int64 }
type copyCall struct {
	src                  blockdev.Volume
	srcOff, dstOff, size int64
}

func newSpy(id uint64, size int64) *spyVolume {
	return &spyVolume{MemVolume: blockdev.NewMemVolume("test", id, size)}
}

func (s *spyVolume) fail() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

func (s *spyVolume) setErr(err error) {
	s.mu.Lock()
	s.err = err
	s.mu.Unlock()
}

func (s *spyVolume) ReadAt(ctx context.Context, p []byte, off int64) error {
	s.mu.Lock()
	s.readCalls++
	s.mu.Unlock()
	if err := s.fail(); err != nil {
		return err
	}
	return s.MemVolume.ReadAt(ctx, p, off)
}

func (s *spyVolume) WriteAt(ctx context.Context, p []byte, off int64, f blockdev.WriteFlags) error {
	if err := s.fail(); err != nil {
		return err
	}
	s.mu.Lock()
	s.flags = append(s.flags, f)
	s.mu.Unlock()
	return s.MemVolume.WriteAt(ctx, p, off, f)
}

func (s *spyVolume) CompareAndWrite(ctx context.Context, cmp, data []byte, off int64, f blockdev.WriteFlags) error {
	if err := s.fail(); err != nil {
		return err
	}
	s.mu.Lock()
	s.flags = append(s.flags, f)
	s.mu.Unlock()
	return s.MemVolume.CompareAndWrite(ctx, cmp, data, off, f)
}

func (s *spyVolume) WriteZeroes(ctx context.Context, off, length int64, unmap bool) error {
	if err := s.fail(); err != nil {
		return err
	}
	s.mu.Lock()
	s.zeroes = append(s.zeroes, zeroCall{off, length, unmap})
	s.mu.Unlock()
	return s.MemVolume.WriteZeroes(ctx, off, length, unmap)
}

func (s *spyVolume) WriteSame(ctx context.Context, pattern []byte, off, length int64) error {
	if err := s.fail(); err != nil {
		return err
	}
	s.mu.Lock()
	s.sames = append(s.sames, sameCall{append([]byte(nil), pattern...), off, length})
	s.mu.Unlock()
	return s.MemVolume.WriteSame(ctx, pattern, off, length)
}

func (s *spyVolume) Unmap(ctx context.Context, off, length int64) error {
	if err := s.fail(); err != nil {
		return err
	}
	s.mu.Lock()
	s.unmaps = append(s.unmaps, rangeCall{off, length})
	s.mu.Unlock()
	return s.MemVolume.Unmap(ctx, off, length)
}

func (s *spyVolume) Flush(ctx context.Context) error {
	if err := s.fail(); err != nil {
		return err
	}
	return s.MemVolume.Flush(ctx)
}

func (s *spyVolume) CopyFrom(ctx context.Context, src blockdev.Volume, srcOff, dstOff, length int64) error {
	if err := s.fail(); err != nil {
		return err
	}
	s.mu.Lock()
	s.copies = append(s.copies, copyCall{src, srcOff, dstOff, length})
	s.mu.Unlock()
	return s.MemVolume.CopyFrom(ctx, src, srcOff, dstOff, length)
}

func (s *spyVolume) Extents(ctx context.Context, off, length int64) ([]blockdev.Extent, error) {
	if err := s.fail(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.extents = append(s.extents, rangeCall{off, length})
	s.mu.Unlock()
	return s.MemVolume.Extents(ctx, off, length)
}

// testVolumeSize is 8 MiB: 16384 blocks, eight chunks.
const testVolumeSize = 8 << 20
const testBlocks = testVolumeSize / BlockSize

func newTestLUN(t testing.TB, opts Options) (*LUN, *spyVolume) {
	t.Helper()
	v := newSpy(1, testVolumeSize)
	return NewLUN(v, opts), v
}

// result is a Response with the data-in bytes it returned.
type result struct {
	Response
	data []byte
}

func run(l *LUN, cdb []byte, dataOut []byte, inLen int) result {
	in := make([]byte, inLen)
	resp := l.Execute(context.Background(), cdb, dataOut, in)
	return result{resp, in[:resp.DataInLen]}
}

func mustGood(t testing.TB, r result) {
	t.Helper()
	if r.Status != StatusGood {
		t.Fatalf("status %#x, sense % x (%s), want GOOD", r.Status, r.Sense, describeSense(r.Sense))
	}
}

// mustSense checks CHECK CONDITION with the given key and ASC/ASCQ and
// the fixed-format sense layout.
func mustSense(t testing.TB, r result, key byte, code uint16) {
	t.Helper()
	if r.Status != StatusCheckCondition {
		t.Fatalf("status %#x, want CHECK CONDITION %s", r.Status, senseName(key, code))
	}
	s := r.Sense
	if len(s) != fixedSenseLen || s[0]&0x7F != 0x70 || s[7] != 10 {
		t.Fatalf("sense % x is not 18-byte fixed format", s)
	}
	if s[2] != key || uint16(s[12])<<8|uint16(s[13]) != code {
		t.Fatalf("sense %s, want %s", describeSense(s), senseName(key, code))
	}
	if r.DataInLen != 0 {
		t.Fatalf("CHECK CONDITION with %d bytes of data-in", r.DataInLen)
	}
}

// mustFieldPointer checks INVALID FIELD IN CDB (cd) or PARAMETER LIST with
// SKSV and the field pointer at byteIdx.
func mustFieldPointer(t testing.TB, r result, cd bool, byteIdx int) {
	t.Helper()
	code := uint16(ascInvalidFieldInParameterList)
	if cd {
		code = ascInvalidFieldInCDB
	}
	mustSense(t, r, keyIllegalRequest, code)
	s := r.Sense
	if s[15]&0x80 == 0 || (s[15]&0x40 != 0) != cd || int(binary.BigEndian.Uint16(s[16:])) != byteIdx {
		t.Fatalf("sense-key specific % x, want SKSV C/D=%v field %d", s[15:18], cd, byteIdx)
	}
}

func describeSense(s []byte) string {
	if len(s) < 14 {
		return "none"
	}
	return senseName(s[2], uint16(s[12])<<8|uint16(s[13]))
}

// CDB builders (big-endian fields as SBC-3 lays them out).

func cdb6(op byte, lba uint32, n byte) []byte {
	return []byte{op, byte(lba>>16) & 0x1F, byte(lba >> 8), byte(lba), n, 0}
}

func cdb10(op, flags byte, lba uint32, n uint16) []byte {
	c := make([]byte, 10)
	c[0], c[1] = op, flags
	binary.BigEndian.PutUint32(c[2:], lba)
	binary.BigEndian.PutUint16(c[7:], n)
	return c
}

func cdb12(op, flags byte, lba, n uint32) []byte {
	c := make([]byte, 12)
	c[0], c[1] = op, flags
	binary.BigEndian.PutUint32(c[2:], lba)
	binary.BigEndian.PutUint32(c[6:], n)
	return c
}

func cdb16(op, flags byte, lba uint64, n uint32) []byte {
	c := make([]byte, 16)
	c[0], c[1] = op, flags
	binary.BigEndian.PutUint64(c[2:], lba)
	binary.BigEndian.PutUint32(c[10:], n)
	return c
}

func cawCDB(flags byte, lba uint64, n byte) []byte {
	c := make([]byte, 16)
	c[0], c[1] = opCompareAndWrite, flags
	binary.BigEndian.PutUint64(c[2:], lba)
	c[13] = n
	return c
}

func fill(n int, b byte) []byte { return bytes.Repeat([]byte{b}, n) }

func readBack(t testing.TB, v blockdev.Volume, lba uint64, blocks int) []byte {
	t.Helper()
	p := make([]byte, blocks*BlockSize)
	if err := v.ReadAt(context.Background(), p, int64(lba*BlockSize)); err != nil {
		t.Fatal(err)
	}
	return p
}

func unmapCDB(paramLen uint16) []byte {
	c := make([]byte, 10)
	c[0] = opUnmap
	binary.BigEndian.PutUint16(c[7:], paramLen)
	return c
}

// unmapList builds an UNMAP parameter list of (lba, blocks) descriptors.
func unmapList(ranges ...[2]uint64) []byte {
	p := make([]byte, 8+16*len(ranges))
	binary.BigEndian.PutUint16(p[0:], uint16(len(p)-2))
	binary.BigEndian.PutUint16(p[2:], uint16(16*len(ranges)))
	for i, r := range ranges {
		binary.BigEndian.PutUint64(p[8+16*i:], r[0])
		binary.BigEndian.PutUint32(p[8+16*i+8:], uint32(r[1]))
	}
	return p
}
