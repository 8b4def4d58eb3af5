// Package bufpool owns the data path's reusable I/O buffers: 4 KiB-aligned
// (so they can be used for O_DIRECT) and pooled by size class, so that a
// request does not allocate its payload.
package bufpool

import (
	"sync"
	"unsafe"
)

// Align is the memory alignment of every buffer (O_DIRECT needs the
// device's logical block size; 4096 covers 512e and 4Kn devices).
const Align = 4096

var classes = []int{4 << 10, 64 << 10, 256 << 10, 1 << 20, 2<<20 + 4096, 4<<20 + 8192}

var pools = func() []*sync.Pool {
	ps := make([]*sync.Pool, len(classes))
	for i, c := range classes {
		size := c
		ps[i] = &sync.Pool{New: func() any { b := Aligned(size); return &b }}
	}
	return ps
}()

// Aligned allocates a zeroed buffer of n bytes whose first byte is
// Align-aligned.
func Aligned(n int) []byte {
	b := make([]byte, n+Align)
	off := int(uintptr(unsafe.Pointer(&b[0])) & (Align - 1))
	if off != 0 {
		off = Align - off
	}
	return b[off : off+n : off+n]
}

// IsAligned reports whether b starts on an Align boundary.
func IsAligned(b []byte) bool {
	return len(b) == 0 || uintptr(unsafe.Pointer(&b[0]))&(Align-1) == 0
}

// Get returns an aligned buffer of exactly n bytes (contents undefined).
// Buffers larger than the largest class are allocated and not pooled.
func Get(n int) []byte {
	for i, c := range classes {
		if n <= c {
			bp := pools[i].Get().(*[]byte)
			return (*bp)[:n]
		}
	}
	return Aligned(n)
}

// Put returns a buffer obtained from Get. Buffers of other origin are
// ignored unless their capacity is exactly a class size.
func Put(b []byte) {
	c := cap(b)
	for i, cl := range classes {
		if c == cl {
			b = b[:c]
			pools[i].Put(&b)
			return
		}
	}
}
