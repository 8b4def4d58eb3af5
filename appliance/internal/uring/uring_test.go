//go:build linux

package uring

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/cairn-storage/cairn/appliance/internal/bufpool"

	"golang.org/x/sys/unix"
)

func newRing(t *testing.T, f *os.File) *Ring {
	t.Helper()
	r, err := New(f)
	if err != nil {
		t.Fatalf("New: %v (io_uring is needed by the SDS's device I/O on this kernel)", err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// Many goroutines write distinct blocks through the ring at once; every
// block reads back the same with pread and through the ring, with O_DIRECT
// (the SDS's device mode) on the test's filesystem.
func TestConcurrentDirectIO(t *testing.T) {
	path := filepath.Join(t.TempDir(), "dev")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|unix.O_DIRECT, 0o600)
	if err != nil {
		t.Skipf("no O_DIRECT here: %v", err)
	}
	defer f.Close()
	const blocks, bs = 512, 4096
	if err := f.Truncate(blocks * bs); err != nil {
		t.Fatal(err)
	}
	r := newRing(t, f)
	want := make([][]byte, blocks)
	var wg sync.WaitGroup
	errs := make(chan error, blocks)
	for i := range blocks {
		want[i] = bufpool.Aligned(bs)
		for j := range want[i] {
			want[i][j] = byte(rand.IntN(256))
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if n, err := r.WriteAt(want[i], int64(i)*bs); err != nil || n != bs {
				errs <- errors.Join(err, errors.New("short write"))
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for i := range blocks {
		got := bufpool.Aligned(bs)
		if _, err := f.ReadAt(got, int64(i)*bs); err != nil || !bytes.Equal(got, want[i]) {
			t.Fatalf("block %d by pread: err %v, equal %v", i, err, bytes.Equal(got, want[i]))
		}
		clear(got)
		if n, err := r.ReadAt(got, int64(i)*bs); err != nil || n != bs || !bytes.Equal(got, want[i]) {
			t.Fatalf("block %d by ring: n %d, err %v, equal %v", i, n, err, bytes.Equal(got, want[i]))
		}
	}
}

// The kernel's errors come back as errno values, and reads past the end as
// io.EOF, as (*os.File).ReadAt gives them.
func TestErrors(t *testing.T) {
	dir := t.TempDir()
	ro, err := os.OpenFile(filepath.Join(dir, "ro"), os.O_RDONLY|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	r := newRing(t, ro)
	if _, err := r.WriteAt([]byte("x"), 0); !errors.Is(err, unix.EBADF) {
		t.Fatalf("write to a read-only file: %v, want EBADF", err)
	}
	b := make([]byte, 10)
	if n, err := r.ReadAt(b, 0); n != 0 || err == nil || err.Error() != "EOF" {
		t.Fatalf("read of an empty file: %d, %v, want 0, EOF", n, err)
	}
	if err := os.WriteFile(ro.Name(), []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	if n, err := r.ReadAt(b, 0); n != 5 || err == nil || string(b[:5]) != "hello" {
		t.Fatalf("short read: %d %q %v, want 5 \"hello\" EOF", n, b[:n], err)
	}
	// Direct I/O with a misaligned buffer is refused by the kernel (EINVAL),
	// not silently done.
	d, err := os.OpenFile(filepath.Join(dir, "d"), os.O_RDWR|os.O_CREATE|unix.O_DIRECT, 0o600)
	if err != nil {
		t.Skipf("no O_DIRECT here: %v", err)
	}
	defer d.Close()
	rd := newRing(t, d)
	mis := bufpool.Aligned(8192)[1:4097]
	if _, err := rd.WriteAt(mis, 0); !errors.Is(err, unix.EINVAL) {
		t.Fatalf("misaligned direct write: %v, want EINVAL", err)
	}
}

// After Close, I/O fails at once with ErrClosed; Close twice is harmless.
func TestClose(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := New(f)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.WriteAt([]byte("abc"), 0); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := r.WriteAt([]byte("abc"), 0); !errors.Is(err, ErrClosed) {
		t.Fatalf("write after close: %v, want ErrClosed", err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
}
