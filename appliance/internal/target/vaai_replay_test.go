package target

import (
	"bytes"
	"context"
	"encoding/binary"
	"math/rand"
	"testing"

	"github.com/cairn-storage/cairn/appliance/internal/blockdev"
	"github.com/cairn-storage/cairn/appliance/internal/scsi"
	"github.com/cairn-storage/cairn/appliance/internal/tcmu"
	"github.com/cairn-storage/cairn/appliance/internal/testcluster"
)

// This file replays, through the SCSI layer `cairn target` serves LIO's
// rings with (SCSIHandlers → scsi.LUN), the VAAI commands ESXi sends, with
// the field values it uses, against a real cluster: three SDSs, mirrored
// volumes, two SVM targets exporting the same volumes with their own
// relative port. Every value is documented, with its source, in
// docs/vsphere.md ("What ESXi sends"); keep the two in step.

const (
	mib = 1 << 20
	blk = scsi.BlockSize

	// VMFS heartbeat region (vmfs-tools, heartbeat.h): 2048 slots of 512
	// bytes from 3 MiB into the file system; the file system starts after
	// ESXi's 1 MiB-aligned partition offset (LBA 2048).
	vmfsPartitionLBA = 2048
	vmfsHBBase       = 0x0300000
	vmfsHBSize       = 0x200
	vmfsHBMagicOff   = 0xabcdef01
	vmfsHBMagicOn    = 0xabcdef02

	// ESXi's DataMover moves XCOPY in 4 MiB segments by default
	// (DataMover.MaxHWTransferSize = 4096 KB): 8192 blocks per segment.
	xcopySegmentBlocks = 4 * mib / blk
	// VMFS6 reclaims space in 1 MiB units (its block size and the unmap
	// granularity it reports): 2048 blocks.
	unmapBlocks = 1 * mib / blk
)

// svm is one SVM's handler for one volume.
type svm struct {
	t *testing.T
	h tcmu.Handler
}

// cmd runs one command, returning status, sense and data-in.
func (s svm) cmd(cdb, out []byte, inLen int) (byte, []byte, []byte) {
	in := make([]byte, inLen)
	r := s.h.HandleCommand(context.Background(), cdb, out, in)
	return r.Status, r.Sense, in[:r.DataInLen]
}

// good runs a command that must succeed.
func (s svm) good(what string, cdb, out []byte, inLen int) []byte {
	s.t.Helper()
	st, sense, in := s.cmd(cdb, out, inLen)
	if st != scsi.StatusGood {
		s.t.Fatalf("%s: status %#x sense % x", what, st, sense)
	}
	return in
}

func cdb16(op, flags byte, lba uint64, n uint32) []byte {
	c := make([]byte, 16)
	c[0], c[1] = op, flags
	binary.BigEndian.PutUint64(c[2:], lba)
	binary.BigEndian.PutUint32(c[10:], n)
	return c
}

// read reads in READ(16)s of at most 1 MiB (the maximum transfer length).
func (s svm) read(lba uint64, blocks int) []byte {
	s.t.Helper()
	var out []byte
	for done := 0; done < blocks; done += mib / blk {
		n := min(blocks-done, mib/blk)
		out = append(out, s.good("READ(16)", cdb16(0x88, 0, lba+uint64(done), uint32(n)), nil, n*blk)...)
	}
	return out
}

// write writes data in 1 MiB WRITE(16)s (the maximum transfer length).
func (s svm) write(lba uint64, data []byte) {
	s.t.Helper()
	for off := 0; off < len(data); off += mib {
		part := data[off:min(off+mib, len(data))]
		s.good("WRITE(16)", cdb16(0x8A, 0, lba+uint64(off/blk), uint32(len(part)/blk)), part, 0)
	}
}

// on returns s reporting failures to t (a subtest).
func (s svm) on(t *testing.T) svm { s.t = t; return s }

// mapped asks GET LBA STATUS whether lba is mapped (0) or deallocated (1).
func (s svm) provisioning(lba uint64) byte {
	s.t.Helper()
	c := cdb16(0x9E, 0x12, lba, 0)
	binary.BigEndian.PutUint32(c[10:], 24)
	d := s.good("GET LBA STATUS", c, nil, 24)
	if binary.BigEndian.Uint64(d[8:]) != lba {
		s.t.Fatalf("GET LBA STATUS for %d starts at %d", lba, binary.BigEndian.Uint64(d[8:]))
	}
	return d[20] & 0x0F
}

// naa reads the LU's NAA designator from VPD page 83h, as ESXi does to
// build its XCOPY CSCD descriptors.
func (s svm) naa() (desc []byte, relPort uint16) {
	s.t.Helper()
	c := []byte{0x12, 0x01, 0x83, 0x01, 0x00, 0}
	p := s.good("INQUIRY VPD 83h", c, nil, 256)
	for off := 4; off+4 <= len(p); {
		n := int(p[off+3])
		typ, assoc := p[off+1]&0x0F, (p[off+1]>>4)&0x03
		switch {
		case typ == 3 && assoc == 0:
			desc = append([]byte(nil), p[off:off+4+n]...)
		case typ == 4 && assoc == 1:
			relPort = binary.BigEndian.Uint16(p[off+6:])
		}
		off += 4 + n
	}
	if len(desc) != 20 || desc[0]&0x0F != 1 {
		s.t.Fatalf("VPD 83h has no 16-byte binary NAA designator: % x", p)
	}
	return desc, relPort
}

// heartbeat is a VMFS heartbeat record (vmfs-tools heartbeat.h, little
// endian): magic, position, sequence, uptime (µs), owner UUID, journal.
func heartbeat(magic uint32, slot, seq, uptime uint64, owner byte) []byte {
	b := make([]byte, vmfsHBSize)
	binary.LittleEndian.PutUint32(b[0x00:], magic)
	binary.LittleEndian.PutUint64(b[0x04:], vmfsHBBase+slot*vmfsHBSize)
	binary.LittleEndian.PutUint64(b[0x0c:], seq)
	binary.LittleEndian.PutUint64(b[0x14:], uptime)
	for i := range 16 {
		b[0x1c+i] = owner
	}
	return b
}

// ats is COMPARE AND WRITE as ESXi sends it for ATS: one block, no DPO or
// FUA, group 0, data-out = the block it read (verify) + the new block.
func ats(lba uint64, verify, data []byte) ([]byte, []byte) {
	c := make([]byte, 16)
	c[0] = 0x89
	binary.BigEndian.PutUint64(c[2:], lba)
	c[13] = 1
	return c, append(append([]byte(nil), verify...), data...)
}

func TestVAAIReplay(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	c := testcluster.Start(t, testcluster.Options{})
	volA := c.CreateVolume("vmfs-a", 64*mib, true)
	volB := c.CreateVolume("vmfs-b", 64*mib, true)
	resolve := func(wwn [16]byte) (blockdev.Volume, bool) {
		for _, v := range []blockdev.Volume{volA, volB} {
			if v.WWN() == wwn {
				return v, true
			}
		}
		return nil, false
	}
	// Two SVMs (relative ports 1 and 2 of the one group listing 1..3).
	newSVM := func(port uint16, vol blockdev.Volume) svm {
		opts := scsi.Options{TargetPortGroup: 1, RelativeTargetPort: port, GroupPorts: []uint16{1, 2, 3}}
		return svm{t, SCSIHandlers(opts, resolve)(vol)}
	}
	a1, a2, b2 := newSVM(1, volA), newSVM(2, volA), newSVM(2, volB)

	t.Run("RTPG", func(t *testing.T) {
		a1, a2 := a1.on(t), a2.on(t)
		// REPORT TARGET PORT GROUPS: MAINTENANCE IN / 0Ah; both header
		// formats. Every SVM answers the same bytes: one group, PREF,
		// active/optimized, T_SUP|AO_SUP, ports 1, 2, 3.
		for _, format := range []byte{0, 1} {
			c := []byte{0xA3, 0x0A | format<<5, 0, 0, 0, 0, 0, 0, 0x10, 0, 0, 0}
			x, y := a1.good("RTPG", c, nil, 4096), a2.good("RTPG", c, nil, 4096)
			if !bytes.Equal(x, y) {
				t.Fatalf("format %d: SVM 1 answered % x, SVM 2 % x", format, x, y)
			}
			d := x[4+4*int(format):]
			if d[0] != 0x80 || d[1] != 0x81 || binary.BigEndian.Uint16(d[2:]) != 1 || d[7] != 3 {
				t.Fatalf("format %d: descriptor % x", format, d)
			}
		}
		// VPD 83h: the same NAA on both, each its own relative port.
		n1, p1 := a1.naa()
		n2, p2 := a2.naa()
		if !bytes.Equal(n1, n2) || p1 != 1 || p2 != 2 {
			t.Fatalf("VPD 83h: NAA % x / % x, relative ports %d / %d", n1, n2, p1, p2)
		}
	})

	t.Run("ATS heartbeat and lock", func(t *testing.T) {
		a1, a2 := a1.on(t), a2.on(t)
		const slot = 5
		lba := uint64(vmfsPartitionLBA + (vmfsHBBase+slot*vmfsHBSize)/blk)
		free := heartbeat(vmfsHBMagicOff, slot, 0, 0, 0)
		a1.write(lba, free) // the formatted, free slot
		// Host A takes the slot through SVM 1.
		mineA := heartbeat(vmfsHBMagicOn, slot, 1, 1_000_000, 0xAA)
		c, out := ats(lba, free, mineA)
		a1.good("ATS lock A", c, out, 0)
		// Host B, racing through SVM 2 with the image it read before,
		// miscompares: 0E/1D00, INFORMATION = offset of the first
		// different byte (the magic, byte 0).
		c, out = ats(lba, free, heartbeat(vmfsHBMagicOn, slot, 1, 2_000_000, 0xBB))
		st, sense, _ := a2.cmd(c, out, 0)
		if st != scsi.StatusCheckCondition || sense[2]&0x0F != 0x0E || sense[12] != 0x1D || sense[13] != 0 {
			t.Fatalf("racing ATS: status %#x sense % x, want MISCOMPARE 1D/00", st, sense)
		}
		if sense[0]&0x80 == 0 || binary.BigEndian.Uint32(sense[3:]) != 0 {
			t.Fatalf("miscompare INFORMATION % x, want VALID and offset 0", sense[3:7])
		}
		// Host A heartbeats: compare its last image, write seq+1 (ESXi
		// 5.5U2+ heartbeats with ATS, KB 2113956), through either SVM.
		prev := mineA
		for seq := uint64(2); seq <= 6; seq++ {
			next := heartbeat(vmfsHBMagicOn, slot, seq, seq*1_000_000, 0xAA)
			via := a1
			if seq%2 == 0 {
				via = a2
			}
			c, out := ats(lba, prev, next)
			via.good("ATS heartbeat", c, out, 0)
			prev = next
		}
		if got := a2.read(lba, 1); !bytes.Equal(got, prev) {
			t.Fatalf("heartbeat slot reads % x, want the last heartbeat", got[:32])
		}
	})

	t.Run("XCOPY 4 MiB segments", func(t *testing.T) {
		a1, b2 := a1.on(t), b2.on(t)
		src := make([]byte, 12*mib)
		rand.New(rand.NewSource(1)).Read(src)
		a1.write(8*mib/blk, src)
		naaA, _ := a1.naa()
		naaB, _ := b2.naa()
		// RECEIVE COPY RESULTS / OPERATING PARAMETERS: a 4 MiB segment
		// must fit.
		op := a1.good("RECEIVE COPY OPERATING PARAMETERS", []byte{0x84, 0x03, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0}, nil, 256)
		if binary.BigEndian.Uint32(op[16:]) < 4*mib {
			t.Fatalf("MAXIMUM SEGMENT LENGTH %d < 4 MiB", binary.BigEndian.Uint32(op[16:]))
		}
		// Three segments A→B, sent alternately to the SVM of the source
		// and of the destination LU; the last one unaligned to chunks.
		for i, seg := range []struct {
			srcLBA, dstLBA uint64
			to             svm
		}{
			{8 * mib / blk, 0, a1},
			{12 * mib / blk, 4 * mib / blk, b2},
			{16*mib/blk + 8, 8*mib/blk + 8, a1},
		} {
			list := xcopyParams(naaA, naaB, seg.srcLBA, seg.dstLBA, xcopySegmentBlocks)
			c := make([]byte, 16)
			c[0], c[1] = 0x83, 0x00 // EXTENDED COPY(LID1)
			binary.BigEndian.PutUint32(c[10:], uint32(len(list)))
			seg.to.good("EXTENDED COPY", c, list, 0)
			got := b2.read(seg.dstLBA, 64)
			want := src[(seg.srcLBA-8*mib/blk)*blk:][:64*blk]
			if !bytes.Equal(got, want) {
				t.Fatalf("segment %d: destination differs from source", i)
			}
		}
		if got, want := b2.read(4*mib/blk, 2048), src[4*mib:5*mib]; !bytes.Equal(got, want) {
			t.Fatal("copied data differs")
		}
	})

	t.Run("WRITE SAME 16", func(t *testing.T) {
		a1, a2 := a1.on(t), a2.on(t)
		// Block zeroing: WRITE SAME(16), one zero block of data-out, 1 MiB
		// per command; with the UNMAP bit (byte 1 bit 3) the range is
		// deallocated and reads zeros (LBPRZ).
		base := uint64(32 * mib / blk)
		junk := bytes.Repeat([]byte{0x5A}, 2*mib)
		a1.write(base, junk)
		zero := make([]byte, blk)
		a1.good("WRITE SAME(16)", cdb16(0x93, 0x00, base, unmapBlocks), zero, 0)
		a2.good("WRITE SAME(16) UNMAP", cdb16(0x93, 0x08, base+unmapBlocks, unmapBlocks), zero, 0)
		if got := a2.read(base, 2*unmapBlocks); !bytes.Equal(got, make([]byte, 2*mib)) {
			t.Fatal("WRITE SAME range does not read zeros")
		}
		if st := a1.provisioning(base + unmapBlocks); st != 1 {
			t.Fatalf("WRITE SAME with UNMAP left the chunk mapped (status %d)", st)
		}
	})

	t.Run("UNMAP 1 MiB granularity", func(t *testing.T) {
		a1, a2 := a1.on(t), a2.on(t)
		// Block Limits VPD: OPTIMAL UNMAP GRANULARITY 2048 blocks (1 MiB),
		// UGAVALID with alignment 0, which VMFS6 reclaims in.
		bl := a1.good("INQUIRY VPD B0h", []byte{0x12, 0x01, 0xB0, 0x00, 0x40, 0}, nil, 64)
		if binary.BigEndian.Uint32(bl[28:]) != unmapBlocks || binary.BigEndian.Uint32(bl[32:]) != 0x80000000 {
			t.Fatalf("Block Limits unmap granularity %d / alignment %#x", binary.BigEndian.Uint32(bl[28:]), binary.BigEndian.Uint32(bl[32:]))
		}
		base := uint64(40 * mib / blk)
		a1.write(base, bytes.Repeat([]byte{0xA5}, 4*mib))
		// One UNMAP with two 1 MiB descriptors (chunks 0 and 2 of the 4).
		p := make([]byte, 8+2*16)
		binary.BigEndian.PutUint16(p[0:], uint16(len(p)-2))
		binary.BigEndian.PutUint16(p[2:], 32)
		for i, lba := range []uint64{base, base + 2*unmapBlocks} {
			binary.BigEndian.PutUint64(p[8+16*i:], lba)
			binary.BigEndian.PutUint32(p[8+16*i+8:], unmapBlocks)
		}
		c := []byte{0x42, 0, 0, 0, 0, 0, 0, 0, byte(len(p)), 0}
		a2.good("UNMAP", c, p, 0)
		for i, want := range []byte{1, 0, 1, 0} {
			lba := base + uint64(i)*unmapBlocks
			if st := a1.provisioning(lba); st != want {
				t.Fatalf("chunk %d: provisioning status %d, want %d", i, st, want)
			}
			fillByte := byte(0xA5)
			if want == 1 {
				fillByte = 0
			}
			if got := a1.read(lba, 8); !bytes.Equal(got, bytes.Repeat([]byte{fillByte}, 8*blk)) {
				t.Fatalf("chunk %d reads % x..., want %#x", i, got[:4], fillByte)
			}
		}
	})
}

// xcopyParams is ESXi's EXTENDED COPY(LID1) parameter list: LIST ID USAGE
// 11b with list identifier 0 (no held results), two identification CSCD
// descriptors (E4h: peripheral type 0, the LU's NAA designator from VPD
// 83h, disk block length 512) and one block→block segment (02h, DC=0,
// source CSCD 0, destination CSCD 1).
func xcopyParams(srcNAA, dstNAA []byte, srcLBA, dstLBA uint64, blocks uint16) []byte {
	cscd := func(naa []byte) []byte {
		d := make([]byte, 32)
		d[0] = 0xE4
		copy(d[4:], naa) // code set, association/type, reserved, length 16, designator
		d[29], d[30], d[31] = 0, 0x02, 0x00
		return d
	}
	seg := make([]byte, 28)
	seg[0] = 0x02
	binary.BigEndian.PutUint16(seg[2:], 0x18)
	binary.BigEndian.PutUint16(seg[4:], 0)
	binary.BigEndian.PutUint16(seg[6:], 1)
	binary.BigEndian.PutUint16(seg[10:], blocks)
	binary.BigEndian.PutUint64(seg[12:], srcLBA)
	binary.BigEndian.PutUint64(seg[20:], dstLBA)
	h := make([]byte, 16)
	h[1] = 0x18 // LIST ID USAGE 11b
	binary.BigEndian.PutUint16(h[2:], 64)
	binary.BigEndian.PutUint32(h[8:], uint32(len(seg)))
	return append(append(append(h, cscd(srcNAA)...), cscd(dstNAA)...), seg...)
}
