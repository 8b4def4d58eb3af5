package scsi

import (
	"bytes"
	"encoding/binary"
	"testing"
)

func inquiryCDB(evpd bool, page byte, alloc uint16) []byte {
	c := []byte{opInquiry, 0, page, byte(alloc >> 8), byte(alloc), 0}
	if evpd {
		c[1] = 1
	}
	return c
}

func TestStandardInquiry(t *testing.T) {
	l, _ := newTestLUN(t, Options{VendorID: "CAIRN", ProductID: "Cairn volume", Revision: "0.1"})
	r := run(l, inquiryCDB(false, 0, 512), nil, 512)
	mustGood(t, r)
	d := r.data
	if len(d) != 74 || int(d[4]) != len(d)-5 {
		t.Fatalf("standard INQUIRY: %d bytes, additional length %d", len(d), d[4])
	}
	checks := []struct {
		name      string
		got, want byte
	}{
		{"device type", d[0], 0x00}, {"RMB", d[1], 0}, {"VERSION (SPC-4)", d[2], 0x06},
		{"HISUP|format 2", d[3], 0x12}, {"TPGS implicit|3PC", d[5], 0x18}, {"MULTIP", d[6], 0x10}, {"CMDQUE", d[7], 0x02},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: %#x, want %#x", c.name, c.got, c.want)
		}
	}
	if string(d[8:16]) != "CAIRN   " || string(d[16:32]) != "Cairn volume    " || string(d[32:36]) != "0.1 " {
		t.Errorf("identification %q %q %q", d[8:16], d[16:32], d[32:36])
	}
	var versions []uint16
	for i := 58; i < 74; i += 2 {
		versions = append(versions, binary.BigEndian.Uint16(d[i:]))
	}
	if want := []uint16{0x00A0, 0x0960, 0x0460, 0x04C0, 0, 0, 0, 0}; !equalU16(versions, want) {
		t.Errorf("version descriptors %04x, want %04x", versions, want)
	}
	// Allocation length truncates; 511 and 512 give the same data.
	for _, alloc := range []uint16{5, 36, 255, 511} {
		r := run(l, inquiryCDB(false, 0, alloc), nil, 1024)
		mustGood(t, r)
		if r.DataInLen != min(int(alloc), 74) || !bytes.Equal(r.data, d[:r.DataInLen]) {
			t.Fatalf("allocation length %d returned %d bytes", alloc, r.DataInLen)
		}
	}
	// EVPD=0 with a page code is invalid.
	mustFieldPointer(t, run(l, inquiryCDB(false, 1, 256), nil, 256), true, 2)
	mustFieldPointer(t, run(l, inquiryCDB(true, 0x99, 256), nil, 256), true, 2)
	// Non-printable option strings do not leak into INQUIRY.
	l2, _ := newTestLUN(t, Options{VendorID: "A\x00B\xff"})
	if got := run(l2, inquiryCDB(false, 0, 74), nil, 74).data[8:16]; string(got) != "A_B_    " {
		t.Errorf("vendor %q", got)
	}
}

func equalU16(a, b []uint16) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func vpd(t *testing.T, l *LUN, page byte) []byte {
	t.Helper()
	r := run(l, inquiryCDB(true, page, 1024), nil, 1024)
	mustGood(t, r)
	if r.data[1] != page || int(binary.BigEndian.Uint16(r.data[2:]))+4 != len(r.data) {
		t.Fatalf("VPD %#x header % x, %d bytes", page, r.data[:4], len(r.data))
	}
	return r.data
}

func TestVPDPages(t *testing.T) {
	l, v := newTestLUN(t, Options{TargetPortGroup: 7, RelativeTargetPort: 3, MaxTransferLength: 4096})
	sup := vpd(t, l, 0x00)
	if want := []byte{0x00, 0x80, 0x83, 0x8F, 0xB0, 0xB1, 0xB2}; !bytes.Equal(sup[4:], want) {
		t.Fatalf("supported pages % x, want % x", sup[4:], want)
	}
	for _, p := range sup[4:] {
		vpd(t, l, p) // every listed page can be read
	}

	if got := string(vpd(t, l, 0x80)[4:]); got != v.Serial() {
		t.Errorf("unit serial %q, want %q", got, v.Serial())
	}

	// Device identification: NAA WWN, T10 vendor ID, relative target
	// port 3 and target port group 7.
	di := vpd(t, l, 0x83)[4:]
	wwn := v.WWN()
	wantNAA := append([]byte{0x01, 0x03, 0x00, 0x10}, wwn[:]...)
	if !bytes.Equal(di[:20], wantNAA) {
		t.Fatalf("NAA designator % x, want % x", di[:20], wantNAA)
	}
	t10len := int(di[23])
	if di[20] != 0x02 || di[21] != 0x01 || string(di[24:24+t10len]) != "CAIRN   "+v.Serial() {
		t.Fatalf("T10 designator % x", di[20:24+t10len])
	}
	rest := di[24+t10len:]
	if want := []byte{0x51, 0x94, 0, 4, 0, 0, 0, 3, 0x51, 0x95, 0, 4, 0, 0, 0, 7}; !bytes.Equal(rest, want) {
		t.Fatalf("port designators % x, want % x", rest, want)
	}

	bl := vpd(t, l, 0xB0)
	if len(bl) != 64 {
		t.Fatalf("block limits page is %d bytes, want 64", len(bl))
	}
	fields := []struct {
		name      string
		got, want uint64
	}{
		{"WSNZ", uint64(bl[4] & 1), 0},
		{"MAXIMUM COMPARE AND WRITE LENGTH", uint64(bl[5]), 1},
		{"OPTIMAL TRANSFER LENGTH GRANULARITY", uint64(binary.BigEndian.Uint16(bl[6:])), 8},
		{"MAXIMUM TRANSFER LENGTH", uint64(binary.BigEndian.Uint32(bl[8:])), 4096},
		{"OPTIMAL TRANSFER LENGTH", uint64(binary.BigEndian.Uint32(bl[12:])), 2048},
		{"MAXIMUM UNMAP LBA COUNT", uint64(binary.BigEndian.Uint32(bl[20:])), 1 << 20},
		{"MAXIMUM UNMAP BLOCK DESCRIPTOR COUNT", uint64(binary.BigEndian.Uint32(bl[24:])), 256},
		{"OPTIMAL UNMAP GRANULARITY", uint64(binary.BigEndian.Uint32(bl[28:])), 2048},
		{"UGAVALID|ALIGNMENT", uint64(binary.BigEndian.Uint32(bl[32:])), 0x80000000},
		{"MAXIMUM WRITE SAME LENGTH", binary.BigEndian.Uint64(bl[36:]), 32768},
	}
	for _, f := range fields {
		if f.got != f.want {
			t.Errorf("%s = %d, want %d", f.name, f.got, f.want)
		}
	}

	bdc := vpd(t, l, 0xB1)
	if len(bdc) != 64 || binary.BigEndian.Uint16(bdc[4:]) != 1 {
		t.Errorf("block device characteristics: rotation rate %d", binary.BigEndian.Uint16(bdc[4:]))
	}
	lbp := vpd(t, l, 0xB2)
	if want := []byte{0, 0xB2, 0, 4, 0, 0xE4, 0x02, 0}; !bytes.Equal(lbp, want) {
		t.Errorf("logical block provisioning % x, want % x", lbp, want)
	}

	// Third-party copy: walk the descriptors, each padded to 4 bytes.
	tpc := vpd(t, l, 0x8F)[4:]
	types := map[uint16][]byte{}
	for len(tpc) > 0 {
		typ, n := binary.BigEndian.Uint16(tpc), int(binary.BigEndian.Uint16(tpc[2:]))
		if n%4 != 0 || 4+n > len(tpc) {
			t.Fatalf("third-party copy descriptor %#x length %d", typ, n)
		}
		types[typ] = tpc[4 : 4+n]
		tpc = tpc[4+n:]
	}
	if sc := types[0x0001]; !bytes.Equal(sc[:8], []byte{7, 0x83, 1, 0, 0x84, 2, 0, 3}) {
		t.Errorf("supported commands % x", sc)
	}
	if pd := types[0x0004]; len(pd) != 28 || binary.BigEndian.Uint16(pd[4:]) != 2 || binary.BigEndian.Uint32(pd[8:]) != 1024 {
		t.Errorf("parameter data % x", pd)
	}
	if sd := types[0x0008]; !bytes.Equal(sd, []byte{2, 0x02, 0xE4, 0}) {
		t.Errorf("supported descriptors % x", sd)
	}
	if g := types[0x8001]; len(g) != 32 || g[12] != 9 {
		t.Errorf("general copy operations % x", g)
	}
	if _, ok := types[0x000C]; !ok {
		t.Error("no supported CSCD IDs descriptor")
	}
}
