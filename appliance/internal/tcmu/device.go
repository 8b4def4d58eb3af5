package tcmu

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/cairn-storage/cairn/appliance/internal/bufpool"
)

// Result is a handler's answer to one SCSI command.
type Result struct {
	Status byte   // SCSI status (0 GOOD, 2 CHECK CONDITION, ...)
	Sense  []byte // sense data for CHECK CONDITION, at most SenseLen bytes used
	// DataInLen is how many bytes of dataIn the command returned.
	DataInLen int
}

// Handler executes SCSI commands. dataOut holds the command's data-out
// buffer (for commands that transfer data to the device); dataIn is a
// zeroed buffer of the transfer length the initiator asked for, to fill for
// commands that return data. Exactly one of the two is meaningful for a
// command; the handler decides which from the CDB. HandleCommand is called
// concurrently from many goroutines and must not keep the slices.
type Handler interface {
	HandleCommand(ctx context.Context, cdb, dataOut, dataIn []byte) Result
}

// AsyncHandler is a Handler that can also start some commands without
// blocking or a goroutine of its own (reads through the client library):
// Start returns false, having done nothing, for a command it cannot start
// that way, which then runs with HandleCommand; otherwise done runs exactly
// once, maybe before Start returns, maybe on another goroutine, and must
// not block: with ok false the command is run again with HandleCommand.
// Serve starts every command of a batch taken off the ring with hold and
// calls Flush before it waits (blockdev.AsyncVolume's hold/flush scheme).
type AsyncHandler interface {
	Handler
	Start(ctx context.Context, cdb, dataOut, dataIn []byte, hold bool, done func(res Result, ok bool)) bool
	Flush()
}

// IdleHandler is an AsyncHandler whose done callbacks come in bursts
// followed by an idle hook (blockdev.AsyncVolume.OnIdle): OnIdle registers
// f and returns its cancel, or ok false when there is no such hook. Serve
// then writes those completions into the ring as they come but rings the
// kernel's doorbell once per burst, from f: one system call (and one pass
// of the kernel over the ring) for all the answers a connection's reader
// found together, instead of one per command.
type IdleHandler interface {
	AsyncHandler
	OnIdle(f func()) (cancel func(), ok bool)
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, cdb, dataOut, dataIn []byte) Result

func (f HandlerFunc) HandleCommand(ctx context.Context, cdb, dataOut, dataIn []byte) Result {
	return f(ctx, cdb, dataOut, dataIn)
}

// Notifier is the doorbell pair of a ring: Wait blocks until the kernel
// signals new entries or Interrupt is called; Kick tells the kernel that
// cmd_tail moved. On a real device both are the uio fd (read / write 4
// bytes) and Interrupt sets a read deadline in the past.
type Notifier interface {
	Wait() error
	Kick() error
	Interrupt()
}

// Ring serves one mapped TCMU command ring. It owns the goroutines it
// starts: Serve returns only after every command it dispatched completed.
type Ring struct {
	mem      []byte // the whole shared region (map 0)
	ring     []byte // mem[cmdrOff : cmdrOff+cmdrSz]
	dataOff  uint64 // first byte after the ring: iovecs point at or after it
	notifier Notifier
	log      *slog.Logger

	// MaxInFlight bounds the commands executing at once (default 256); the
	// kernel queues the rest in the ring.
	MaxInFlight int

	mu      sync.Mutex // guards readPos, tail, kick and writes to ring entries
	readPos uint32     // next entry we have not read
	tail    uint32     // our copy of cmd_tail
	// kick coalesces doorbells: kickIdle, or kickRunning while one
	// completer is in Kick, or kickAgain when completions were written
	// after that Kick may have read cmd_tail. See complete.
	kick int
	// pending: completions stored without a Kick, which the idle hook
	// owes the kernel (see IdleHandler).
	pending bool
}

const (
	kickIdle = iota
	kickRunning
	kickAgain
)

// NewRing wraps a shared region already mapped (len(mem) is the uio map's
// size) and checks its mailbox.
func NewRing(mem []byte, n Notifier, log *slog.Logger) (*Ring, error) {
	mb, err := parseMailbox(mem)
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	r := &Ring{
		mem:         mem,
		ring:        mem[mb.cmdrOff : mb.cmdrOff+mb.cmdrSz],
		dataOff:     uint64(mb.cmdrOff) + uint64(mb.cmdrSz),
		notifier:    n,
		log:         log,
		MaxInFlight: 256,
	}
	// Entries between cmd_tail and cmd_head were either never read or were
	// read by a previous process that died before completing them: serve
	// them all again (the kernel times out commands that are late).
	r.tail = atomic.LoadUint32(r.u32(mbCmdTail)) % mb.cmdrSz
	r.readPos = r.tail
	return r, nil
}

func (r *Ring) u32(off int) *uint32 { return (*uint32)(unsafe.Pointer(&r.mem[off])) }

// Serve processes commands until ctx ends or the ring breaks. In-flight
// commands get ctx too; Serve waits for all of them before returning.
//
// Commands run on a pool of worker goroutines, started on demand up to
// MaxInFlight and kept until Serve returns: a long-lived worker keeps the
// stack the SCSI layer and the client library grew (a goroutine per
// command grew and freed it every time, which cost about a tenth of the
// target's CPU under TCG).
func (r *Ring) Serve(ctx context.Context, h Handler) error {
	var wg sync.WaitGroup
	limit := r.MaxInFlight
	if limit <= 0 {
		limit = 256
	}
	work := make(chan command) // unbuffered: a send succeeds only into an idle worker
	unhook := func() {}
	defer func() {
		wg.Wait()
		unhook()
		// A completion stored after the idle hook's last run still gets
		// its Kick (a no-op without one pending).
		r.kickPending()
	}()
	defer close(work)
	workers := 0
	worker := func(c command) {
		defer wg.Done()
		for {
			r.run(ctx, h, c)
			var ok bool
			if c, ok = <-work; !ok {
				return
			}
		}
	}
	ah, _ := h.(AsyncHandler)
	deferKick := false
	if ih, ok := h.(IdleHandler); ok {
		if cancel, ok := ih.OnIdle(r.kickPending); ok {
			deferKick, unhook = true, cancel
		}
	}
	stop := context.AfterFunc(ctx, r.notifier.Interrupt)
	defer stop()
	for {
		cmds, err := r.takeNew()
		held := false
		for _, c := range cmds {
			if ah != nil && r.start(ctx, ah, c, &wg, deferKick) {
				held = true
				continue
			}
			select {
			case work <- c:
				continue
			default:
			}
			if workers < limit {
				workers++
				wg.Add(1)
				go worker(c)
				continue
			}
			if held {
				ah.Flush() // before waiting for a worker: nothing may sit in a buffer meanwhile
				held = false
			}
			select {
			case work <- c:
			case <-ctx.Done():
				// Not executed: answer BUSY so the kernel frees the entry
				// and the initiator retries (on another path).
				r.complete(c, Result{Status: StatusBusy}, nil, false)
			}
		}
		if held {
			ah.Flush()
		}
		if err != nil {
			return err
		}
		if ctx.Err() != nil {
			return nil
		}
		if err := r.notifier.Wait(); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("tcmu: wait for commands: %w", err)
		}
	}
}

// StatusBusy is the SCSI BUSY status.
const StatusBusy = 0x08

// takeNew copies out every entry between our read position and cmd_head.
func (r *Ring) takeNew() ([]command, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	size := uint32(len(r.ring))
	head := atomic.LoadUint32(r.u32(mbCmdHead))
	if head >= size || head%8 != 0 {
		return nil, fmt.Errorf("tcmu: cmd_head %d outside ring of %d: %w", head, size, ErrBrokenRing)
	}
	var cmds []command
	for r.readPos != head {
		op, n, err := entryAt(r.ring, r.readPos)
		if err != nil {
			return cmds, err
		}
		if op == opCmd {
			c, err := parseCommand(r.mem, r.ring, r.readPos, n, r.dataOff, uint64(len(r.mem)))
			if err != nil {
				return cmds, err
			}
			cmds = append(cmds, c)
		}
		r.readPos = (r.readPos + n) % size
	}
	// With nothing in flight before them, PAD and TMR entries can be
	// released now rather than at the next completion.
	if r.skipNonCommands() {
		atomic.StoreUint32(r.u32(mbCmdTail), r.tail)
	}
	return cmds, nil
}

// skipNonCommands moves tail over PAD/TMR entries up to the read position.
// Called with mu held; reports whether tail moved.
func (r *Ring) skipNonCommands() bool {
	moved := false
	for r.tail != r.readPos {
		op, n, err := entryAt(r.ring, r.tail)
		if err != nil || op == opCmd {
			return moved
		}
		r.tail = (r.tail + n) % uint32(len(r.ring))
		moved = true
	}
	return moved
}

// run executes one command and completes it.
func (r *Ring) run(ctx context.Context, h Handler, c command) {
	// Buffers come from the data path's pool: the handler must not keep
	// them, and they go back once the completion is written.
	dataOut, dataIn := r.buffers(c)
	defer bufpool.Put(dataOut)
	defer bufpool.Put(dataIn)
	res := h.HandleCommand(ctx, c.cdb, dataOut, dataIn)
	r.finish(c, res, dataIn, false)
}

// start offers c to an AsyncHandler, with hold. If taken, the command
// counts in wg until its completion is written; a failed start runs it
// again, synchronously, on a goroutine of its own (a rare path: the
// asynchronous one fails only when the volume needs retries).
func (r *Ring) start(ctx context.Context, ah AsyncHandler, c command, wg *sync.WaitGroup, deferKick bool) bool {
	dataOut, dataIn := r.buffers(c)
	wg.Add(1)
	ok := ah.Start(ctx, c.cdb, dataOut, dataIn, true, func(res Result, ok bool) {
		if !ok {
			bufpool.Put(dataOut)
			bufpool.Put(dataIn)
			go func() {
				defer wg.Done()
				r.run(ctx, ah, c)
			}()
			return
		}
		r.finish(c, res, dataIn, deferKick)
		bufpool.Put(dataOut)
		bufpool.Put(dataIn)
		wg.Done()
	})
	if !ok {
		bufpool.Put(dataOut)
		bufpool.Put(dataIn)
		wg.Done()
	}
	return ok
}

// buffers returns c's data-out (gathered from the ring) and a zeroed
// data-in buffer of the length the initiator asked for, both from the
// data path's pool.
func (r *Ring) buffers(c command) (dataOut, dataIn []byte) {
	var total uint64
	for _, v := range c.iov {
		total += v.len
	}
	dataOut = bufpool.Get(int(total))
	r.gather(dataOut, c.iov)
	inIov := c.iov
	if len(c.bidi) > 0 {
		inIov = c.bidi
	}
	var inTotal uint64
	for _, v := range inIov {
		inTotal += v.len
	}
	dataIn = bufpool.Get(int(inTotal))
	clear(dataIn)
	return dataOut, dataIn
}

// finish checks a handler's result and completes c (deferKick: see
// complete).
func (r *Ring) finish(c command, res Result, dataIn []byte, deferKick bool) {
	if res.DataInLen < 0 || res.DataInLen > len(dataIn) {
		r.log.Error("tcmu: handler returned more data than the buffer holds", "cdb0", c.cdb[0], "len", res.DataInLen, "buf", len(dataIn))
		res.DataInLen = len(dataIn)
	}
	r.complete(c, res, dataIn, deferKick)
}

// gather copies the iovecs' bytes out of the shared region into dst.
func (r *Ring) gather(dst []byte, iov []iovec) {
	p := 0
	for _, v := range iov {
		p += copy(dst[p:], r.mem[v.off:v.off+v.len])
	}
}

// scatter copies src into the iovecs, stopping when src runs out.
func (r *Ring) scatter(src []byte, iov []iovec) {
	for _, v := range iov {
		if len(src) == 0 {
			return
		}
		n := copy(r.mem[v.off:v.off+v.len], src)
		src = src[n:]
	}
}

// complete writes c's data-in and its response, then rings the doorbell;
// with deferKick it leaves the doorbell to kickPending (IdleHandler).
func (r *Ring) complete(c command, res Result, dataIn []byte, deferKick bool) {
	inIov := c.iov
	if len(c.bidi) > 0 {
		inIov = c.bidi
	}
	setReadLen := false
	if res.DataInLen > 0 {
		// The data area belongs to this command until the kernel sees its
		// completion, so it is written before taking the ring lock.
		r.scatter(dataIn[:res.DataInLen], inIov)
		// Report a short read (residual) only when there is one: the
		// kernel ignores read_len 0 and uses the full length otherwise.
		setReadLen = res.DataInLen < len(dataIn)
	}
	r.mu.Lock()
	// Invariant: at least one CMD entry (c's own or one read after it) lies
	// between tail and readPos, so the first CMD at or after tail is ours
	// to overwrite.
	r.skipNonCommands()
	if r.tail == r.readPos {
		r.mu.Unlock()
		r.log.Error("tcmu: completion without an entry to write it to; ring state lost", "cmd_id", c.id)
		return
	}
	_, n, err := entryAt(r.ring, r.tail)
	if err != nil {
		r.mu.Unlock()
		r.log.Error("tcmu: completion", "cmd_id", c.id, "err", err)
		return
	}
	writeResponse(r.ring, r.tail, c.id, res.Status, res.Sense, uint32(res.DataInLen), setReadLen)
	r.tail = (r.tail + n) % uint32(len(r.ring))
	r.skipNonCommands()
	atomic.StoreUint32(r.u32(mbCmdTail), r.tail)
	if deferKick {
		r.pending = true
		r.mu.Unlock()
		return
	}
	r.doorbell()
}

// kickPending rings the doorbell for completions stored without one (the
// idle hook of IdleHandler; safe on any goroutine, a no-op with none).
func (r *Ring) kickPending() {
	r.mu.Lock()
	if !r.pending {
		r.mu.Unlock()
		return
	}
	r.doorbell()
}

// doorbell tells the kernel that cmd_tail moved. Called with mu held; it
// releases it.
func (r *Ring) doorbell() {
	r.pending = false
	// Doorbell coalescing: the kernel handles every completion up to
	// cmd_tail on each Kick, so one Kick in progress covers the completions
	// stored before it started. A completion stored while another completer
	// is inside Kick (which may already have read cmd_tail) asks that
	// completer for one more Kick instead of making its own: every
	// completion is followed by a Kick that starts after it was stored, and
	// under load one syscall answers many commands.
	if r.kick != kickIdle {
		r.kick = kickAgain
		r.mu.Unlock()
		return
	}
	r.kick = kickRunning
	r.mu.Unlock()
	for {
		if err := r.notifier.Kick(); err != nil && !errors.Is(err, errClosed) {
			r.log.Error("tcmu: notify kernel of completions", "err", err)
		}
		r.mu.Lock()
		if r.kick == kickAgain {
			r.kick = kickRunning
			r.mu.Unlock()
			continue
		}
		r.kick = kickIdle
		r.mu.Unlock()
		return
	}
}

var errClosed = errors.New("tcmu: device closed")
