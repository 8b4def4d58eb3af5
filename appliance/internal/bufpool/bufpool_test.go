// The pool's sizes, alignment and refusal of foreign buffers (reuse and
// allocation counts: alloc_test.go).

package bufpool

import (
	"testing"
	"unsafe"
)

// TestGetSizes: every buffer has the length asked for, starts aligned and
// has its class's capacity (the next power of two from 4 KiB); buffers
// beyond the largest class are exactly as large as asked.
func TestGetSizes(t *testing.T) {
	for _, tc := range []struct{ n, capacity int }{
		{0, 4 << 10}, {1, 4 << 10}, {4 << 10, 4 << 10}, {4<<10 + 1, 8 << 10},
		{64 << 10, 64 << 10}, {1 << 20, 1 << 20}, {2<<20 + 4096, 4 << 20},
		{4<<20 + 4096, 8 << 20}, {32 << 20, 32 << 20}, {32<<20 + 1, 32<<20 + 1},
	} {
		b := Get(tc.n)
		if len(b) != tc.n || cap(b) != tc.capacity || !IsAligned(b[:cap(b)]) {
			t.Errorf("Get(%d): len %d cap %d aligned %v, want len %d cap %d aligned", tc.n, len(b), cap(b), IsAligned(b[:cap(b)]), tc.n, tc.capacity)
		}
		Put(b)
	}
}

// TestPutRefusesForeign: a buffer of a class's capacity that is not
// aligned never comes back from Get.
func TestPutRefusesForeign(t *testing.T) {
	raw := Aligned(2 * Align)
	bad := raw[1 : 1+Align : 1+Align]
	for range 100 {
		Put(bad)
	}
	for range 100 {
		b := Get(Align)
		if !IsAligned(b) {
			t.Fatal("Get returned an unaligned buffer that Put should have refused")
		}
		if unsafe.SliceData(b) == unsafe.SliceData(bad) {
			t.Fatal("Get returned the foreign buffer")
		}
	}
}

// TestAligned: Aligned's buffers start on an Align boundary, are zeroed
// and have exactly the capacity asked for.
func TestAligned(t *testing.T) {
	for _, n := range []int{1, 512, 4096, 100000} {
		b := Aligned(n)
		if len(b) != n || cap(b) != n || !IsAligned(b) {
			t.Fatalf("Aligned(%d): len %d cap %d aligned %v", n, len(b), cap(b), IsAligned(b))
		}
		for _, x := range b {
			if x != 0 {
				t.Fatalf("Aligned(%d) is not zeroed", n)
			}
		}
	}
}
