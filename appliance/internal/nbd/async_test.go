package nbd

import (
	"context"
	"testing"

	"github.com/cairn-storage/cairn/appliance/internal/blockdev"
)

// asyncSpy is a spyVolume that also reads the way the Cairn client library
// does: ReadAtAsync answers from another goroutine.
type asyncSpy struct {
	*spyVolume
	async int
	idle  map[int]func()
	next  int
}

func (a *asyncSpy) FlushHeld() {}

func (a *asyncSpy) ReadAtAsync(ctx context.Context, p []byte, off int64, hold bool, done func(error)) {
	a.mu.Lock()
	a.async++
	a.mu.Unlock()
	go func() {
		done(a.spyVolume.ReadAt(ctx, p, off))
		a.idleAll()
	}()
}

func (a *asyncSpy) WriteAtAsync(ctx context.Context, p []byte, off int64, flags blockdev.WriteFlags, hold bool, done func(error)) {
	a.mu.Lock()
	a.async++
	a.mu.Unlock()
	go func() {
		done(a.spyVolume.WriteAt(ctx, p, off, flags))
		a.idleAll()
	}()
}

func (a *asyncSpy) idleAll() {
	a.mu.Lock()
	fns := make([]func(), 0, len(a.idle))
	for _, f := range a.idle {
		fns = append(fns, f)
	}
	a.mu.Unlock()
	for _, f := range fns {
		f() // replies were held until now
	}
}

func (a *asyncSpy) OnIdle(f func()) func() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.idle == nil {
		a.idle = map[int]func(){}
	}
	a.next++
	id := a.next
	a.idle[id] = f
	return func() {
		a.mu.Lock()
		delete(a.idle, id)
		a.mu.Unlock()
	}
}

// TestAsyncReads: writes and reads through the async paths are answered out of order,
// with the volume's errors mapped, and the reads really took that path.
func TestAsyncReads(t *testing.T) {
	vol := &asyncSpy{spyVolume: newSpy("vol", testSize)}
	data := make([]byte, 8192)
	for i := range data {
		data[i] = byte(i * 7)
	}
	_, addr := startServer(t, newResolver(vol))
	rc, _ := connect(t, addr, "vol")
	if code, _ := rc.do(cmdWrite, cmdFlagFUA, 0, 8192, data); code != 0 {
		t.Fatalf("write: %s", describe(code))
	}
	vol.mu.Lock()
	if got := vol.writeFlags; len(got) != 1 || got[0] != blockdev.FUA {
		t.Fatalf("write flags %v, want one FUA write", got)
	}
	release := make(chan struct{})
	vol.gate = func(off int64) {
		if off == 0 {
			<-release
		}
	}
	vol.mu.Unlock()
	rc.request(cmdRead, 0, 1, 0, 4096, nil)
	rc.request(cmdRead, 0, 2, 4096+100, 1000, nil) // unaligned: the covering sectors are read
	if code, ck := rc.reply(); code != 0 || ck != 2 {
		t.Fatalf("first reply: code %d cookie %d, want cookie 2", code, ck)
	}
	if got := rc.read(1000); string(got) != string(data[4196:5196]) {
		t.Fatal("unaligned read: wrong data")
	}
	close(release)
	if code, ck := rc.reply(); code != 0 || ck != 1 {
		t.Fatalf("second reply: code %d cookie %d", code, ck)
	}
	if got := rc.read(4096); string(got) != string(data[:4096]) {
		t.Fatal("read: wrong data")
	}
	vol.mu.Lock()
	vol.gate, vol.failWith = nil, blockdev.ErrUnavailable
	vol.mu.Unlock()
	if code, _ := rc.do(cmdRead, 0, 0, 4096, nil); code != errIO {
		t.Fatalf("failing read: %s, want EIO", describe(code))
	}
	if code, _ := rc.do(cmdWrite, 0, 0, 4096, data[:4096]); code != errIO {
		t.Fatalf("failing write: %s, want EIO", describe(code))
	}
	vol.mu.Lock()
	defer vol.mu.Unlock()
	if len(vol.idle) != 1 {
		t.Fatalf("%d idle functions registered, want 1 (the connection's)", len(vol.idle))
	}
	if vol.async != 5 {
		t.Fatalf("%d reads and writes took the async path, want 5", vol.async)
	}
}
