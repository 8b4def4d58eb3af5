package scsi

import (
	"context"
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/cairn-storage/cairn/appliance/internal/blockdev"
)

func TestUnmap(t *testing.T) {
	ctx := context.Background()
	l, v := newTestLUN(t, Options{})
	if err := v.WriteAt(ctx, fill(256*BlockSize, 'a'), 0, 0); err != nil {
		t.Fatal(err)
	}
	list := unmapList([2]uint64{0, 8}, [2]uint64{16, 24}, [2]uint64{100, 0})
	mustGood(t, run(l, unmapCDB(uint16(len(list))), list, 0))
	if want := []rangeCall{{0, 8 * BlockSize}, {16 * BlockSize, 24 * BlockSize}}; len(v.unmaps) != 2 || v.unmaps[0] != want[0] || v.unmaps[1] != want[1] {
		t.Fatalf("unmap calls %v, want %v", v.unmaps, want)
	}
	got := readBack(t, v, 0, 48)
	if !blockdev.AllZero(got[:8*BlockSize]) || !blockdev.AllZero(got[16*BlockSize:40*BlockSize]) || got[8*BlockSize] != 'a' || got[40*BlockSize] != 'a' {
		t.Fatal("UNMAP changed the wrong blocks")
	}

	// Parameter list length 0: nothing to do. An LBA equal to the capacity
	// with no blocks is in range.
	mustGood(t, run(l, unmapCDB(0), nil, 0))
	at := unmapList([2]uint64{testBlocks, 0})
	mustGood(t, run(l, unmapCDB(uint16(len(at))), at, 0))

	// Errors leave the volume alone: every descriptor is checked first.
	v.unmaps = nil
	oob := unmapList([2]uint64{0, 8}, [2]uint64{testBlocks - 4, 8})
	mustSense(t, run(l, unmapCDB(uint16(len(oob))), oob, 0), keyIllegalRequest, ascLBAOutOfRange)
	mustSense(t, run(l, unmapCDB(4), oob[:4], 0), keyIllegalRequest, ascParameterListLength)
	bad := unmapList([2]uint64{0, 8})
	binary.BigEndian.PutUint16(bad[2:], 32) // claims two descriptors, holds one
	mustSense(t, run(l, unmapCDB(uint16(len(bad))), bad, 0), keyIllegalRequest, ascParameterListLength)
	ranges := make([][2]uint64, maxUnmapDescriptors+1)
	for i := range ranges {
		ranges[i] = [2]uint64{uint64(i), 1}
	}
	many := unmapList(ranges...)
	mustFieldPointer(t, run(l, unmapCDB(uint16(len(many))), many, 0), false, 2)
	big := newSpy(2, 1<<30)
	lb := NewLUN(big, Options{})
	huge := unmapList([2]uint64{0, maxUnmapBlocks + 1})
	mustFieldPointer(t, run(lb, unmapCDB(uint16(len(huge))), huge, 0), false, 16)
	if len(v.unmaps) != 0 || len(big.unmaps) != 0 {
		t.Fatal("a rejected UNMAP deallocated blocks")
	}
	// Overlapping, touching and unordered descriptors are merged: one call
	// per merged range (libiscsi's Unmap.Simple: 1..256 one-block ones).
	v.unmaps = nil
	if err := v.WriteAt(ctx, fill(256*BlockSize, 'a'), 0, 0); err != nil {
		t.Fatal(err)
	}
	mixed := unmapList([2]uint64{8, 8}, [2]uint64{0, 8}, [2]uint64{4, 2}, [2]uint64{14, 6}, [2]uint64{200, 1}, [2]uint64{30, 0}, [2]uint64{199, 1})
	mustGood(t, run(l, unmapCDB(uint16(len(mixed))), mixed, 0))
	if want := []rangeCall{{0, 20 * BlockSize}, {199 * BlockSize, 2 * BlockSize}}; len(v.unmaps) != 2 || v.unmaps[0] != want[0] || v.unmaps[1] != want[1] {
		t.Fatalf("unmap calls %v, want %v (merged)", v.unmaps, want)
	}
	got = readBack(t, v, 0, 256)
	if !blockdev.AllZero(got[:20*BlockSize]) || got[20*BlockSize] != 'a' || got[198*BlockSize] != 'a' ||
		!blockdev.AllZero(got[199*BlockSize:201*BlockSize]) || got[201*BlockSize] != 'a' {
		t.Fatal("merged UNMAP changed the wrong blocks")
	}
	ones := make([][2]uint64, 256)
	for i := range ones {
		ones[i] = [2]uint64{uint64(255 - i), 1}
	}
	v.unmaps = nil
	list = unmapList(ones...)
	mustGood(t, run(l, unmapCDB(uint16(len(list))), list, 0))
	if len(v.unmaps) != 1 || v.unmaps[0] != (rangeCall{0, 256 * BlockSize}) {
		t.Fatalf("256 one-block descriptors: calls %v, want one of 256 blocks", v.unmaps)
	}

	// ANCHOR is not supported.
	c := unmapCDB(24)
	c[1] = 1
	mustFieldPointer(t, run(l, c, unmapList([2]uint64{0, 8}), 0), true, 1)
}

func getLBAStatusCDB(lba uint64, alloc uint32) []byte {
	return cdb16(opServiceActionIn16, saGetLBAStatus, lba, alloc)
}

type lbaStatus struct {
	lba    uint64
	n      uint32
	status byte
}

func parseLBAStatus(t *testing.T, d []byte) []lbaStatus {
	t.Helper()
	if len(d) < 8 || int(binary.BigEndian.Uint32(d))+4 != len(d) || (len(d)-8)%16 != 0 {
		t.Fatalf("GET LBA STATUS data % x", d)
	}
	var out []lbaStatus
	for b := d[8:]; len(b) > 0; b = b[16:] {
		out = append(out, lbaStatus{binary.BigEndian.Uint64(b), binary.BigEndian.Uint32(b[8:]), b[12]})
	}
	return out
}

func TestGetLBAStatus(t *testing.T) {
	ctx := context.Background()
	l, v := newTestLUN(t, Options{})
	// Blocks 0-263 written, then 8..15 deallocated (one 4 KiB page).
	if err := v.WriteAt(ctx, fill(264*BlockSize, 'A'), 0, 0); err != nil {
		t.Fatal(err)
	}
	list := unmapList([2]uint64{8, 8})
	mustGood(t, run(l, unmapCDB(uint16(len(list))), list, 0))

	r := run(l, getLBAStatusCDB(0, 1024), nil, 1024)
	mustGood(t, r)
	got := parseLBAStatus(t, r.data)
	want := []lbaStatus{{0, 8, lbaMapped}, {8, 8, lbaDeallocated}, {16, 248, lbaMapped}, {264, testBlocks - 264, lbaDeallocated}}
	if len(got) != len(want) {
		t.Fatalf("descriptors %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("descriptors %v, want %v", got, want)
		}
	}
	// The first descriptor starts at the starting LBA, even mid-extent.
	r = run(l, getLBAStatusCDB(11, 24), nil, 1024)
	mustGood(t, r)
	d := r.data
	if len(d) != 24 || binary.BigEndian.Uint64(d[8:]) != 11 || binary.BigEndian.Uint32(d[16:]) != 5 || d[20] != lbaDeallocated {
		t.Fatalf("from LBA 11: % x", d)
	}
	// Allocation length caps the descriptors; 0 transfers nothing.
	if r := run(l, getLBAStatusCDB(0, 39), nil, 1024); r.DataInLen != 24 {
		t.Fatalf("allocation length 39 returned %d bytes", r.DataInLen)
	}
	mustGood(t, run(l, getLBAStatusCDB(0, 0), nil, 1024))

	// One descriptor asked for, and the status changes in the next chunk:
	// the start's chunk and the next are asked for, not the whole window.
	if err := v.WriteAt(ctx, fill(chunkBlocks*BlockSize, 'B'), 0, 0); err != nil {
		t.Fatal(err)
	}
	v.extents = nil
	r = run(l, getLBAStatusCDB(100, 24), nil, 24)
	mustGood(t, r)
	if got := parseLBAStatus(t, r.data); len(got) != 1 || got[0] != (lbaStatus{100, chunkBlocks - 100, lbaMapped}) {
		t.Fatalf("from LBA 100, one descriptor: %v", got)
	}
	if want := []rangeCall{{100 * BlockSize, (chunkBlocks - 100) * BlockSize}, {chunkBlocks * BlockSize, chunkBlocks * BlockSize}}; len(v.extents) != 2 || v.extents[0] != want[0] || v.extents[1] != want[1] {
		t.Fatalf("extents asked %v, want %v", v.extents, want)
	}
	// Room for many: batches of 1, 1, 2, 4 chunks cover the 8-chunk volume,
	// and the answer is the same as one call's.
	v.extents = nil
	r = run(l, getLBAStatusCDB(0, 1024), nil, 1024)
	mustGood(t, r)
	if got := parseLBAStatus(t, r.data); len(got) != 2 || got[0] != (lbaStatus{0, chunkBlocks, lbaMapped}) || got[1] != (lbaStatus{chunkBlocks, testBlocks - chunkBlocks, lbaDeallocated}) {
		t.Fatalf("from LBA 0: %v", got)
	}
	var sizes []int64
	for _, c := range v.extents {
		sizes = append(sizes, c.length/(chunkBlocks*BlockSize))
	}
	if fmt.Sprint(sizes) != "[1 1 2 4]" {
		t.Fatalf("extents batches (chunks) %v, want [1 1 2 4]", sizes)
	}
	mustGood(t, run(l, getLBAStatusCDB(testBlocks-1, 24), nil, 24))
	mustSense(t, run(l, getLBAStatusCDB(testBlocks, 24), nil, 24), keyIllegalRequest, ascLBAOutOfRange)
	mustSense(t, run(l, getLBAStatusCDB(1<<63, 24), nil, 24), keyIllegalRequest, ascLBAOutOfRange)
	mustSense(t, run(l, getLBAStatusCDB(^uint64(0), 24), nil, 24), keyIllegalRequest, ascLBAOutOfRange)
}
