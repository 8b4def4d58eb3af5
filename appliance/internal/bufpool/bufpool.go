// Package bufpool owns the data path's reusable I/O buffers: 4 KiB-aligned
// (so they can be used for O_DIRECT) and pooled by size class, so that a
// request does not allocate its payload. Every frontend (NBD, TCMU), the
// wire server and the SDS take their buffers here.
package bufpool

import (
	"math/bits"
	"sync"
	"unsafe"
)

// Align is the memory alignment of every buffer (O_DIRECT needs the
// device's logical block size; 4096 covers 512e and 4Kn devices).
const Align = 4096

// Size classes are the powers of two from 4 KiB (minClassShift) to 32 MiB
// (maxClassShift): NBD's largest payload (32 MiB) and the wire's (4 MiB +
// 4 KiB) are pooled, and a buffer is never more than twice the size asked
// for. Larger buffers are allocated and dropped.
const (
	minClassShift = 12
	maxClassShift = 25
)

// pools holds, per class, the address of the first byte of free buffers
// (an unsafe.Pointer, which an interface holds without allocating, where a
// *[]byte made in Put would cost an allocation per Put). The pointer keeps
// the whole allocation alive; Get rebuilds the slice from the class size.
var pools [maxClassShift - minClassShift + 1]sync.Pool

// class returns the size class of a buffer of n bytes (len(pools) or more:
// too big to pool).
func class(n int) int {
	if n <= 1<<minClassShift {
		return 0
	}
	return bits.Len(uint(n-1)) - minClassShift
}

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

// Get returns an aligned buffer of exactly n bytes (contents undefined:
// a recycled buffer keeps its old bytes; callers that need zeros clear).
// Buffers larger than the largest class are allocated and not pooled.
func Get(n int) []byte {
	c := class(n)
	if c >= len(pools) {
		return Aligned(n)
	}
	size := 1 << (c + minClassShift)
	if p, ok := pools[c].Get().(unsafe.Pointer); ok {
		return unsafe.Slice((*byte)(p), size)[:n]
	}
	return Aligned(size)[:n]
}

// Put returns a buffer obtained from Get; the caller must not touch it
// after. Buffers of other origin are ignored unless their capacity is
// exactly a class size and they are aligned.
func Put(b []byte) {
	c := class(cap(b))
	if c >= len(pools) || cap(b) != 1<<(c+minClassShift) {
		return
	}
	b = b[:cap(b)]
	if !IsAligned(b) {
		return
	}
	pools[c].Put(unsafe.Pointer(unsafe.SliceData(b)))
}
