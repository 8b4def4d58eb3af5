package sds

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"sync"

	bolt "go.etcd.io/bbolt"
)

// Index on-disk format, version 1 (bbolt file <state>/index.db).
//
//	bucket "meta":   "version" -> "1"
//	bucket "chunks": key   = volume id (u64) | chunk index (u64), big-endian
//	                 value = slot (u64, big-endian) | device id (ASCII)
//
// Every change is synced before it returns (bbolt's fdatasync at commit;
// the changes that arrive while one commits share the next: commit): a write
// that allocates a chunk is acknowledged only once the index that finds
// its slot is on stable storage. Flush/FUA alone is not enough for it:
// ESXi takes a write its storage acknowledged as kept and does not count
// on SYNCHRONIZE CACHE, so with the index synced only at a flush a power
// cut of both copies' hosts could drop acknowledged chunks (they would
// read as zeros). Overwrites of allocated chunks do not touch the index.
// A slot is zeroed when it is freed, so an allocated slot never shows a
// previous chunk's data.

var (
	bucketMeta   = []byte("meta")
	bucketChunks = []byte("chunks")
)

type chunkKey struct{ vol, chunk uint64 }

func (k chunkKey) bytes() []byte {
	b := make([]byte, 16)
	binary.BigEndian.PutUint64(b, k.vol)
	binary.BigEndian.PutUint64(b[8:], k.chunk)
	return b
}

type location struct {
	dev  *device
	slot uint64
}

// slotMap tracks free slots of one device.
type slotMap struct {
	words []uint64 // bit set = used
	n     uint64
	used  uint64
	hint  uint64
}

func newSlotMap(n uint64) *slotMap { return &slotMap{words: make([]uint64, (n+63)/64), n: n} }

func (m *slotMap) set(s uint64) {
	if m.words[s/64]&(1<<(s%64)) == 0 {
		m.words[s/64] |= 1 << (s % 64)
		m.used++
	}
}

func (m *slotMap) clear(s uint64) {
	if m.words[s/64]&(1<<(s%64)) != 0 {
		m.words[s/64] &^= 1 << (s % 64)
		m.used--
	}
}

func (m *slotMap) alloc() (uint64, bool) {
	if m.used >= m.n {
		return 0, false
	}
	nw := uint64(len(m.words))
	for i := uint64(0); i < nw; i++ {
		w := (m.hint/64 + i) % nw
		free := ^m.words[w]
		if free == 0 {
			continue
		}
		s := w*64 + uint64(bits.TrailingZeros64(free))
		if s >= m.n {
			continue
		}
		m.set(s)
		m.hint = s + 1
		return s, true
	}
	return 0, false
}

// index maps chunks to slots, in memory with a bbolt copy.
type index struct {
	db    *bolt.DB
	mu    sync.RWMutex
	locs  map[chunkKey]location
	slots map[string]*slotMap // by device id

	cmu        sync.Mutex
	pending    []*indexChange // waiting for the next commit
	committing bool           // a commitLoop runs
}

// indexChange is one caller's change, waiting for its commit.
type indexChange struct {
	fn   func(*bolt.Tx) error
	done chan error
}

// commit applies fn in a synced transaction and returns once it is on
// stable storage. Changes that arrive while a commit is in progress are
// committed together right after it (group commit): a lone change is
// committed at once, and a burst of first writes (a fill, a rebuild) shares
// the fdatasyncs. bbolt's own db.Batch waits up to 10 ms for company
// first: that wait was the latency of every first write to a chunk.
func (x *index) commit(fn func(*bolt.Tx) error) error {
	c := &indexChange{fn: fn, done: make(chan error, 1)}
	x.cmu.Lock()
	x.pending = append(x.pending, c)
	start := !x.committing
	x.committing = true
	x.cmu.Unlock()
	if start {
		go x.commitLoop()
	}
	return <-c.done
}

// commitLoop commits the pending changes, a batch at a time, until none
// are left. A change that fails fails alone: the batch is rolled back and
// each of its changes committed on its own.
func (x *index) commitLoop() {
	for {
		x.cmu.Lock()
		batch := x.pending
		x.pending = nil
		if len(batch) == 0 {
			x.committing = false
			x.cmu.Unlock()
			return
		}
		x.cmu.Unlock()
		err := x.db.Update(func(tx *bolt.Tx) error {
			for _, c := range batch {
				if err := c.fn(tx); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil && len(batch) > 1 {
			for _, c := range batch { // each on its own: the failing one fails alone
				c.done <- x.db.Update(c.fn)
			}
			continue
		}
		for _, c := range batch {
			c.done <- err
		}
	}
}

func openIndex(path string) (*index, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{NoFreelistSync: true})
	if err != nil {
		return nil, fmt.Errorf("open chunk index %s: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		m, err := tx.CreateBucketIfNotExists(bucketMeta)
		if err != nil {
			return err
		}
		if v := m.Get([]byte("version")); v != nil && string(v) != "1" {
			return fmt.Errorf("chunk index format version %s is not supported: upgrade Cairn", v)
		}
		if err := m.Put([]byte("version"), []byte("1")); err != nil {
			return err
		}
		_, err = tx.CreateBucketIfNotExists(bucketChunks)
		return err
	})
	if err != nil {
		db.Close()
		return nil, err
	}
	return &index{db: db, locs: map[chunkKey]location{}, slots: map[string]*slotMap{}}, nil
}

// attach registers an open device and loads its chunks from the index.
func (x *index) attach(d *device) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	sm := newSlotMap(d.super.Slots)
	x.slots[d.id] = sm
	return x.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketChunks).ForEach(func(k, v []byte) error {
			if len(k) != 16 || len(v) < 8 || string(v[8:]) != d.id {
				return nil
			}
			slot := binary.BigEndian.Uint64(v)
			if slot >= d.super.Slots {
				return fmt.Errorf("chunk index names slot %d beyond device %s's %d slots: the index does not belong to this device", slot, d.path, d.super.Slots)
			}
			ck := chunkKey{binary.BigEndian.Uint64(k), binary.BigEndian.Uint64(k[8:])}
			x.locs[ck] = location{dev: d, slot: slot}
			sm.set(slot)
			return nil
		})
	})
}

func (x *index) lookup(k chunkKey) (location, bool) {
	x.mu.RLock()
	l, ok := x.locs[k]
	x.mu.RUnlock()
	return l, ok
}

// allocate gives chunk k a slot on d (the caller holds k's lock and found
// it unallocated). The slot reads as zeros.
//
// Writes to disjoint ranges of one chunk run concurrently (range locks), so
// two of them may both find the chunk unallocated: the second must get the
// slot the first allocated, or the first write would land in an orphaned
// slot and be lost.
func (x *index) allocate(k chunkKey, d *device) (location, error) {
	x.mu.Lock()
	if loc, ok := x.locs[k]; ok {
		x.mu.Unlock()
		return loc, nil
	}
	sm := x.slots[d.id]
	if sm == nil {
		x.mu.Unlock()
		return location{}, fmt.Errorf("device %s is not attached", d.id)
	}
	slot, ok := sm.alloc()
	if !ok {
		x.mu.Unlock()
		return location{}, errNoSpace
	}
	loc := location{dev: d, slot: slot}
	x.locs[k] = loc
	x.mu.Unlock()
	v := make([]byte, 8+len(d.id))
	binary.BigEndian.PutUint64(v, slot)
	copy(v[8:], d.id)
	err := x.commit(func(tx *bolt.Tx) error { return tx.Bucket(bucketChunks).Put(k.bytes(), v) })
	if err != nil {
		x.mu.Lock()
		delete(x.locs, k)
		sm.clear(slot)
		x.mu.Unlock()
		return location{}, fmt.Errorf("record chunk allocation: %w", err)
	}
	return loc, nil
}

// free releases chunk k's slot (the caller holds k's lock and zeroed it).
func (x *index) free(k chunkKey) error {
	x.mu.Lock()
	loc, ok := x.locs[k]
	if !ok {
		x.mu.Unlock()
		return nil
	}
	delete(x.locs, k)
	x.mu.Unlock()
	err := x.commit(func(tx *bolt.Tx) error { return tx.Bucket(bucketChunks).Delete(k.bytes()) })
	if err != nil {
		return fmt.Errorf("record chunk release: %w", err)
	}
	x.mu.Lock()
	x.slots[loc.dev.id].clear(loc.slot)
	x.mu.Unlock()
	return nil
}

// usage returns used and total slots of a device.
func (x *index) usage(devID string) (used, total uint64) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	if sm := x.slots[devID]; sm != nil {
		return sm.used, sm.n
	}
	return 0, 0
}

// volumeChunks counts the allocated chunks of each volume held here (one
// pass over the in-memory index, for the statistics publication).
func (x *index) volumeChunks() map[uint64]int64 {
	x.mu.RLock()
	defer x.mu.RUnlock()
	out := map[uint64]int64{}
	for k := range x.locs {
		out[k.vol]++
	}
	return out
}

// chunks returns the keys of every allocated chunk.
func (x *index) chunks() []chunkKey {
	x.mu.RLock()
	defer x.mu.RUnlock()
	out := make([]chunkKey, 0, len(x.locs))
	for k := range x.locs {
		out = append(out, k)
	}
	return out
}

func (x *index) close() error { return x.db.Close() }

// forget drops chunk k's location on a failed device: the device takes no
// more I/O, so its slot is neither zeroed nor reused; the chunk is then
// absent here until it is written or filled again (on a healthy device).
func (x *index) forget(k chunkKey) error {
	x.mu.Lock()
	delete(x.locs, k)
	x.mu.Unlock()
	return x.commit(func(tx *bolt.Tx) error { return tx.Bucket(bucketChunks).Delete(k.bytes()) })
}

// detach drops a device the model no longer has (deleted, or removed after
// its drain): its slot map and the locations of any chunk left on it, in
// memory and on disk. It returns how many chunks it dropped (0 after a
// drain: the MDM moved every copy first).
func (x *index) detach(devID string) (int, error) {
	x.mu.Lock()
	var gone []chunkKey
	for k, l := range x.locs {
		if l.dev.id == devID {
			gone = append(gone, k)
			delete(x.locs, k)
		}
	}
	delete(x.slots, devID)
	x.mu.Unlock()
	if len(gone) == 0 {
		return 0, nil
	}
	return len(gone), x.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketChunks)
		for _, k := range gone {
			if err := b.Delete(k.bytes()); err != nil {
				return err
			}
		}
		return nil
	})
}
