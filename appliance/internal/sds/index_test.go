package sds

import (
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// tempIndex opens a fresh index, closed at the end of the test.
func tempIndex(t *testing.T) *index {
	t.Helper()
	x, err := openIndex(filepath.Join(t.TempDir(), "index.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { x.close() })
	return x
}

// Concurrent first writes to one chunk must share one slot.
func TestAllocateIsIdempotentUnderRace(t *testing.T) {
	x := tempIndex(t)
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

// The index must be synced at every commit: an allocation is acknowledged
// with its write, and ESXi does not flush (index.go). A guard against
// NoSync coming back for speed, which would make the index durable only at
// the next FLUSH.
func TestIndexSyncsEveryCommit(t *testing.T) {
	x := tempIndex(t)
	if x.db.NoSync {
		t.Fatal("the chunk index is opened with NoSync: allocations would reach stable storage only at a flush")
	}
}

// Group commit: concurrent changes all land, and one that fails fails
// alone (its batch is rolled back and the others committed on their own).
func TestIndexCommitGroupsAndIsolatesFailures(t *testing.T) {
	x := tempIndex(t)
	refused := errors.New("refused")
	var wg sync.WaitGroup
	errs := make([]error, 64)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = x.commit(func(tx *bolt.Tx) error {
				if i == 13 {
					return refused
				}
				return tx.Bucket(bucketChunks).Put(chunkKey{9, uint64(i)}.bytes(), []byte{byte(i)})
			})
		}()
	}
	wg.Wait()
	err := x.db.View(func(tx *bolt.Tx) error {
		for i, e := range errs {
			v := tx.Bucket(bucketChunks).Get(chunkKey{9, uint64(i)}.bytes())
			switch {
			case i == 13 && !errors.Is(e, refused):
				t.Errorf("change 13: err %v, want the refusal", e)
			case i == 13 && v != nil:
				t.Errorf("change 13 was committed")
			case i != 13 && e != nil:
				t.Errorf("change %d failed with its neighbour: %v", i, e)
			case i != 13 && (len(v) != 1 || v[0] != byte(i)):
				t.Errorf("change %d not committed: %v", i, v)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// The last change is answered just before the loop sees nothing left.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		x.cmu.Lock()
		running, pending := x.committing, len(x.pending)
		x.cmu.Unlock()
		if !running && pending == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("commit loop still running (%v) or changes pending (%d) 5 s after the last answer", running, pending)
		}
	}
}
