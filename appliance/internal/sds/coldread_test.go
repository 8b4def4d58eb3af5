package sds_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cairn-storage/cairn/appliance/internal/testcluster"
)

// TestColdReads: small reads of data the SDSs' page cache does not hold
// (written with O_DIRECT, then its pages dropped) are served off the
// connection's reader (the inline attempt answers WouldBlock) and come back
// whole, many at once and one at a time, and so does a second pass from the
// cache.
func TestColdReads(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{SDSs: 2, DevicesPerSDS: 1, DeviceSize: 64 * MiB, PGCount: 8})
	vol := c.CreateVolume("v", 8*MiB, true)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	data := make([]byte, 8*MiB)
	if _, err := rand.Read(data); err != nil {
		t.Fatal(err)
	}
	if err := vol.WriteAt(ctx, data, 0, 0); err != nil {
		t.Fatal(err)
	}
	drop := func() {
		for _, s := range c.SDSs {
			f, err := os.Open(s.Devices[0])
			if err != nil {
				t.Fatal(err)
			}
			err = unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
			f.Close()
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	for pass := 0; pass < 3; pass++ {
		if pass != 2 {
			drop() // passes 0 and 1 cold, pass 2 from the cache pass 1 filled
		}
		const n = 64 // 4 KiB reads spread over the volume, all in flight at once
		errs := make(chan error, n)
		bufs := make([][]byte, n)
		for i := range bufs {
			bufs[i] = make([]byte, 4096)
			off := int64(i) * (int64(len(data)) / n)
			go func(b []byte, off int64) { errs <- vol.ReadAt(ctx, b, off) }(bufs[i], off)
		}
		for range bufs {
			if err := <-errs; err != nil {
				t.Fatalf("pass %d: %v", pass, err)
			}
		}
		for i, b := range bufs {
			off := int64(i) * (int64(len(data)) / n)
			if !bytes.Equal(b, data[off:off+4096]) {
				t.Fatalf("pass %d: the read at %d differs from what was written", pass, off)
			}
		}
		// and one at a time (queue depth 1: the inline attempt, then the goroutine)
		b := make([]byte, 64<<10)
		if err := vol.ReadAt(ctx, b, 3*MiB+4096); err != nil || !bytes.Equal(b, data[3*MiB+4096:3*MiB+4096+len(b)]) {
			t.Fatalf("pass %d: single read: %v", pass, err)
		}
	}
}
