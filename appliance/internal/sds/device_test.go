package sds

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/cairn-storage/cairn/appliance/internal/bufpool"
)

// openTestDevice opens a 4 MiB device file in a temporary directory.
func openTestDevice(t *testing.T, readCache bool) *device {
	t.Helper()
	path := filepath.Join(t.TempDir(), "dev.img")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, 4<<20); err != nil {
		t.Fatal(err)
	}
	d, err := openDevice(path, readCache)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.close() })
	return d
}

// A read that may not wait (the connection reader's) is answered from the
// page cache when it holds the range, and refused with errWouldBlock when
// it does not (or when no descriptor reads through it), never by waiting
// for the device; a read that may wait fills the cache.
func TestReadCachedNowait(t *testing.T) {
	d := openTestDevice(t, true)
	if d.rc == nil {
		t.Skip("the test directory's file system takes no O_DIRECT (tmpfs?): no separate read cache to test")
	}
	const off = 1 << 20
	data := bufpool.Aligned(8192)
	for i := range data {
		data[i] = byte(i*7 + 1)
	}
	if err := d.writeAt(data, off); err != nil { // O_DIRECT: the cache holds none of it
		t.Fatal(err)
	}
	if err := unix.Fadvise(int(d.rc.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(data))
	err := d.readCachedAt(got, off, true)
	var st unix.Statfs_t
	_ = unix.Statfs(d.path, &st)
	switch {
	case err == nil && d.noNowait.Load():
		t.Skip("RWF_NOWAIT is not supported here: reads wait, as before")
	default:
		nowaitOutcome(t, "an uncached range", err, got, data, st.Type)
	}
	if err := d.readCachedAt(got, off, false); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read that may wait: %v, data equal %v", err, bytes.Equal(got, data))
	}
	clear(got)
	if err := d.readCachedAt(got, off, true); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("nowait read of a cached range: %v, data equal %v", err, bytes.Equal(got, data))
	}
	// Half cached, half not: refused, not a short answer.
	if err := unix.Fadvise(int(d.rc.Fd()), off+4096, 4096, unix.FADV_DONTNEED); err != nil {
		t.Fatal(err)
	}
	clear(got)
	nowaitOutcome(t, "a half-cached range", d.readCachedAt(got, off, true), got, data, st.Type)

	// Without the read cache every read goes to the device: a read that
	// may not wait is always refused, one that may wait works.
	direct := openTestDevice(t, false)
	if direct.cached != nil {
		t.Fatal("a device without the read cache has a page-cache descriptor")
	}
	if err := direct.writeAt(data, off); err != nil {
		t.Fatal(err)
	}
	if err := direct.readCachedAt(got, off, true); !errors.Is(err, errWouldBlock) {
		t.Fatalf("nowait read without the read cache: %v, want errWouldBlock", err)
	}
	clear(got)
	if err := direct.readCachedAt(got, off, false); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read without the read cache: %v, data equal %v", err, bytes.Equal(got, data))
	}
}

// nowaitOutcome checks a nowait read of a range the page cache did not
// hold: refused with errWouldBlock, or, when the read-ahead the kernel
// starts for it (preadv2 RWF_NOWAIT promises not to wait, not to refuse)
// finished inside the call, as on a device that completes I/O as it is
// submitted, the whole range with the right data. Never a short answer,
// never other bytes, never another error.
func nowaitOutcome(t *testing.T, what string, err error, got, want []byte, fsMagic int64) {
	t.Helper()
	switch {
	case errors.Is(err, errWouldBlock):
	case err == nil && bytes.Equal(got, want):
		t.Logf("nowait read of %s was answered: the kernel's read-ahead completed within the call (file system magic %#x)", what, fsMagic)
	case err == nil:
		t.Fatalf("nowait read of %s answered with other bytes (file system magic %#x)", what, fsMagic)
	default:
		t.Fatalf("nowait read of %s: %v, want errWouldBlock or the data (file system magic %#x)", what, err, fsMagic)
	}
}
