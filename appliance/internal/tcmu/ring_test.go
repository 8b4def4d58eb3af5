package tcmu

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"
)

// fakeKernel plays target_core_user's side of the ring, following the
// kernel's algorithm (queue_cmd_ring / tcmu_handle_completions): entries are
// appended at cmd_head with a PAD when the ring's end is too short, space is
// reclaimed only up to the last cleaned entry, and completions are matched by
// the cmd_id found in each entry between the last cleaned position and
// cmd_tail. Any protocol violation fails the test.
type fakeKernel struct {
	t        *testing.T
	mu       sync.Mutex
	mem      []byte
	cmdrOff  uint32
	cmdrSize uint32
	dataOff  uint32
	blk      uint32
	free     []bool // data blocks
	cleaned  uint32 // cmdr_last_cleaned
	nextID   uint16
	inflight map[uint16]*fakeCmd
	bell     chan struct{}
	stop     chan struct{}
	stopOnce sync.Once
	space    *sync.Cond
}

type fakeCmd struct {
	blocks  []uint32
	inLen   int
	done    chan fakeResult
	dataOut []byte
}

type fakeResult struct {
	status byte
	sense  []byte
	dataIn []byte
}

func newFakeKernel(t *testing.T, ringSize, dataBlocks uint32) *fakeKernel {
	const cmdrOff = 128
	k := &fakeKernel{
		t: t, cmdrOff: cmdrOff, cmdrSize: ringSize, blk: 4096,
		inflight: map[uint16]*fakeCmd{}, bell: make(chan struct{}, 1), stop: make(chan struct{}),
	}
	k.dataOff = (cmdrOff + ringSize + 4095) &^ 4095
	k.mem = make([]byte, k.dataOff+dataBlocks*k.blk)
	k.free = make([]bool, dataBlocks)
	for i := range k.free {
		k.free[i] = true
	}
	k.space = sync.NewCond(&k.mu)
	le.PutUint16(k.mem[mbVersion:], mailboxVersion)
	le.PutUint16(k.mem[mbFlags:], mbFlagOutOfOrder|mbFlagReadLen)
	le.PutUint32(k.mem[mbCmdrOff:], cmdrOff)
	le.PutUint32(k.mem[mbCmdrSize:], ringSize)
	return k
}

// The mailbox's head and tail are shared with the ring's goroutines: access
// them atomically, as the kernel does with smp_store_release / READ_ONCE.
func (k *fakeKernel) head() uint32 {
	return atomic.LoadUint32((*uint32)(unsafe.Pointer(&k.mem[mbCmdHead])))
}

func (k *fakeKernel) setHead(v uint32) {
	atomic.StoreUint32((*uint32)(unsafe.Pointer(&k.mem[mbCmdHead])), v)
}

func (k *fakeKernel) used() uint32 {
	return (k.head() + k.cmdrSize - k.cleaned) % k.cmdrSize
}

// submit queues a command, blocking while the ring or data area is full.
func (k *fakeKernel) submit(cdb, dataOut []byte, inLen int) chan fakeResult {
	k.mu.Lock()
	defer k.mu.Unlock()
	dataLen := max(len(dataOut), inLen)
	nblk := (dataLen + int(k.blk) - 1) / int(k.blk)
	// iovecs: contiguous free blocks merge, like the kernel's new_block_to_iov.
	var blocks []uint32
	for {
		blocks = blocks[:0]
		for i := range k.free {
			if len(blocks) == nblk {
				break
			}
			if k.free[i] {
				blocks = append(blocks, uint32(i))
			}
		}
		if len(blocks) == nblk {
			break
		}
		k.space.Wait()
	}
	nIov := 0
	for i, b := range blocks {
		if i == 0 || b != blocks[i-1]+1 {
			nIov++
		}
	}
	base := max(reqIov+nIov*iovecLen, minCmdEntry)
	size := uint32(base + (len(cdb)+7)&^7)
	for {
		head := k.head()
		need := size
		if k.cmdrSize-head < size {
			need += k.cmdrSize - head
		}
		if k.cmdrSize-k.used()-1 >= need {
			break
		}
		k.space.Wait()
	}
	head := k.head()
	if k.cmdrSize-head < size { // PAD to the ring's end
		pad := k.cmdrSize - head
		le.PutUint32(k.mem[k.cmdrOff+head:], pad|opPad)
		head = 0
		k.setHead(head)
	}
	for _, b := range blocks {
		k.free[b] = false
	}
	k.nextID++
	if k.nextID == 0 {
		k.nextID = 1
	}
	id := k.nextID
	if _, dup := k.inflight[id]; dup {
		k.t.Fatalf("cmd id %d reused while in flight", id)
	}
	e := k.mem[k.cmdrOff+head : k.cmdrOff+head+size]
	clear(e)
	le.PutUint32(e, size|opCmd)
	le.PutUint16(e[4:], id)
	le.PutUint32(e[reqIovCnt:], uint32(nIov))
	iov := -1
	rest := dataLen
	for i, b := range blocks {
		n := min(rest, int(k.blk))
		off := k.dataOff + b*k.blk
		if i == 0 || b != blocks[i-1]+1 {
			iov++
			le.PutUint64(e[reqIov+iov*iovecLen:], uint64(off))
		}
		p := reqIov + iov*iovecLen + 8
		le.PutUint64(e[p:], le.Uint64(e[p:])+uint64(n))
		rest -= n
	}
	// copy data-out into the blocks
	p := 0
	for _, b := range blocks {
		off := k.dataOff + b*k.blk
		p += copy(k.mem[off:off+k.blk], dataOut[p:])
	}
	cdbOff := k.cmdrOff + head + uint32(base)
	copy(k.mem[cdbOff:], cdb)
	le.PutUint64(e[reqCdbOff:], uint64(cdbOff))
	c := &fakeCmd{blocks: blocks, inLen: inLen, done: make(chan fakeResult, 1), dataOut: dataOut}
	k.inflight[id] = c
	k.setHead((head + size) % k.cmdrSize)
	select {
	case k.bell <- struct{}{}:
	default:
	}
	return c.done
}

// Kick is the kernel's tcmu_handle_completions.
func (k *fakeKernel) Kick() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	tail := atomic.LoadUint32((*uint32)(unsafe.Pointer(&k.mem[mbCmdTail])))
	for k.cleaned != tail {
		e := k.mem[k.cmdrOff+k.cleaned:]
		lenOp := le.Uint32(e)
		op, n := lenOp&opMask, lenOp&^opMask
		if n == 0 {
			k.t.Fatalf("zero-length entry at %d", k.cleaned)
		}
		if op == opCmd {
			id := le.Uint16(e[4:])
			c, ok := k.inflight[id]
			if !ok {
				k.t.Fatalf("completion for cmd_id %d not in flight: ring broken", id)
			}
			delete(k.inflight, id)
			res := fakeResult{status: e[rspStatus]}
			if e[rspStatus] == 2 {
				res.sense = append([]byte(nil), e[rspSense:rspSense+SenseLen]...)
			}
			readLen := c.inLen
			if e[7]&entryFlagReadLen != 0 && le.Uint32(e[rspReadLen:]) != 0 {
				readLen = min(readLen, int(le.Uint32(e[rspReadLen:])))
			}
			var in []byte
			for _, b := range c.blocks {
				off := k.dataOff + b*k.blk
				in = append(in, k.mem[off:off+k.blk]...)
				k.free[b] = true
			}
			res.dataIn = in[:min(readLen, len(in))]
			c.done <- res
		} else if op != opPad && op != opTMR {
			k.t.Fatalf("bad op %d at %d", op, k.cleaned)
		}
		k.cleaned = (k.cleaned + n) % k.cmdrSize
	}
	k.space.Broadcast()
	return nil
}

func (k *fakeKernel) Wait() error {
	select {
	case <-k.bell:
		return nil
	case <-k.stop:
		return errors.New("interrupted")
	}
}

func (k *fakeKernel) Interrupt() { k.stopOnce.Do(func() { close(k.stop) }) }

// diskHandler is a tiny block device: READ(10)/WRITE(10) on 512-byte
// blocks, plus an opcode that always fails with sense and one that returns
// fewer bytes than asked. Random delays make completions out of order.
type diskHandler struct {
	mu     sync.Mutex
	blocks map[uint32][]byte
	delay  bool
}

func (d *diskHandler) HandleCommand(ctx context.Context, cdb, out, in []byte) Result {
	if d.delay {
		time.Sleep(time.Duration(rand.IntN(2000)) * time.Microsecond)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	switch cdb[0] {
	case 0x2a: // WRITE(10)
		lba := binary.BigEndian.Uint32(cdb[2:])
		for i := 0; i*512 < len(out); i++ {
			d.blocks[lba+uint32(i)] = append([]byte(nil), out[i*512:i*512+512]...)
		}
		return Result{}
	case 0x28: // READ(10)
		lba := binary.BigEndian.Uint32(cdb[2:])
		for i := 0; i*512 < len(in); i++ {
			copy(in[i*512:], d.blocks[lba+uint32(i)])
		}
		return Result{DataInLen: len(in)}
	case 0x12: // INQUIRY-like short answer
		copy(in, "cairn")
		return Result{DataInLen: 5}
	default:
		return Result{Status: 2, Sense: []byte{0x70, 0, 0x05, 0, 0, 0, 0, 10, 0, 0, 0, 0, 0x20, 0}}
	}
}

func rw10(op byte, lba uint32, blocks uint16) []byte {
	c := make([]byte, 10)
	c[0] = op
	binary.BigEndian.PutUint32(c[2:], lba)
	binary.BigEndian.PutUint16(c[7:], blocks)
	return c
}

// startRing serves mem's ring with h, n being the doorbells (the fake
// kernel itself, or a wrapper of it); stop ends Serve and checks its error,
// once however often it is called.
func startRing(t *testing.T, mem []byte, n Notifier, h Handler) (stop func()) {
	r, err := NewRing(mem, n, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Serve(ctx, h) }()
	return sync.OnceFunc(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
}

// TestOutOfOrderCompletions runs many concurrent writes then reads through
// a small ring (so entries wrap and PADs appear) with random handler delays,
// and checks every command completes once with the right data.
func TestOutOfOrderCompletions(t *testing.T) {
	k := newFakeKernel(t, 2048, 64)
	h := &diskHandler{blocks: map[uint32][]byte{}, delay: true}
	stop := startRing(t, k.mem, k, h)
	defer stop()

	const workers, perWorker = 8, 40
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for i := range perWorker {
				nblk := 1 + rng.IntN(16) // up to 8 KiB: 1-2 data blocks, split iovecs
				lba := uint32(w*10000 + i*16)
				data := make([]byte, nblk*512)
				for j := range data {
					data[j] = byte(rng.Uint32())
				}
				res := <-k.submit(rw10(0x2a, lba, uint16(nblk)), data, 0)
				if res.status != 0 {
					errs <- fmt.Errorf("write status %d", res.status)
					return
				}
				res = <-k.submit(rw10(0x28, lba, uint16(nblk)), nil, nblk*512)
				if res.status != 0 || !bytes.Equal(res.dataIn, data) {
					errs <- fmt.Errorf("worker %d op %d: read back differs (status %d, %d bytes)", w, i, res.status, len(res.dataIn))
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if len(k.inflight) != 0 {
		t.Errorf("%d commands never completed", len(k.inflight))
	}
}

func TestSenseAndShortRead(t *testing.T) {
	k := newFakeKernel(t, 4096, 8)
	stop := startRing(t, k.mem, k, &diskHandler{blocks: map[uint32][]byte{}})
	defer stop()
	res := <-k.submit([]byte{0x99, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, nil, 0)
	if res.status != 2 || res.sense[0] != 0x70 || res.sense[2] != 0x05 || res.sense[12] != 0x20 {
		t.Fatalf("want CHECK CONDITION with ILLEGAL REQUEST/0x20 sense, got status %d sense % x", res.status, res.sense[:14])
	}
	res = <-k.submit([]byte{0x12, 0, 0, 0, 96, 0}, nil, 96)
	if res.status != 0 || string(res.dataIn) != "cairn" {
		t.Fatalf("short read: status %d data %q (want 5 bytes \"cairn\")", res.status, res.dataIn)
	}
}

func TestParseUIOName(t *testing.T) {
	n, ok := ParseUIOName("tcm-user/3/vol-7/cairn/vol-7\n")
	if !ok || n.HBA != 3 || n.Name != "vol-7" || n.DevConfig != "cairn/vol-7" {
		t.Fatalf("got %+v %v", n, ok)
	}
	for _, bad := range []string{"uio_pci_generic", "tcm-user/x/a/b", "tcm-user/1/a", "tcm-user/1//c"} {
		if _, ok := ParseUIOName(bad); ok {
			t.Errorf("%q parsed", bad)
		}
	}
}

// FuzzRing feeds arbitrary shared-region contents to the ring reader: it
// must return errors, never panic or read outside the region.
func FuzzRing(f *testing.F) {
	k := newFakeKernel(&testing.T{}, 1024, 2)
	k.submit(rw10(0x2a, 1, 2), make([]byte, 1024), 0)
	f.Add(append([]byte(nil), k.mem[:1024+128]...))
	f.Add(make([]byte, 200))
	f.Fuzz(func(t *testing.T, mem []byte) {
		if len(mem) > 1<<16 {
			return
		}
		r, err := NewRing(mem, nil, nil)
		if err != nil {
			return
		}
		cmds, _ := r.takeNew()
		for _, c := range cmds {
			for _, v := range append(c.iov, c.bidi...) {
				if v.off+v.len > uint64(len(mem)) {
					t.Fatalf("iovec outside region")
				}
			}
			buf := make([]byte, 1<<16)
			r.gather(buf, c.iov)
		}
	})
}

// countingHandler records how many commands run at once.
type countingHandler struct {
	now, peak atomic.Int32
}

func (h *countingHandler) HandleCommand(ctx context.Context, cdb, out, in []byte) Result {
	n := h.now.Add(1)
	for p := h.peak.Load(); n > p && !h.peak.CompareAndSwap(p, n); p = h.peak.Load() {
	}
	time.Sleep(time.Millisecond)
	h.now.Add(-1)
	return Result{}
}

// TestKickCoalescingAndWorkerBound: completions that arrive while a Kick is
// in progress share the next one (fewer Kicks than commands, yet every
// command completes), and no more than MaxInFlight commands run at once.
func TestKickCoalescingAndWorkerBound(t *testing.T) {
	k := &countingKernel{fakeKernel: newFakeKernel(t, 1<<16, 64), delay: 5 * time.Millisecond} // a doorbell takes a while, as a syscall does under TCG
	r, err := NewRing(k.mem, k, nil)
	if err != nil {
		t.Fatal(err)
	}
	r.MaxInFlight = 4
	h := &countingHandler{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Serve(ctx, h) }()
	const n = 200
	res := make([]chan fakeResult, 0, n)
	for range n {
		res = append(res, k.submit([]byte{0x00, 0, 0, 0, 0, 0}, nil, 0)) // TEST UNIT READY
	}
	for i, c := range res {
		if r := await(t, c, 30*time.Second, fmt.Sprintf("command %d", i)); r.status != 0 {
			t.Fatalf("command %d: status %d", i, r.status)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Serve: %v", err)
	}
	if kicks := k.kicks.Load(); kicks >= n || kicks < 1 {
		t.Errorf("%d Kicks for %d commands: completions were not coalesced", kicks, n)
	}
	if p := h.peak.Load(); p > 4 {
		t.Errorf("%d commands ran at once, MaxInFlight is 4", p)
	}
	t.Logf("%d commands, %d Kicks, at most %d at once", n, k.kicks.Load(), h.peak.Load())
}

// asyncDisk starts READ(10)s asynchronously (answered from another
// goroutine after a random delay); every third one "fails" so the ring
// runs it again through HandleCommand. Writes stay synchronous.
type asyncDisk struct {
	*diskHandler
	started, flushes, failed atomic.Int32
	held                     atomic.Int32 // started with hold and not flushed yet
}

func (a *asyncDisk) Start(ctx context.Context, cdb, out, in []byte, hold bool, done func(Result, bool)) bool {
	if cdb[0] != 0x28 {
		return false
	}
	n := a.started.Add(1)
	if hold {
		a.held.Add(1)
	}
	go func() {
		time.Sleep(time.Duration(rand.IntN(1000)) * time.Microsecond)
		if n%3 == 0 {
			a.failed.Add(1)
			done(Result{}, false)
			return
		}
		done(a.HandleCommand(ctx, cdb, out, in), true)
	}()
	return true
}

func (a *asyncDisk) Flush() {
	a.flushes.Add(1)
	a.held.Store(0)
}

// writeBlocks writes n 1 KiB patterns (WRITE(10) of 2 blocks at LBAs 0, 2,
// 4, ...) and returns them.
func writeBlocks(t *testing.T, k *fakeKernel, n int) [][]byte {
	t.Helper()
	want := make([][]byte, n)
	for i := range n {
		want[i] = bytes.Repeat([]byte{byte(i + 1)}, 1024)
		if res := <-k.submit(rw10(0x2a, uint32(i*2), 2), want[i], 0); res.status != 0 {
			t.Fatalf("write %d: status %d", i, res.status)
		}
	}
	return want
}

// TestAsyncStart: reads started asynchronously (and the ones whose start
// failed, rerun synchronously) return the data written, every command
// completes once, and the ring flushes after starting a batch.
func TestAsyncStart(t *testing.T) {
	k := newFakeKernel(t, 1<<15, 64)
	h := &asyncDisk{diskHandler: &diskHandler{blocks: map[uint32][]byte{}}}
	stop := startRing(t, k.mem, k, h)
	const n = 60
	want := writeBlocks(t, k, n)
	res := make([]chan fakeResult, n)
	for i := range n {
		res[i] = k.submit(rw10(0x28, uint32(i*2), 2), nil, 1024)
	}
	for i := range n {
		r := <-res[i]
		if r.status != 0 || !bytes.Equal(r.dataIn, want[i]) {
			t.Fatalf("read %d: status %d, data differs", i, r.status)
		}
	}
	stop()
	if h.started.Load() != n || h.failed.Load() == 0 {
		t.Errorf("%d reads started asynchronously (want %d), %d failed (want some)", h.started.Load(), n, h.failed.Load())
	}
	if h.flushes.Load() == 0 || h.held.Load() != 0 {
		t.Errorf("%d flushes, %d reads held and never flushed", h.flushes.Load(), h.held.Load())
	}
}

// countingKernel is a fakeKernel that counts its doorbells, each taking
// delay.
type countingKernel struct {
	*fakeKernel
	kicks atomic.Int32
	delay time.Duration
}

func (k *countingKernel) Kick() error {
	k.kicks.Add(1)
	time.Sleep(k.delay)
	return k.fakeKernel.Kick()
}

// await is a command's result, failing the test if none comes within.
func await(t *testing.T, c chan fakeResult, within time.Duration, what string) fakeResult {
	t.Helper()
	select {
	case r := <-c:
		return r
	case <-time.After(within):
		t.Fatalf("%s never completed (a completion without a doorbell after it?)", what)
	}
	return fakeResult{}
}

// burstDisk starts READ(10)s and answers them from one goroutine in
// bursts, the way a wire connection's reader hands over the answers it
// found buffered together, then runs the idle hook (blockdev.AsyncVolume)
// unless callIdle is false.
type burstDisk struct {
	*diskHandler
	queue    chan func()
	callIdle bool
	mu       sync.Mutex
	idle     func()
	answered atomic.Int32
	bursts   atomic.Int32
}

func (d *burstDisk) Start(ctx context.Context, cdb, out, in []byte, hold bool, done func(Result, bool)) bool {
	if cdb[0] != 0x28 {
		return false
	}
	d.queue <- func() { done(d.HandleCommand(ctx, cdb, out, in), true); d.answered.Add(1) }
	return true
}

func (d *burstDisk) Flush() {}

func (d *burstDisk) OnIdle(f func()) (cancel func(), ok bool) {
	d.mu.Lock()
	d.idle = f
	d.mu.Unlock()
	return func() { d.mu.Lock(); d.idle = nil; d.mu.Unlock() }, true
}

func (d *burstDisk) answer(stop <-chan struct{}) {
	for {
		var burst []func()
		select {
		case f := <-d.queue:
			burst = append(burst, f)
		case <-stop:
			return
		}
		time.Sleep(2 * time.Millisecond) // let the rest of the burst arrive
		for more := true; more; {
			select {
			case f := <-d.queue:
				burst = append(burst, f)
			default:
				more = false
			}
		}
		for _, f := range burst {
			f()
		}
		d.bursts.Add(1)
		d.mu.Lock()
		idle := d.idle
		d.mu.Unlock()
		if d.callIdle && idle != nil {
			idle()
		}
	}
}

// TestIdleHookKicks: completions that a handler's idle hook follows
// (tcmu.IdleHandler) are written at once but share one doorbell per burst;
// every command completes with its data. A completion the hook never
// followed is still rung when Serve ends.
func TestIdleHookKicks(t *testing.T) {
	for _, callIdle := range []bool{true, false} {
		t.Run(fmt.Sprintf("idle-hook-runs=%v", callIdle), func(t *testing.T) {
			k := &countingKernel{fakeKernel: newFakeKernel(t, 1<<15, 64)}
			d := &burstDisk{diskHandler: &diskHandler{blocks: map[uint32][]byte{}}, queue: make(chan func(), 256), callIdle: callIdle}
			stopAnswers := make(chan struct{})
			defer close(stopAnswers)
			go d.answer(stopAnswers)
			stop := startRing(t, k.mem, k, d)
			const n = 48
			want := writeBlocks(t, k.fakeKernel, n)
			before := k.kicks.Load()
			res := make([]chan fakeResult, n)
			for i := range n {
				res[i] = k.submit(rw10(0x28, uint32(i*2), 2), nil, 1024)
			}
			if !callIdle {
				// Answered, but the hook that owes the doorbell never ran:
				// the kernel has seen none of them, until Serve ends.
				for deadline := time.Now().Add(10 * time.Second); d.answered.Load() < n; time.Sleep(time.Millisecond) {
					if time.Now().After(deadline) {
						t.Fatalf("%d of %d reads answered", d.answered.Load(), n)
					}
				}
				for i := range n {
					select {
					case <-res[i]:
						t.Fatalf("read %d reached the kernel without a doorbell", i)
					default:
					}
				}
				stop()
			}
			for i := range n {
				if r := await(t, res[i], 10*time.Second, fmt.Sprintf("read %d", i)); r.status != 0 || !bytes.Equal(r.dataIn, want[i]) {
					t.Fatalf("read %d: status %d, data differs", i, r.status)
				}
			}
			stop()
			kicks, bursts := k.kicks.Load()-before, d.bursts.Load()
			if callIdle && (kicks < 1 || kicks > bursts) {
				t.Errorf("%d doorbells for %d reads answered in %d bursts: want one per burst at most", kicks, n, bursts)
			}
			if !callIdle && kicks != 1 {
				t.Errorf("%d doorbells for %d reads whose hook never ran: want the one at Serve's end", kicks, n)
			}
			t.Logf("%d reads, %d bursts, %d doorbells", n, bursts, kicks)
		})
	}
}
