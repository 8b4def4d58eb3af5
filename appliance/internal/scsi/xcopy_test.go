package scsi

import (
	"bytes"
	"context"
	"encoding/binary"
	"testing"

	"github.com/cairn-storage/cairn/appliance/internal/blockdev"
)

// identCSCD builds a 32-byte identification CSCD descriptor naming wwn.
func identCSCD(wwn [16]byte) []byte {
	d := make([]byte, 32)
	d[0] = cscdIdentification
	d[4], d[5], d[7] = 0x01, 0x03, 16 // binary, LU, NAA, 16 bytes
	copy(d[8:], wwn[:])
	d[30], d[31] = 0x02, 0x00 // disk block length 512
	return d
}

func b2bSegment(src, dst uint16, n uint16, srcLBA, dstLBA uint64) []byte {
	d := make([]byte, 28)
	d[0] = segBlockToBlock
	binary.BigEndian.PutUint16(d[2:], segBlockToBlockLen)
	binary.BigEndian.PutUint16(d[4:], src)
	binary.BigEndian.PutUint16(d[6:], dst)
	binary.BigEndian.PutUint16(d[10:], n)
	binary.BigEndian.PutUint64(d[12:], srcLBA)
	binary.BigEndian.PutUint64(d[20:], dstLBA)
	return d
}

// xcopyList builds an EXTENDED COPY(LID1) parameter list.
func xcopyList(listID, usage byte, cscds, segs [][]byte) []byte {
	var t, s []byte
	for _, c := range cscds {
		t = append(t, c...)
	}
	for _, c := range segs {
		s = append(s, c...)
	}
	h := make([]byte, 16)
	h[0], h[1] = listID, usage<<3
	binary.BigEndian.PutUint16(h[2:], uint16(len(t)))
	binary.BigEndian.PutUint32(h[8:], uint32(len(s)))
	return append(append(h, t...), s...)
}

func xcopyCDB(paramLen uint32) []byte {
	c := make([]byte, 16)
	c[0] = opExtendedCopy
	binary.BigEndian.PutUint32(c[10:], paramLen)
	return c
}

func xcopy(l *LUN, list []byte) result { return run(l, xcopyCDB(uint32(len(list))), list, 0) }

func rcrCDB(sa, listID byte, alloc uint32) []byte {
	c := make([]byte, 16)
	c[0], c[1], c[2] = opReceiveCopyResult, sa, listID
	binary.BigEndian.PutUint32(c[10:], alloc)
	return c
}

func TestExtendedCopyWithinVolume(t *testing.T) {
	ctx := context.Background()
	l, v := newTestLUN(t, Options{})
	data := make([]byte, 2048*BlockSize)
	for i := range data {
		data[i] = byte(i / 512)
	}
	if err := v.WriteAt(ctx, data, 0, 0); err != nil {
		t.Fatal(err)
	}
	self := identCSCD(v.WWN())
	list := xcopyList(1, 0, [][]byte{self, self}, [][]byte{b2bSegment(0, 1, 2048, 0, testBlocks-2048)})
	mustGood(t, xcopy(l, list))
	if len(v.copies) != 1 || v.copies[0].src != blockdev.Volume(v) || v.copies[0].dstOff != (testBlocks-2048)*BlockSize {
		t.Fatalf("copy calls %+v", v.copies)
	}
	if !bytes.Equal(readBack(t, v, testBlocks-2048, 2048), data) {
		t.Fatal("blocks were not copied")
	}

	// COPY STATUS for list 1: completed, one segment, 1 MiB.
	r := run(l, rcrCDB(saCopyStatus, 1, 1024), nil, 1024)
	mustGood(t, r)
	if want := []byte{0, 0, 0, 8, 0, 0, 1, 0, 0, 0x10, 0, 0}; !bytes.Equal(r.data, want) {
		t.Fatalf("copy status % x, want % x", r.data, want)
	}
	mustFieldPointer(t, run(l, rcrCDB(saCopyStatus, 2, 1024), nil, 1024), true, 2)

	// LIST ID USAGE 10b: no held data.
	list = xcopyList(5, 2, [][]byte{self}, [][]byte{b2bSegment(0, 0, 8, 0, 8)})
	mustGood(t, xcopy(l, list))
	mustFieldPointer(t, run(l, rcrCDB(saCopyStatus, 5, 1024), nil, 1024), true, 2)

	// A new command with list 1 that fails validation discards list 1's
	// held data and holds nothing.
	bad := xcopyList(1, 0, [][]byte{self}, [][]byte{b2bSegment(0, 1, 8, 0, 8)})
	mustSense(t, xcopy(l, bad), keyCopyAborted, ascUnreachableCopyTarget)
	mustFieldPointer(t, run(l, rcrCDB(saCopyStatus, 1, 1024), nil, 1024), true, 2)

	// Parameter list length 0 is not an error.
	mustGood(t, run(l, xcopyCDB(0), nil, 0))
}

func TestExtendedCopyAcrossVolumes(t *testing.T) {
	ctx := context.Background()
	src := newSpy(10, testVolumeSize)
	dst := newSpy(11, testVolumeSize)
	other := newSpy(12, testVolumeSize)
	resolve := func(wwn [16]byte) (blockdev.Volume, bool) {
		for _, v := range []*spyVolume{dst, other} {
			if v.WWN() == wwn {
				return v, true
			}
		}
		return nil, false
	}
	// The command reaches the source volume's LUN and names the other one.
	l := NewLUN(src, Options{Resolve: resolve})
	data := fill(64*BlockSize, 0x3C)
	if err := src.WriteAt(ctx, data, 100*BlockSize, 0); err != nil {
		t.Fatal(err)
	}
	list := xcopyList(0, 3, [][]byte{identCSCD(src.WWN()), identCSCD(dst.WWN())},
		[][]byte{b2bSegment(0, 1, 32, 100, 0), b2bSegment(0, 1, 32, 132, 500)})
	mustGood(t, xcopy(l, list))
	if len(dst.copies) != 2 || len(src.copies) != 0 || dst.copies[0].src != blockdev.Volume(src) {
		t.Fatalf("copies: dst %+v src %+v; the destination must copy server side from the source", dst.copies, src.copies)
	}
	if !bytes.Equal(readBack(t, dst, 0, 32), data[:32*BlockSize]) || !bytes.Equal(readBack(t, dst, 500, 32), data[32*BlockSize:]) {
		t.Fatal("data not copied across volumes")
	}

	// An unknown WWN: COPY ABORTED, COPY TARGET DEVICE NOT REACHABLE, with
	// the segment number and a segment pointer to the index field.
	var unknown [16]byte
	unknown[0] = 0x60
	list = xcopyList(0, 3, [][]byte{identCSCD(src.WWN()), identCSCD(unknown)}, [][]byte{b2bSegment(0, 1, 8, 0, 0)})
	r := xcopy(l, list)
	mustSense(t, r, keyCopyAborted, ascCopyTargetNotReachable)
	if r.Sense[15] != 0xA0 || r.Sense[17] != 6 {
		t.Fatalf("segment pointer % x", r.Sense[15:])
	}
	// Beyond the destination's end: nothing copied.
	dst.copies = nil
	list = xcopyList(0, 3, [][]byte{identCSCD(src.WWN()), identCSCD(dst.WWN())}, [][]byte{b2bSegment(0, 1, 2048, 0, testBlocks-1)})
	mustSense(t, xcopy(l, list), keyCopyAborted, ascNoAdditionalSense)
	// Without Resolve only the LUN's own volume can be named.
	mustSense(t, xcopy(NewLUN(src, Options{}), xcopyList(0, 3, [][]byte{identCSCD(dst.WWN())}, [][]byte{b2bSegment(0, 0, 8, 0, 0)})),
		keyCopyAborted, ascCopyTargetNotReachable)
	if len(dst.copies) != 0 {
		t.Fatal("a rejected EXTENDED COPY copied data")
	}
	// Into a read-only LUN's own volume.
	ro := NewLUN(src, Options{ReadOnly: true})
	mustSense(t, xcopy(ro, xcopyList(0, 3, [][]byte{identCSCD(src.WWN())}, [][]byte{b2bSegment(0, 0, 8, 0, 8)})), keyDataProtect, ascWriteProtected)
	// A failing server-side copy is COPY ABORTED, THIRD PARTY DEVICE FAILURE.
	dst.setErr(blockdev.ErrIO)
	list = xcopyList(9, 0, [][]byte{identCSCD(src.WWN()), identCSCD(dst.WWN())}, [][]byte{b2bSegment(0, 1, 8, 0, 0)})
	mustSense(t, xcopy(l, list), keyCopyAborted, ascThirdPartyDeviceFailure)
	r = run(l, rcrCDB(saCopyStatus, 9, 1024), nil, 1024)
	mustGood(t, r)
	if r.data[4] != 0x01 {
		t.Fatalf("copy status of a failed copy % x", r.data)
	}
}

func TestExtendedCopyParameterErrors(t *testing.T) {
	l, v := newTestLUN(t, Options{})
	self := identCSCD(v.WWN())
	seg := b2bSegment(0, 0, 8, 0, 8)

	// Too many CSCD and segment descriptors.
	mustSense(t, xcopy(l, xcopyList(0, 3, [][]byte{self, self, self}, [][]byte{seg})), keyIllegalRequest, ascTooManyTargetDescriptors)
	segs := make([][]byte, maxSegmentDescriptors+1)
	for i := range segs {
		segs[i] = seg
	}
	mustSense(t, xcopy(l, xcopyList(0, 3, [][]byte{self}, segs)), keyIllegalRequest, ascTooManySegmentDescriptors)
	// Descriptor lists longer than MAXIMUM DESCRIPTOR LIST LENGTH.
	segs = make([][]byte, 40)
	for i := range segs {
		segs[i] = seg
	}
	mustSense(t, xcopy(l, xcopyList(0, 3, [][]byte{self}, segs)), keyIllegalRequest, ascParameterListLength)
	// Unsupported descriptor types.
	fc := append([]byte(nil), self...)
	fc[0] = 0xE0
	mustSense(t, xcopy(l, xcopyList(0, 3, [][]byte{fc}, [][]byte{seg})), keyIllegalRequest, ascUnsupportedTargetDescriptor)
	stream := append([]byte(nil), seg...)
	stream[0] = 0x03
	mustSense(t, xcopy(l, xcopyList(0, 3, [][]byte{self}, [][]byte{stream})), keyIllegalRequest, ascUnsupportedSegmentDescType)
	// Truncated parameter lists.
	full := xcopyList(0, 3, [][]byte{self}, [][]byte{seg})
	for _, n := range []int{15, 16 + 31, len(full) - 1} {
		mustSense(t, run(l, xcopyCDB(uint32(n)), full[:n], 0), keyIllegalRequest, ascParameterListLength)
	}
	// The CDB's length larger than the data sent: truncated too.
	mustSense(t, run(l, xcopyCDB(uint32(len(full)+100)), full[:40], 0), keyIllegalRequest, ascParameterListLength)
	// Byte 1 and the disk block length are not checked, as in LIO and
	// tcmu-runner: LU ID TYPE, a peripheral device type, a block length
	// of 4096 or of zero all copy (in the volume's 512-byte blocks).
	inline := append([]byte(nil), full...)
	binary.BigEndian.PutUint32(inline[12:], 4)
	inline = append(inline, 0, 0, 0, 0)
	mustFieldPointer(t, xcopy(l, inline), false, 12) // inline data is refused
	variants := 0
	for _, edit := range []func(d []byte){
		func(d []byte) { d[1] = 0x80 },                   // LU ID TYPE
		func(d []byte) { d[1] = 0x01 },                   // peripheral device type
		func(d []byte) { d[30] = 0x10 },                  // disk block length 4096
		func(d []byte) { d[29], d[30], d[31] = 0, 0, 0 }, // disk block length 0
	} {
		d := append([]byte(nil), self...)
		edit(d)
		mustGood(t, xcopy(l, xcopyList(0, 3, [][]byte{d}, [][]byte{seg})))
		variants++
	}
	// LIST ID USAGE 01b is reserved; 11b needs list identifier 0.
	mustFieldPointer(t, xcopy(l, xcopyList(0, 1, [][]byte{self}, [][]byte{seg})), false, 1)
	mustFieldPointer(t, xcopy(l, xcopyList(4, 3, [][]byte{self}, [][]byte{seg})), false, 0)
	if len(v.copies) != variants {
		t.Fatalf("%d copies; want one per accepted CSCD variant (%d)", len(v.copies), variants)
	}
}

func TestReceiveCopyOperatingParameters(t *testing.T) {
	l, _ := newTestLUN(t, Options{})
	r := run(l, rcrCDB(saOperatingParams, 0, 1024), nil, 1024)
	mustGood(t, r)
	d := r.data
	if len(d) != 46 || binary.BigEndian.Uint32(d) != 42 {
		t.Fatalf("operating parameters: %d bytes, available data %d", len(d), binary.BigEndian.Uint32(d))
	}
	checks := []struct {
		name      string
		got, want uint32
	}{
		{"SNLID", uint32(d[4] & 1), 1},
		{"MAXIMUM CSCD DESCRIPTOR COUNT", uint32(binary.BigEndian.Uint16(d[8:])), 2},
		{"MAXIMUM SEGMENT DESCRIPTOR COUNT", uint32(binary.BigEndian.Uint16(d[10:])), 8},
		{"MAXIMUM DESCRIPTOR LIST LENGTH", binary.BigEndian.Uint32(d[12:]), 1024},
		{"MAXIMUM SEGMENT LENGTH", binary.BigEndian.Uint32(d[16:]), 0xFFFF * 512},
		{"MAXIMUM INLINE DATA LENGTH", binary.BigEndian.Uint32(d[20:]), 0},
		{"DATA SEGMENT GRANULARITY", uint32(d[37]), 9},
		{"IMPLEMENTED DESCRIPTOR LIST LENGTH", uint32(d[43]), 2},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %d, want %d", c.name, c.got, c.want)
		}
	}
	if d[44] != 0x02 || d[45] != 0xE4 {
		t.Errorf("implemented descriptors % x", d[44:])
	}
	// RECEIVE DATA and FAILED SEGMENT DETAILS are not implemented.
	mustFieldPointer(t, run(l, rcrCDB(0x01, 0, 1024), nil, 1024), true, 1)
	mustFieldPointer(t, run(l, rcrCDB(0x04, 0, 1024), nil, 1024), true, 1)
}
