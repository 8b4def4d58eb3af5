package scsi

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/cairn-storage/cairn/appliance/internal/blockdev"
)

// asyncSpy makes the spy volume a blockdev.AsyncVolume: reads answer on
// another goroutine, or fail with failNext.
type asyncSpy struct {
	*spyVolume
	held, flushes int
	failNext      bool
}

func (a *asyncSpy) ReadAtAsync(ctx context.Context, p []byte, off int64, hold bool, done func(error)) {
	if hold {
		a.held++
	}
	if a.failNext {
		go done(errors.New("primary unreachable"))
		return
	}
	go func() { done(a.ReadAt(ctx, p, off)) }()
}

func (a *asyncSpy) FlushHeld() { a.flushes++ }

// OnIdle is never called by the SCSI layer (TCMU writes each completion as
// it comes); the spy has it to be a blockdev.AsyncVolume.
func (a *asyncSpy) OnIdle(func()) func() { return func() {} }

func (a *asyncSpy) WriteAtAsync(ctx context.Context, p []byte, off int64, f blockdev.WriteFlags, hold bool, done func(error)) {
	if hold {
		a.held++
	}
	go func() { done(a.WriteAt(ctx, p, off, f)) }()
}

// TestStartWrite: a started WRITE lands like Execute's (FUA passed on);
// a write with less data than its CDB names, or any other command, is not
// started.
func TestStartWrite(t *testing.T) {
	a := &asyncSpy{spyVolume: newSpy(1, testVolumeSize)}
	l := NewLUN(a, Options{})
	data := bytes.Repeat([]byte("w-async!"), 2*BlockSize/8)
	ch := make(chan bool, 1)
	cdb := cdb10(0x2a, 0x08, 200, 2) // FUA
	if !l.StartWrite(context.Background(), cdb, data, true, func(r Response, ok bool) { ch <- ok && r.Status == StatusGood }) {
		t.Fatal("WRITE(10) not started")
	}
	if !<-ch {
		t.Fatal("started write failed")
	}
	if r := run(l, cdb10(0x28, 0, 200, 2), nil, 2*BlockSize); !bytes.Equal(r.data, data) {
		t.Error("read back differs from the started write")
	}
	a.spyVolume.mu.Lock()
	flags := a.flags
	a.spyVolume.mu.Unlock()
	if len(flags) == 0 || flags[len(flags)-1]&blockdev.FUA == 0 {
		t.Errorf("FUA not passed on: %v", flags)
	}
	nop := func(Response, bool) { t.Error("done called for a command not started") }
	if l.StartWrite(context.Background(), cdb10(0x2a, 0, 200, 2), data[:BlockSize], true, nop) {
		t.Error("a write with half its data was started")
	}
	if l.StartWrite(context.Background(), cdb10(0x28, 0, 200, 2), nil, true, nop) {
		t.Error("a READ was started as a write")
	}
}

func startRead(t *testing.T, l *LUN, cdb []byte, inLen int) (result, bool, bool) {
	t.Helper()
	in := make([]byte, inLen)
	type answer struct {
		r  Response
		ok bool
	}
	ch := make(chan answer, 1)
	if !l.StartRead(context.Background(), cdb, in, true, func(r Response, ok bool) { ch <- answer{r, ok} }) {
		return result{}, false, false
	}
	a := <-ch
	return result{a.r, in[:a.r.DataInLen]}, true, a.ok
}

// TestStartRead: a started READ returns what Execute returns; everything
// Execute would refuse or treat specially is not started; a failed read
// says so (the caller reruns it through Execute).
func TestStartRead(t *testing.T) {
	spy := newSpy(1, testVolumeSize)
	a := &asyncSpy{spyVolume: spy}
	l := NewLUN(a, Options{})
	data := bytes.Repeat([]byte("cairn-42"), 2*BlockSize/8)
	mustGood(t, run(l, cdb10(0x2a, 0, 100, 2), data, 0))
	for _, cdb := range [][]byte{cdb10(0x28, 0, 100, 2), cdb6(0x08, 100, 2), cdb16(0x88, 0, 100, 2)} {
		r, started, ok := startRead(t, l, cdb, 2*BlockSize)
		if !started || !ok || r.Status != StatusGood || !bytes.Equal(r.data, data) {
			t.Errorf("%x: started %v ok %v status %d, data equal %v", cdb, started, ok, r.Status, bytes.Equal(r.data, data))
		}
		if sync := run(l, cdb, nil, 2*BlockSize); !bytes.Equal(sync.data, r.data) {
			t.Errorf("%x: async and sync reads differ", cdb)
		}
	}
	l.FlushHeld()
	if a.held == 0 || a.flushes != 1 {
		t.Errorf("held %d reads, %d flushes", a.held, a.flushes)
	}
	notStarted := map[string][]byte{
		"write":              cdb10(0x2a, 0, 100, 1),
		"reserved bit":       cdb10(0x28, 0x01, 100, 1),
		"beyond the end":     cdb10(0x28, 0, testBlocks-1, 2),
		"zero blocks":        cdb10(0x28, 0, 100, 0),
		"short CDB":          {0x28, 0, 0},
		"inquiry":            {0x12, 0, 0, 0, 96, 0},
		"test unit ready":    {0x00, 0, 0, 0, 0, 0},
		"read capacity (16)": cdb16(0x9e, 0x10, 0, 32),
	}
	for name, cdb := range notStarted {
		if _, started, _ := startRead(t, l, cdb, 4*BlockSize); started {
			t.Errorf("%s (%x): started asynchronously", name, cdb)
		}
	}
	if _, started, _ := startRead(t, l, cdb10(0x28, 0, 100, 2), BlockSize+100); started {
		t.Errorf("a partial-block buffer was started asynchronously")
	}
	a.failNext = true
	if _, started, ok := startRead(t, l, cdb10(0x28, 0, 100, 2), 2*BlockSize); !started || ok {
		t.Errorf("failed read: started %v ok %v, want true false", started, ok)
	}
	// A volume without asynchronous reads: never started.
	if _, started, _ := startRead(t, NewLUN(spy, Options{}), cdb10(0x28, 0, 100, 2), 2*BlockSize); started {
		t.Errorf("started on a volume without ReadAtAsync")
	}
}

// FuzzStartIO feeds arbitrary CDBs and buffer sizes to StartRead and
// StartWrite: never a panic; when one starts, done runs once, and a started
// command's answer matches what Execute says for the same CDB (GOOD, and
// for a read the same data). Seeds: every supported command.
func FuzzStartIO(f *testing.F) {
	for _, s := range fuzzSeeds() {
		f.Add(s.cdb, s.dataOut, s.inLen)
	}
	f.Fuzz(func(t *testing.T, cdb, dataOut []byte, inLen uint16) {
		ctx := context.Background()
		a := &asyncSpy{spyVolume: newSpy(1, fuzzVolumeSize)}
		if err := a.WriteAt(ctx, bytes.Repeat([]byte{0x5A}, 16<<10), 0, 0); err != nil {
			t.Fatal(err)
		}
		l := NewLUN(a, Options{})
		in := make([]byte, inLen)
		ch := make(chan Response, 2)
		done := func(r Response, ok bool) {
			if !ok {
				t.Errorf("%x: started command failed on a healthy volume", cdb)
			}
			ch <- r
		}
		read := l.StartRead(ctx, cdb, in, false, done)
		write := !read && l.StartWrite(ctx, cdb, dataOut, false, done)
		if !read && !write {
			return
		}
		r := <-ch
		if r.Status != StatusGood {
			t.Fatalf("%x: started command answered status %d", cdb, r.Status)
		}
		sync := make([]byte, inLen)
		s := l.Execute(ctx, cdb, dataOut, sync)
		if s.Status != StatusGood || s.DataInLen != r.DataInLen || !bytes.Equal(sync[:s.DataInLen], in[:r.DataInLen]) {
			t.Fatalf("%x: started answer (status %d, %d bytes) differs from Execute's (status %d, %d bytes)", cdb, r.Status, r.DataInLen, s.Status, s.DataInLen)
		}
	})
}
