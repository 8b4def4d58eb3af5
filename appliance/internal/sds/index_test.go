package sds

import (
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// Concurrent first writes to one chunk must share one slot.
func TestAllocateIsIdempotentUnderRace(t *testing.T) {
	x, err := openIndex(filepath.Join(t.TempDir(), "index.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer x.close()
	d := &device{id: "dev1", super: &superblock{Slots: 1024, DataOffset: DataOffset, Created: time.Now()}}
	if err := x.attach(d); err != nil {
		t.Fatal(err)
	}
	for c := uint64(0); c < 50; c++ {
		k := chunkKey{7, c}
		var wg sync.WaitGroup
		locs := make([]location, 8)
		for i := range locs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				l, err := x.allocate(k, d)
				if err != nil {
					t.Error(err)
				}
				locs[i] = l
			}()
		}
		wg.Wait()
		for _, l := range locs {
			if l.slot != locs[0].slot {
				t.Fatalf("chunk %d got slots %d and %d", c, locs[0].slot, l.slot)
			}
		}
	}
	if used, _ := x.usage("dev1"); used != 50 {
		t.Fatalf("%d slots used for 50 chunks", used)
	}
}
