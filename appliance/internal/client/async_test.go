package client_test

import (
	"bytes"
	"context"
	"errors"
	"math/rand"
	"sync"
	"testing"

	"github.com/cairn-storage/cairn/appliance/internal/blockdev"
	"github.com/cairn-storage/cairn/appliance/internal/client"
	"github.com/cairn-storage/cairn/appliance/internal/testcluster"
)

// readAsync waits for one ReadAtAsync.
func readAsync(vol *client.Volume, p []byte, off int64) error {
	ch := make(chan error, 1)
	vol.ReadAtAsync(context.Background(), p, off, false, func(err error) { ch <- err })
	return <-ch
}

// TestReadAtAsync: the goroutine-free read path returns what was written
// (and WriteAtAsync writes what is read back),
// in and across chunks and concurrently, refuses reads past the end, and
// falls back to the retrying path when the primary is gone. The SDSs run
// with the read cache, so overwrites between reads also check that cached
// pages never outlive a write.
func TestReadAtAsync(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{})
	vol := c.CreateVolume("async", 8*MiB, true)
	ctx := context.Background()
	data := make([]byte, vol.Size())
	rng := rand.New(rand.NewSource(3))
	rng.Read(data)
	if err := vol.WriteAt(ctx, data, 0, 0); err != nil {
		t.Fatal(err)
	}

	check := func(round int) {
		var wg sync.WaitGroup
		errs := make(chan error, 64)
		for i := 0; i < 64; i++ {
			n := int64(rng.Intn(32)+1) * 512
			if i%8 == 0 {
				n = int64(rng.Intn(2*MiB/512)+1) * 512 // may cross chunks
			}
			off := int64(rng.Int63n((vol.Size()-n)/512)) * 512
			wg.Add(1)
			go func() {
				defer wg.Done()
				got := make([]byte, n)
				if err := readAsync(vol, got, off); err != nil {
					errs <- err
					return
				}
				if !bytes.Equal(got, data[off:off+n]) {
					errs <- errors.New("data differs")
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("round %d: %v", round, err)
		}
	}
	for round := 0; round < 5; round++ {
		check(round)
		if round == 2 {
			// Rewrite the volume through WriteAtAsync, many in flight,
			// in and across chunks, then check it through ReadAt.
			rng.Read(data)
			var wg sync.WaitGroup
			errs := make(chan error, 64)
			for off := int64(0); off < vol.Size(); {
				n := min(int64(rng.Intn(16)+1)*4096, vol.Size()-off)
				wg.Add(1)
				vol.WriteAtAsync(ctx, data[off:off+n], off, 0, true, func(err error) {
					if err != nil {
						errs <- err
					}
					wg.Done()
				})
				off += n
			}
			vol.FlushHeld() // the held ones, on every connection
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatalf("async write: %v", err)
			}
			got := make([]byte, vol.Size())
			if err := vol.ReadAt(ctx, got, 0); err != nil || !bytes.Equal(got, data) {
				t.Fatalf("after async writes: err %v, equal %v", err, bytes.Equal(got, data))
			}
		}
		// Overwrite pieces just read (cached on the SDSs), unaligned to
		// pages included, then read them again.
		for i := 0; i < 32; i++ {
			n := int64(rng.Intn(16)+1) * 512
			off := int64(rng.Int63n((vol.Size()-n)/512)) * 512
			rng.Read(data[off : off+n])
			if err := vol.WriteAt(ctx, data[off:off+n], off, 0); err != nil {
				t.Fatal(err)
			}
			got := make([]byte, n)
			if err := readAsync(vol, got, off); err != nil || !bytes.Equal(got, data[off:off+n]) {
				t.Fatalf("read after overwrite at %d+%d: err %v, equal %v", off, n, err, bytes.Equal(got, data[off:off+n]))
			}
		}
	}
	if err := readAsync(vol, make([]byte, 512), vol.Size()); !errors.Is(err, blockdev.ErrOutOfRange) {
		t.Fatalf("read past the end: %v, want ErrOutOfRange", err)
	}

	// Without one SDS the first attempts fail or find another primary: the
	// slow path retries until the map names a live one.
	c.StopSDS(0)
	check(99)
	c.StartSDS(0)
}
