package nbd

import (
	"math/bits"
	"sync"
)

// Payload buffers come from one sync.Pool per power-of-two size class, so a
// steady stream of requests allocates nothing on the data path. Classes run
// from 4 KiB to maxPayload; larger buffers (only an unaligned read of nearly
// maxPayload needs one) are allocated and dropped.
const (
	minClassShift = 12
	maxClassShift = 25
)

var bufPools [maxClassShift - minClassShift + 1]sync.Pool

func sizeClass(n int) int {
	if n <= 1<<minClassShift {
		return 0
	}
	return bits.Len(uint(n-1)) - minClassShift
}

// getBuf returns a buffer of length n; give it back with putBuf.
func getBuf(n int) *[]byte {
	c := sizeClass(n)
	if c >= len(bufPools) {
		b := make([]byte, n)
		return &b
	}
	if v := bufPools[c].Get(); v != nil {
		b := v.(*[]byte)
		*b = (*b)[:n]
		return b
	}
	b := make([]byte, n, 1<<(c+minClassShift))
	return &b
}

// putBuf recycles a buffer from getBuf. The caller must not touch it after.
func putBuf(b *[]byte) {
	c := sizeClass(cap(*b))
	if c >= len(bufPools) || cap(*b) != 1<<(c+minClassShift) {
		return
	}
	bufPools[c].Put(b)
}
