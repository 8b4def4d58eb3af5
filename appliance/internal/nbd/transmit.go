package nbd

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"time"

	"github.com/cairn-storage/cairn/appliance/internal/blockdev"
	"github.com/cairn-storage/cairn/appliance/internal/bufpool"
)

// writeBufSize is the reply buffer: small replies (and 4 KiB read data)
// are batched in it; larger read data goes out with writev behind it.
const writeBufSize = 256 << 10

// request is one decoded transmission request.
type request struct {
	cookie uint64
	off    uint64
	length uint32
	typ    uint16
	flags  uint16
	buf    []byte // WRITE payload, from bufpool.Get
}

// cost is the payload memory a request holds in the budget: its length for
// a READ or WRITE, nothing for the others. (Computed, not stored: a request
// is copied into every goroutine that serves it, and 48 bytes fit a
// smaller allocation class than 56.)
func (r request) cost() int64 {
	if r.typ == cmdRead || r.typ == cmdWrite {
		return int64(r.length)
	}
	return 0
}

// How the reader loop ended.
type endReason int

const (
	endDisc     endReason = iota // NBD_CMD_DISC: finish everything in flight
	endShutdown                  // server shutdown: finish within the grace
	endRefused                   // request the server will not read: finish in flight, then close
	endGone                      // client vanished or broke the protocol
)

func (c *conn) transmit(ctx context.Context) {
	c.opCtx, c.opCancel = context.WithCancel(context.WithoutCancel(ctx))
	defer c.opCancel()
	c.wbuf = make([]byte, 0, writeBufSize)
	c.budget.wake = make(chan struct{}, 1)
	if av, ok := c.vol.(blockdev.AsyncVolume); ok {
		unregister := av.OnIdle(c.flushHeld)
		defer unregister()
	}
	c.log.Debug("nbd: transmission started", "size", c.size, "read_only", c.readOnly)

	reason := c.readRequests(ctx)

	done := make(chan struct{})
	go func() { c.workers.Wait(); close(done) }()
	if reason == endGone {
		// Nobody will read the replies (or the client broke the
		// protocol): drop the connection so no reply blocks on it.
		c.opCancel()
		c.nc.Close()
		<-done
	} else {
		// DISC: the protocol wants every request answered (so do we
		// before refusing a client). Shutdown: the same, within the grace
		// period.
		select {
		case <-done:
		case <-ctx.Done():
			t := time.NewTimer(c.srv.shutdownGrace())
			select {
			case <-done:
			case <-t.C:
				c.log.Warn("nbd: requests still in flight after shutdown grace; cancelling them")
				c.opCancel()
				c.nc.Close()
				<-done
			}
			t.Stop()
		}
	}
	c.wmu.Lock()
	if c.werr == nil && len(c.wbuf) > 0 {
		_, c.werr = c.nc.Write(c.wbuf)
	}
	c.wmu.Unlock()
	c.log.Debug("nbd: connection closed", "reason", reason)
}

// readRequests decodes requests and starts one goroutine per request,
// bounded by the budget. Invalid requests are answered here.
func (c *conn) readRequests(ctx context.Context) endReason {
	var hdr [requestHeaderLen]byte
	// Async reads and writes sent while more requests are already
	// buffered are held (blockdev.AsyncVolume's hold/flush scheme).
	av, _ := c.vol.(blockdev.AsyncVolume)
	held := false
	flush := func() {
		if held {
			av.FlushHeld()
			held = false
		}
	}
	defer flush()
	for {
		if c.br.Buffered() < requestHeaderLen {
			flush()
		}
		if _, err := io.ReadFull(c.br, hdr[:]); err != nil {
			if ctx.Err() != nil {
				return endShutdown
			}
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				c.log.Debug("nbd: read request failed", "err", err)
			}
			return endGone
		}
		if m := binary.BigEndian.Uint32(hdr[0:]); m != requestMagic {
			c.log.Warn("nbd: bad request magic; dropping connection", "magic", m)
			return endGone
		}
		req := request{
			flags:  binary.BigEndian.Uint16(hdr[4:]),
			typ:    binary.BigEndian.Uint16(hdr[6:]),
			cookie: binary.BigEndian.Uint64(hdr[8:]),
			off:    binary.BigEndian.Uint64(hdr[16:]),
			length: binary.BigEndian.Uint32(hdr[24:]),
		}
		if req.typ == cmdDisc {
			return endDisc
		}
		if req.typ < numCommands {
			c.srv.stats.requests[req.typ].Add(1)
		}
		code := c.validate(&req)
		if req.typ == cmdWrite {
			if code != 0 {
				// The payload follows anyway; skip it to stay in sync,
				// unless it is too big to be an honest mistake.
				if req.length > maxDiscard {
					c.reply(req.cookie, code, nil)
					c.log.Warn("nbd: write payload too large to skip; closing connection", "length", req.length)
					return endRefused
				}
				if _, err := io.CopyN(io.Discard, c.br, int64(req.length)); err != nil {
					return c.readEnd(ctx)
				}
				c.reply(req.cookie, code, nil)
				continue
			}
			flush() // the payload may not be here yet; the budget may wait
			if err := c.budget.acquire(ctx, req.cost()); err != nil {
				return endShutdown
			}
			req.buf = bufpool.Get(int(req.length))
			if _, err := io.ReadFull(c.br, req.buf); err != nil {
				bufpool.Put(req.buf)
				c.budget.release(req.cost())
				return c.readEnd(ctx)
			}
		} else {
			if code != 0 {
				c.reply(req.cookie, code, nil)
				continue
			}
			if c.budget.full(req.cost()) {
				flush()
			}
			if err := c.budget.acquire(ctx, req.cost()); err != nil {
				return endShutdown
			}
		}
		c.workers.Add(1)
		if req.typ == cmdRead && req.length > 0 && av != nil {
			hold := c.br.Buffered() >= requestHeaderLen
			c.readAsync(av, req, hold)
			held = held || hold
			continue
		}
		if req.typ == cmdWrite && req.length > 0 && av != nil {
			hold := c.br.Buffered() >= requestHeaderLen
			c.writeAsync(av, req, hold)
			held = held || hold
			continue
		}
		flush() // keep the order of sends as the client sent them, mostly
		go c.serve(req)
	}
}

// writeAsync serves a write through an AsyncVolume, like readAsync.
func (c *conn) writeAsync(av blockdev.AsyncVolume, r request, hold bool) {
	var flags blockdev.WriteFlags
	if r.flags&cmdFlagFUA != 0 {
		flags |= blockdev.FUA
	}
	n := int64(r.length)
	av.WriteAtAsync(c.opCtx, r.buf, int64(r.off), flags, hold, func(err error) {
		bufpool.Put(r.buf)
		if err == nil {
			c.srv.stats.bytesWritten.Add(uint64(n))
		}
		c.send(r.cookie, c.errorCode(err, r.typ), nil, true)
		c.budget.release(r.cost())
		c.workers.Done()
	})
}

// readAsync serves a read through an AsyncVolume (the reader loop sends,
// the answer's arrival replies); like serve, it replies, releases the
// budget and ends the worker.
func (c *conn) readAsync(av blockdev.AsyncVolume, r request, hold bool) {
	off, n := int64(r.off), int64(r.length)
	start := off &^ (minBlockSize - 1)
	end := min((off+n+minBlockSize-1)&^(minBlockSize-1), int64(c.size))
	buf := bufpool.Get(int(end - start))
	av.ReadAtAsync(c.opCtx, buf, start, hold, func(err error) {
		if err == nil {
			c.srv.stats.bytesRead.Add(uint64(n))
			c.send(r.cookie, 0, buf[off-start:off-start+n], true)
		} else {
			c.send(r.cookie, c.errorCode(err, r.typ), nil, true)
		}
		bufpool.Put(buf)
		c.budget.release(r.cost())
		c.workers.Done()
	})
}

func (c *conn) readEnd(ctx context.Context) endReason {
	if ctx.Err() != nil {
		return endShutdown
	}
	return endGone
}

// validate checks a request against the export; it returns an NBD error
// or 0.
func (c *conn) validate(r *request) uint32 {
	allowed := cmdFlagFUA // valid on every command, ignored where moot
	isWrite := false
	switch r.typ {
	case cmdRead, cmdFlush, cmdCache:
	case cmdWrite, cmdTrim:
		isWrite = true
	case cmdWriteZeroes:
		isWrite = true
		allowed |= cmdFlagNoHole | cmdFlagFastZero
	default:
		return errInval // BLOCK_STATUS, RESIZE and unknown commands
	}
	if r.flags&^allowed != 0 {
		return errInval
	}
	if isWrite && c.readOnly {
		return errPerm
	}
	if r.typ == cmdFlush {
		return 0
	}
	if (r.typ == cmdRead || r.typ == cmdWrite) && r.length > maxPayload {
		return errInval
	}
	end := r.off + uint64(r.length)
	if end < r.off || end > c.size {
		if r.typ == cmdWrite || r.typ == cmdWriteZeroes {
			return errNoSpc
		}
		return errInval
	}
	if (r.typ == cmdWrite || r.typ == cmdWriteZeroes) && (r.off|uint64(r.length))%minBlockSize != 0 {
		return errInval
	}
	return 0
}

// serve executes one request and replies. It runs on its own goroutine,
// owned by the connection (workers).
func (c *conn) serve(r request) {
	defer c.workers.Done()
	defer c.budget.release(r.cost())
	ctx, vol := c.opCtx, c.vol
	off, n := int64(r.off), int64(r.length)
	var err error
	switch r.typ {
	case cmdRead:
		if n == 0 {
			break
		}
		// Reads need not be aligned: read the covering sectors.
		start := off &^ (minBlockSize - 1)
		end := min((off+n+minBlockSize-1)&^(minBlockSize-1), int64(c.size))
		buf := bufpool.Get(int(end - start))
		if err = vol.ReadAt(ctx, buf, start); err == nil {
			c.srv.stats.bytesRead.Add(uint64(n))
			c.reply(r.cookie, 0, buf[off-start:off-start+n])
			bufpool.Put(buf)
			return
		}
		bufpool.Put(buf)
	case cmdWrite:
		var flags blockdev.WriteFlags
		if r.flags&cmdFlagFUA != 0 {
			flags |= blockdev.FUA
		}
		if n > 0 {
			err = vol.WriteAt(ctx, r.buf, off, flags)
		}
		bufpool.Put(r.buf)
		if err == nil {
			c.srv.stats.bytesWritten.Add(uint64(n))
		}
	case cmdFlush:
		err = vol.Flush(ctx)
	case cmdTrim:
		// A trim is advisory: discard only the whole sectors inside.
		start := (off + minBlockSize - 1) &^ (minBlockSize - 1)
		end := (off + n) &^ (minBlockSize - 1)
		if end > start {
			err = vol.Unmap(ctx, start, end-start)
		}
		if err == nil && r.flags&cmdFlagFUA != 0 {
			err = vol.Flush(ctx)
		}
	case cmdWriteZeroes:
		// FAST_ZERO needs no check: zeroing runs in the data servers and
		// is never slower than writing zeros.
		if n > 0 {
			err = vol.WriteZeroes(ctx, off, n, r.flags&cmdFlagNoHole == 0)
		}
		if err == nil && r.flags&cmdFlagFUA != 0 {
			err = vol.Flush(ctx)
		}
	case cmdCache:
		// Nothing to prefetch into: the volume has no server-side cache.
	}
	c.reply(r.cookie, c.errorCode(err, r.typ), nil)
}

// errorCode maps a volume error to the protocol's errno subset.
func (c *conn) errorCode(err error, typ uint16) uint32 {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, blockdev.ErrOutOfRange):
		if typ == cmdWrite || typ == cmdWriteZeroes {
			return errNoSpc
		}
		return errInval
	case errors.Is(err, blockdev.ErrUnaligned):
		return errInval
	case errors.Is(err, blockdev.ErrReadOnly):
		return errPerm
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return errShutdown
	}
	// ErrIO, ErrUnavailable (after the volume's own retries) and anything
	// unexpected. Log the first per connection; the rest are counted.
	if c.ioErrLogged.CompareAndSwap(false, true) {
		c.log.Warn("nbd: volume i/o failed; replying EIO (further failures on this connection are not logged)", "err", err)
	}
	return errIO
}

// reply sends a simple reply. Safe for concurrent use. data, if any, is
// copied or written before reply returns.
func (c *conn) reply(cookie uint64, code uint32, data []byte) { c.send(cookie, code, data, false) }

// send appends a reply to the write buffer; the last of the replies being
// sent concurrently writes the buffer, unless hold is set: then it stays
// until flushHeld (a full buffer is written anyway).
func (c *conn) send(cookie uint64, code uint32, data []byte, hold bool) {
	if code != 0 {
		c.srv.stats.errors.Add(1)
	}
	c.pending.Add(1)
	c.wmu.Lock()
	hadErr := c.werr != nil
	if !hadErr {
		var h [replyHeaderLen]byte
		binary.BigEndian.PutUint32(h[0:], simpleReplyMagic)
		binary.BigEndian.PutUint32(h[4:], code)
		binary.BigEndian.PutUint64(h[8:], cookie)
		c.wbuf = append(c.wbuf, h[:]...)
		if len(data) > 0 {
			if len(c.wbuf)+len(data) <= cap(c.wbuf) {
				c.wbuf = append(c.wbuf, data...)
			} else {
				bufs := net.Buffers{c.wbuf, data}
				_, c.werr = bufs.WriteTo(c.nc)
				c.wbuf = c.wbuf[:0]
			}
		}
	}
	// The last pending reply flushes: whoever else is pending will take
	// the lock after us and flush in turn.
	if c.pending.Add(-1) == 0 && c.werr == nil && len(c.wbuf) > 0 {
		if hold && len(c.wbuf) < cap(c.wbuf)/2 {
			c.held.Store(true)
		} else {
			_, c.werr = c.nc.Write(c.wbuf)
			c.wbuf = c.wbuf[:0]
			c.held.Store(false)
		}
	}
	var failed error
	if !hadErr {
		failed = c.werr
	}
	c.wmu.Unlock()
	if failed != nil {
		c.sendFailed(failed)
	}
}

// flushHeld writes replies held back by send; it is the connection's idle
// hook (blockdev.AsyncVolume.OnIdle).
func (c *conn) flushHeld() {
	if !c.held.Load() {
		return
	}
	c.wmu.Lock()
	var failed error
	if c.held.Swap(false) && c.werr == nil && len(c.wbuf) > 0 {
		_, c.werr = c.nc.Write(c.wbuf)
		c.wbuf = c.wbuf[:0]
		failed = c.werr
	}
	c.wmu.Unlock()
	if failed != nil {
		c.sendFailed(failed)
	}
}

func (c *conn) sendFailed(err error) {
	if !errors.Is(err, net.ErrClosed) && !errors.Is(err, os.ErrDeadlineExceeded) {
		c.log.Debug("nbd: send reply failed; dropping connection", "err", err)
	}
	// Unblock the reader; the client cannot get its answers any more.
	c.opCancel()
	c.nc.Close()
}

// budget bounds requests in flight on a connection and the payload memory
// they hold. Only the reader acquires, so one wake-up channel suffices.
type budget struct {
	mu    sync.Mutex
	count int
	bytes int64
	wake  chan struct{}
}

// full reports whether acquire would wait now.
func (b *budget) full(cost int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return !(b.count < maxInFlight && (b.bytes+cost <= maxInFlightBytes || b.bytes == 0))
}

func (b *budget) acquire(ctx context.Context, cost int64) error {
	for {
		b.mu.Lock()
		// A request bigger than the whole byte budget still runs alone.
		if b.count < maxInFlight && (b.bytes+cost <= maxInFlightBytes || b.bytes == 0) {
			b.count++
			b.bytes += cost
			b.mu.Unlock()
			return nil
		}
		b.mu.Unlock()
		select {
		case <-b.wake:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (b *budget) release(cost int64) {
	b.mu.Lock()
	b.count--
	b.bytes -= cost
	b.mu.Unlock()
	select {
	case b.wake <- struct{}{}:
	default:
	}
}
