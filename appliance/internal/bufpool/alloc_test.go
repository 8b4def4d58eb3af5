//go:build !race

// The race detector makes sync.Pool drop items at random, so reuse and
// allocation counts are only checked without it.

package bufpool

import (
	"testing"
	"unsafe"
)

// TestReuse: a buffer given back is what the next Get of its class
// returns (same goroutine, no GC in between: the pool's private slot).
func TestReuse(t *testing.T) {
	b := Get(100 << 10)
	Put(b)
	if c := Get(70 << 10); unsafe.SliceData(c) != unsafe.SliceData(b) {
		t.Fatal("Get after Put did not reuse the buffer of the same class")
	}
}

// TestNoAllocation: a Get and Put pair allocates nothing once the pool
// holds a buffer of the class (the data path's steady state).
func TestNoAllocation(t *testing.T) {
	for _, n := range []int{4 << 10, 64 << 10, 1 << 20} {
		Put(Get(n))
		if a := testing.AllocsPerRun(1000, func() { Put(Get(n)) }); a != 0 {
			t.Errorf("Get(%d)+Put: %v allocations, want 0", n, a)
		}
	}
}
