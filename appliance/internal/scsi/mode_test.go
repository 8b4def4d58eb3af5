package scsi

import (
	"bytes"
	"encoding/binary"
	"testing"
)

func modeSense6(dbd bool, pc, page, sub, alloc byte) []byte {
	c := []byte{opModeSense6, 0, pc<<6 | page, sub, alloc, 0}
	if dbd {
		c[1] = 0x08
	}
	return c
}

func modeSense10(llbaa, dbd bool, pc, page byte, alloc uint16) []byte {
	c := make([]byte, 10)
	c[0], c[2] = opModeSense10, pc<<6|page
	if llbaa {
		c[1] |= 0x10
	}
	if dbd {
		c[1] |= 0x08
	}
	binary.BigEndian.PutUint16(c[7:], alloc)
	return c
}

// pages splits mode page data into page code -> page bytes.
func pages(t *testing.T, b []byte) map[byte][]byte {
	t.Helper()
	out := map[byte][]byte{}
	for len(b) > 0 {
		if len(b) < 2 || 2+int(b[1]) > len(b) {
			t.Fatalf("truncated mode page % x", b)
		}
		out[b[0]&0x3F] = b[:2+int(b[1])]
		b = b[2+int(b[1]):]
	}
	return out
}

func TestModeSense(t *testing.T) {
	l, _ := newTestLUN(t, Options{})
	r := run(l, modeSense6(false, 0, 0x3F, 0, 255), nil, 255)
	mustGood(t, r)
	d := r.data
	if int(d[0]) != len(d)-1 || d[1] != 0 || d[2] != 0x10 || d[3] != 8 {
		t.Fatalf("MODE SENSE(6) header % x (%d bytes)", d[:4], len(d))
	}
	if want := []byte{0, 0, 0x40, 0, 0, 0, 2, 0}; !bytes.Equal(d[4:12], want) { // 16384 blocks of 512
		t.Fatalf("block descriptor % x, want % x", d[4:12], want)
	}
	ps := pages(t, d[12:])
	if len(ps) != 3 {
		t.Fatalf("all pages returned %d pages", len(ps))
	}
	if c := ps[pageCaching]; len(c) != 20 || c[2]&0x04 == 0 {
		t.Errorf("caching page % x: want WCE", c)
	}
	ctl := ps[pageControl]
	if want := []byte{0x0A, 0x0A, 0x02, 0x10, 0, 0, 0, 0, 0xFF, 0xFF, 0, 0}; !bytes.Equal(ctl, want) {
		t.Errorf("control page % x, want % x", ctl, want)
	}
	if ie := ps[pageInformationalExcepts]; len(ie) != 12 || ie[2] != 0x08 {
		t.Errorf("informational exceptions page % x", ie)
	}

	// One page, DBD: the same bytes as in all pages.
	r = run(l, modeSense6(true, 0, pageControl, 0, 255), nil, 255)
	mustGood(t, r)
	if r.data[3] != 0 || !bytes.Equal(r.data[4:], ctl) {
		t.Fatalf("control page alone % x", r.data)
	}
	// Changeable values: nothing is changeable.
	r = run(l, modeSense6(true, 1, pageControl, 0, 255), nil, 255)
	mustGood(t, r)
	if !bytes.Equal(r.data[4:], []byte{0x0A, 0x0A, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}) {
		t.Fatalf("changeable control page % x", r.data[4:])
	}
	// Allocation length 4 returns just the header.
	if r := run(l, modeSense6(false, 0, 0x3F, 0, 4), nil, 255); r.DataInLen != 4 {
		t.Fatalf("allocation length 4 returned %d bytes", r.DataInLen)
	}
	// Saved values are not supported; unknown pages and subpages invalid.
	mustSense(t, run(l, modeSense6(false, 3, 0x3F, 0, 255), nil, 255), keyIllegalRequest, ascSavingParamsNotSupported)
	mustFieldPointer(t, run(l, modeSense6(false, 0, 0x19, 0, 255), nil, 255), true, 2)
	mustFieldPointer(t, run(l, modeSense6(false, 0, pageControl, 1, 255), nil, 255), true, 3)

	// MODE SENSE(10) with a long LBA block descriptor.
	r = run(l, modeSense10(true, false, 0, pageCaching, 1024), nil, 1024)
	mustGood(t, r)
	d = r.data
	if int(binary.BigEndian.Uint16(d)) != len(d)-2 || d[3] != 0x10 || d[4] != 1 || binary.BigEndian.Uint16(d[6:]) != 16 {
		t.Fatalf("MODE SENSE(10) header % x", d[:8])
	}
	if binary.BigEndian.Uint64(d[8:]) != testBlocks || binary.BigEndian.Uint32(d[20:]) != 512 || d[24] != pageCaching {
		t.Fatalf("long block descriptor % x", d[8:24])
	}
}

func TestModeSelect(t *testing.T) {
	l, _ := newTestLUN(t, Options{})
	// Read the control page and write it back unchanged: accepted.
	r := run(l, modeSense6(true, 0, pageControl, 0, 255), nil, 255)
	mustGood(t, r)
	param := append([]byte{0, 0, 0, 0}, r.data[4:]...)
	sel := []byte{opModeSelect6, 0x10, 0, 0, byte(len(param)), 0}
	mustGood(t, run(l, sel, param, 0))

	// Setting SWP (byte 4 bit 3 of the page) is a change: refused,
	// pointing at that byte and bit of the parameter list.
	changed := append([]byte(nil), param...)
	changed[4+4] |= 0x08
	r = run(l, sel, changed, 0)
	mustFieldPointer(t, r, false, 8)
	if r.Sense[15]&0x0F != 0x08|3 {
		t.Fatalf("bit pointer % x, want BPV bit 3", r.Sense[15])
	}
	// Clearing WCE in the caching page is refused too.
	r = run(l, modeSense10(false, false, 0, pageCaching, 255), nil, 255)
	mustGood(t, r)
	p10 := append([]byte(nil), r.data...)
	binary.BigEndian.PutUint16(p10, 0)
	p10[8+8+2] &^= 0x04 // header 8, block descriptor 8, page byte 2
	sel10 := make([]byte, 10)
	sel10[0], sel10[1] = opModeSelect10, 0x10
	binary.BigEndian.PutUint16(sel10[7:], uint16(len(p10)))
	mustFieldPointer(t, run(l, sel10, p10, 0), false, 18)
	// The same list unchanged is accepted, block descriptor included.
	p10[18] |= 0x04
	mustGood(t, run(l, sel10, p10, 0))

	// SP=1 cannot be honoured; short lists; unknown page; zero length.
	mustFieldPointer(t, run(l, []byte{opModeSelect6, 0x11, 0, 0, byte(len(param)), 0}, param, 0), true, 1)
	mustSense(t, run(l, sel, param[:2], 0), keyIllegalRequest, ascParameterListLength)
	mustFieldPointer(t, run(l, sel, []byte{0, 0, 0, 0, 0x19, 2, 0, 0}, 0), false, 4)
	mustGood(t, run(l, []byte{opModeSelect6, 0x10, 0, 0, 0, 0}, nil, 0))
}
