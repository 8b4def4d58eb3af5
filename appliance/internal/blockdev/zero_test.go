package blockdev

import "testing"

func TestAllZero(t *testing.T) {
	for n := 0; n <= 40; n++ {
		b := make([]byte, n)
		if !AllZero(b) {
			t.Fatalf("len %d: zero buffer reported non-zero", n)
		}
		for i := range n {
			b[i] = 1
			if AllZero(b) {
				t.Fatalf("len %d: byte %d set but reported zero", n, i)
			}
			b[i] = 0
		}
	}
}
