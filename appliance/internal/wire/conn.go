package wire

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cairn-storage/cairn/appliance/internal/bufpool"
)

// ErrClosed is returned for requests on a closed client.
var ErrClosed = errors.New("wire: client closed")

// Client sends requests to one remote address over a few multiplexed TCP
// connections, redialling broken ones on the next request.
type Client struct {
	addr    string
	conns   []atomic.Pointer[clientConn]
	next    atomic.Uint64
	dialMu  sync.Mutex
	closed  atomic.Bool
	Timeout time.Duration // dial timeout
	// Security, if set (before the first request), runs the handshake on
	// every connection (see secure.go); nil is mode none.
	Security *Security
	// OnIdle, if set (before the first request), runs on a connection's
	// reader each time it has handled the answers that had arrived and is
	// about to wait for more, and after callbacks run elsewhere (timeouts,
	// a failed connection): the idle hook of blockdev.AsyncVolume.
	OnIdle func()
	// Together, if set (before the first request), sends every request it
	// is true for on the first connection and spreads the others over all
	// of them. Meant for the short requests a server serves inline (small
	// reads): sharing one reader and one writer at each end, their
	// requests and answers go in bursts (one wake-up and one send for
	// several), while large transfers keep the parallelism of every
	// connection.
	Together func(*Request) bool
	dialled  atomic.Int64
}

// Dialled is the number of connections this client has opened: none for an
// address served in this process (ServeLocal).
func (c *Client) Dialled() int64 { return c.dialled.Load() }

// NewClient returns a client for addr using n connections (n >= 1).
func NewClient(addr string, n int) *Client {
	if n < 1 {
		n = 1
	}
	return &Client{addr: addr, conns: make([]atomic.Pointer[clientConn], n), Timeout: 2 * time.Second}
}

// Addr is the remote address.
func (c *Client) Addr() string { return c.addr }

// Close closes every connection; pending requests fail.
func (c *Client) Close() {
	c.closed.Store(true)
	for i := range c.conns {
		if cc := c.conns[i].Load(); cc != nil {
			cc.fail(ErrClosed)
		}
	}
}

func (c *Client) conn(ctx context.Context, req *Request) (*clientConn, error) {
	if c.closed.Load() {
		return nil, ErrClosed
	}
	i := 0
	if c.Together == nil || !c.Together(req) {
		i = int(c.next.Add(1) % uint64(len(c.conns)))
	}
	if cc := c.conns[i].Load(); cc != nil && !cc.broken.Load() {
		return cc, nil
	}
	c.dialMu.Lock()
	defer c.dialMu.Unlock()
	if cc := c.conns[i].Load(); cc != nil && !cc.broken.Load() {
		return cc, nil
	}
	d := net.Dialer{Timeout: c.Timeout}
	nc, err := d.DialContext(ctx, "tcp", c.addr)
	if err != nil {
		return nil, fmt.Errorf("connect %s: %w", c.addr, err)
	}
	c.dialled.Add(1)
	if tc, ok := nc.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	if c.Security.mode() != ModeNone {
		hc, _, err := c.Security.dial(ctx, nc)
		if err != nil {
			nc.Close()
			return nil, fmt.Errorf("connect %s: %w", c.addr, err)
		}
		nc = hc
	}
	cc := &clientConn{c: nc, bw: bufio.NewWriterSize(nc, 256<<10), pending: map[uint64]*call{}, gone: make(chan struct{}), onIdle: c.OnIdle}
	go cc.readLoop()
	go cc.sweep()
	c.conns[i].Store(cc)
	if c.closed.Load() {
		cc.fail(ErrClosed)
		return nil, ErrClosed
	}
	return cc, nil
}

// Do sends req and waits for its response. A response payload is read into
// dst when it fits (dst may be nil); otherwise a new buffer is allocated.
// Non-OK statuses are returned as *StatusError along with the response.
func (c *Client) Do(ctx context.Context, req *Request, dst []byte) (*Response, error) {
	if ls := c.local(); ls != nil {
		return c.doLocal(ctx, ls, req, dst)
	}
	cc, err := c.conn(ctx, req)
	if err != nil {
		return nil, err
	}
	return cc.do(ctx, req, dst)
}

type call struct {
	resp Response
	dst  []byte
	err  error
	done chan struct{}
	// cb, for calls made with Go, replaces done: it runs on the reader
	// (or, at the deadline, on the sweeper) with the outcome.
	cb       func(*Response, error)
	deadline int64 // unix ns; calls made with Go only
}

// finish completes a call: its callback or its waiter.
func (cl *call) finish() {
	if cl.cb == nil {
		cl.done <- struct{}{}
		return
	}
	cb := cl.cb
	if cl.err != nil {
		cb(nil, cl.err)
		return
	}
	resp := cl.resp
	if resp.Status != StatusOK {
		cb(&resp, &StatusError{Status: resp.Status, Aux: resp.Aux, Epoch: resp.Epoch, Message: string(resp.Payload)})
		return
	}
	cb(&resp, nil)
}

// ErrTimeout fails a call made with Go that got no answer in time.
var ErrTimeout = errors.New("wire: no answer in time")

var callPool = sync.Pool{New: func() any { return &call{done: make(chan struct{}, 1)} }}

type clientConn struct {
	c       net.Conn
	wmu     sync.Mutex
	bw      *bufio.Writer
	queued  atomic.Int32
	hdr     [ReqHeader]byte
	mu      sync.Mutex
	pending map[uint64]*call
	nextID  uint64
	broken  atomic.Bool
	err     error
	gone    chan struct{} // closed by fail: stops the sweeper
	async   atomic.Int32  // calls made with Go in flight
	held    atomic.Bool   // requests sent with hold wait in bw
	onIdle  func()
}

func (cc *clientConn) idle() {
	if cc.onIdle != nil {
		cc.onIdle()
	}
}

func (cc *clientConn) fail(err error) {
	cc.mu.Lock()
	if cc.err == nil {
		cc.err = err
	}
	first := !cc.broken.Swap(true)
	p := cc.pending
	cc.pending = map[uint64]*call{}
	cc.mu.Unlock()
	if first {
		close(cc.gone)
	}
	cc.c.Close()
	for _, cl := range p {
		cl.err = cc.err
		cc.release(cl)
		cl.finish()
	}
	cc.idle()
}

// release counts a call made with Go as finished.
func (cc *clientConn) release(cl *call) {
	if cl.cb != nil {
		cc.async.Add(-1)
	}
}

// sweep fails calls made with Go that are past their deadline (a
// partitioned SDS never answers), until the connection fails.
func (cc *clientConn) sweep() {
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	var late []*call
	for {
		select {
		case <-cc.gone:
			return
		case <-t.C:
		}
		if cc.async.Load() == 0 {
			continue
		}
		now := time.Now().UnixNano()
		cc.mu.Lock()
		for id, cl := range cc.pending {
			if cl.cb != nil && now > cl.deadline {
				delete(cc.pending, id)
				late = append(late, cl)
			}
		}
		cc.mu.Unlock()
		for _, cl := range late {
			cl.err = fmt.Errorf("%w from %s", ErrTimeout, cc.c.RemoteAddr())
			cc.release(cl)
			cl.finish()
		}
		if len(late) > 0 {
			cc.idle()
		}
		late = late[:0]
	}
}

// Go sends req without waiting. done runs once, on the connection's reader
// goroutine (or the deadline sweeper), followed at some point by OnIdle,
// with the response — its payload in
// dst when it fits — or an error (a *StatusError for non-OK statuses,
// ErrTimeout after timeout, a connection error). done must not block: it
// holds up every answer on that connection. It may run before Go returns.
//
// With hold, the request may stay in the send buffer until FlushHeld (or
// any other send) writes it: blockdev.AsyncVolume's hold/flush scheme.
func (c *Client) Go(req *Request, dst []byte, timeout time.Duration, hold bool, done func(*Response, error)) {
	if ls := c.local(); ls != nil {
		c.goLocal(ls, req, dst, timeout, hold, done)
		return
	}
	cc, err := c.conn(context.Background(), req)
	if err != nil {
		done(nil, err)
		if c.OnIdle != nil {
			c.OnIdle()
		}
		return
	}
	cl := &call{dst: dst, cb: done, deadline: time.Now().Add(timeout).UnixNano()}
	cc.async.Add(1)
	if err := cc.send(req, cl, hold); err != nil {
		cc.async.Add(-1)
		done(nil, err)
		cc.idle()
	}
}

func (cc *clientConn) do(ctx context.Context, req *Request, dst []byte) (*Response, error) {
	cl := callPool.Get().(*call)
	cl.dst, cl.err, cl.resp = dst, nil, Response{}
	if err := cc.send(req, cl, false); err != nil {
		callPool.Put(cl)
		return nil, err
	}
	select {
	case <-cl.done:
	case <-ctx.Done():
		cc.mu.Lock()
		if _, ok := cc.pending[req.ID]; ok {
			delete(cc.pending, req.ID)
			cc.mu.Unlock()
			// Not put back in the pool: the reader might still see its id.
			return nil, ctx.Err()
		}
		cc.mu.Unlock()
		<-cl.done // the reader owns it and is finishing it
	}
	if cl.err != nil {
		err := cl.err
		callPool.Put(cl)
		return nil, err
	}
	resp := cl.resp
	callPool.Put(cl)
	if resp.Status != StatusOK {
		return &resp, &StatusError{Status: resp.Status, Aux: resp.Aux, Epoch: resp.Epoch, Message: string(resp.Payload)}
	}
	return &resp, nil
}

// send registers cl and writes req. An error means cl was not registered
// (the connection had failed); a failed write fails the connection, and
// with it cl.
func (cc *clientConn) send(req *Request, cl *call, hold bool) error {
	cc.mu.Lock()
	if cc.err != nil {
		err := cc.err
		cc.mu.Unlock()
		return err
	}
	cc.nextID++
	req.ID = cc.nextID
	cc.pending[req.ID] = cl
	cc.mu.Unlock()

	cc.queued.Add(1)
	cc.wmu.Lock()
	PutRequestHeader(cc.hdr[:], req)
	_, werr := cc.bw.Write(cc.hdr[:])
	if werr == nil && len(req.Payload) > 0 {
		_, werr = cc.bw.Write(req.Payload)
	}
	if cc.queued.Add(-1) == 0 && werr == nil {
		if hold {
			cc.held.Store(true)
		} else {
			werr = cc.bw.Flush()
			cc.held.Store(false)
		}
	}
	cc.wmu.Unlock()
	if werr != nil {
		cc.fail(fmt.Errorf("send to %s: %w", cc.c.RemoteAddr(), werr))
	}
	return nil
}

// FlushHeld writes requests held back by Go.
func (c *Client) FlushHeld() {
	for i := range c.conns {
		cc := c.conns[i].Load()
		if cc == nil || !cc.held.Load() {
			continue
		}
		cc.wmu.Lock()
		var werr error
		if cc.held.Swap(false) {
			werr = cc.bw.Flush()
		}
		cc.wmu.Unlock()
		if werr != nil {
			cc.fail(fmt.Errorf("send to %s: %w", cc.c.RemoteAddr(), werr))
		}
	}
}

func (cc *clientConn) readLoop() {
	br := bufio.NewReaderSize(cc.c, 256<<10)
	var hdr [RespHeader]byte
	ran := false // callbacks of Go ran since the last OnIdle
	for {
		if ran && br.Buffered() < RespHeader {
			cc.idle() // callbacks ran and we are about to wait for the network
			ran = false
		}
		if _, err := io.ReadFull(br, hdr[:]); err != nil {
			cc.fail(fmt.Errorf("connection to %s: %w", cc.c.RemoteAddr(), err))
			return
		}
		var r Response
		n, crc, want, err := ParseResponseHeader(hdr[:], &r)
		if err != nil {
			cc.fail(fmt.Errorf("from %s: %w", cc.c.RemoteAddr(), err))
			return
		}
		cc.mu.Lock()
		cl := cc.pending[r.ID]
		delete(cc.pending, r.ID)
		cc.mu.Unlock()
		var buf []byte
		switch {
		case n == 0:
		case cl != nil && n <= len(cl.dst):
			buf = cl.dst[:n]
		default:
			buf = make([]byte, n)
		}
		if n > 0 {
			if ran && br.Buffered() < n {
				// The payload is still on its way (a large read): let the
				// answers handled so far go before waiting for it.
				cc.idle()
				ran = false
			}
			if _, err := io.ReadFull(br, buf); err != nil {
				if cl != nil {
					cl.err = fmt.Errorf("connection to %s: %w", cc.c.RemoteAddr(), err)
					cc.release(cl)
					cl.finish()
				}
				cc.fail(err)
				return
			}
			crc = crc32.Update(crc, castagnoli, buf)
		}
		if crc != want {
			if cl != nil {
				cl.err = ErrChecksum
				cc.release(cl)
				cl.finish()
			}
			cc.fail(fmt.Errorf("from %s: %w", cc.c.RemoteAddr(), ErrChecksum))
			return
		}
		if cl == nil {
			continue // cancelled by its sender
		}
		r.Payload = buf
		cl.resp = r
		ran = ran || cl.cb != nil
		cc.release(cl)
		cl.finish()
	}
}

// Handler serves one request. It returns the response and, if the payload
// is a pooled buffer, a function that releases it once sent (or nil).
type Handler func(ctx context.Context, req *Request) (Response, func())

// MaxInFlight bounds concurrently served requests per connection.
const MaxInFlight = 256

// Serve accepts connections on l and serves them with h until ctx ends,
// without a handshake (mode none).
func Serve(ctx context.Context, l net.Listener, h Handler, log *slog.Logger) error {
	return ServeSecure(ctx, l, nil, h, nil, log)
}

// ServeInline is Serve where requests for which inline returns true are
// served on the connection's reader goroutine, in arrival order, and their
// replies are sent together while more requests are already buffered (one
// send for a burst). It suits short requests such as small reads: no
// goroutine hand-off, fewer system calls. Everything else gets its own
// goroutine, as with Serve, and so does an inline request whose handler
// answers WouldBlock (it runs again there, with Request.Inline false).
// There is no handshake (mode none).
func ServeInline(ctx context.Context, l net.Listener, h Handler, inline func(*Request) bool, log *slog.Logger) error {
	return ServeSecure(ctx, l, nil, h, inline, log)
}

// ServeSecure is ServeInline with sec's handshake on every connection
// before its first frame (sec nil: mode none); h finds the verified peer
// with PeerFrom(ctx).
func ServeSecure(ctx context.Context, l net.Listener, sec *Security, h Handler, inline func(*Request) bool, log *slog.Logger) error {
	var wg sync.WaitGroup
	conns := map[net.Conn]struct{}{}
	var mu sync.Mutex
	var refusals LogLimiter
	go func() {
		<-ctx.Done()
		l.Close()
		mu.Lock()
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
	}()
	defer wg.Wait()
	for {
		c, err := l.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return err
		}
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetNoDelay(true)
		}
		mu.Lock()
		conns[c] = struct{}{}
		mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			serveConn(ctx, c, sec, h, inline, log, &refusals)
			mu.Lock()
			delete(conns, c)
			mu.Unlock()
		}()
	}
}

// serveConn runs sec's handshake on c, if any, then serves its frames.
func serveConn(ctx context.Context, c net.Conn, sec *Security, h Handler, inline func(*Request) bool, log *slog.Logger, refusals *LogLimiter) {
	if sec.mode() != ModeNone {
		hc, peer, err := sec.accept(ctx, c)
		if err != nil {
			c.Close()
			if sec.OnRefused != nil && ctx.Err() == nil {
				p := ""
				if peer.Role != "" {
					p = peer.String()
				}
				sec.OnRefused(c.RemoteAddr().String(), p, err.Error())
			}
			host, _, _ := net.SplitHostPort(c.RemoteAddr().String())
			if ok, n := refusals.Allow(host + " " + refusalKind(err)); ok && ctx.Err() == nil {
				attrs := []any{"remote", c.RemoteAddr().String(), "err", err, "suppressed", n}
				if peer.Role != "" {
					attrs = append(attrs, "peer", peer.String())
				}
				log.Warn("data-path connection refused", attrs...)
			}
			return
		}
		ctx, c = context.WithValue(ctx, peerKey{}, peer), hc
	}
	sc := &serverConn{c: c, bw: bufio.NewWriterSize(c, 256<<10)}
	sc.serve(ctx, h, inline, log)
}

// refusalKind is what a refused connection's log line is rate-limited by
// (with the remote host): the error without the addresses and ports of a
// network error, which differ on every connection.
func refusalKind(err error) string {
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		return op.Err.Error()
	}
	return err.Error()
}

// maxHeld bounds the inline replies buffered before a flush.
const maxHeld = 16

// serverConn is one served connection's reply side.
type serverConn struct {
	c      net.Conn
	wmu    sync.Mutex
	bw     *bufio.Writer
	queued atomic.Int32 // replies about to be written: the last one flushes
	dirty  bool         // inline replies written but not flushed (reader only, under wmu)
	broken atomic.Bool
}

// send writes one reply. flush=false leaves it buffered (the reader flushes
// before it waits for more requests).
func (sc *serverConn) send(req *Request, resp Response, release func(), flush bool) {
	resp.ID = req.ID
	var rh [RespHeader]byte
	PutResponseHeader(rh[:], &resp)
	sc.queued.Add(1) // before the lock: a writer that sees others queued leaves the flush to them
	sc.wmu.Lock()
	if !sc.broken.Load() {
		_, err := sc.bw.Write(rh[:])
		if err == nil && len(resp.Payload) > 0 {
			_, err = sc.bw.Write(resp.Payload)
		}
		if sc.queued.Add(-1) == 0 && err == nil {
			if flush {
				err = sc.bw.Flush()
				sc.dirty = false
			} else {
				sc.dirty = true
			}
		}
		if err != nil {
			sc.broken.Store(true)
			sc.c.Close()
		}
	} else {
		sc.queued.Add(-1)
	}
	sc.wmu.Unlock()
	if release != nil {
		release()
	}
	if req.Payload != nil {
		bufpool.Put(req.Payload)
	}
}

// flushInline sends inline replies left buffered.
func (sc *serverConn) flushInline() {
	sc.wmu.Lock()
	if sc.dirty && !sc.broken.Load() {
		if err := sc.bw.Flush(); err != nil {
			sc.broken.Store(true)
			sc.c.Close()
		}
	}
	sc.dirty = false
	sc.wmu.Unlock()
}

func (sc *serverConn) serve(ctx context.Context, h Handler, inline func(*Request) bool, log *slog.Logger) {
	c := sc.c
	defer c.Close()
	br := bufio.NewReaderSize(c, 256<<10)
	sem := make(chan struct{}, MaxInFlight)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer sc.flushInline()
	var hdr [ReqHeader]byte
	held := 0 // inline replies since the last flush
	for {
		// Flush before waiting for the network, and every maxHeld replies
		// so a long burst does not hold its first answers back.
		if held > 0 && (br.Buffered() < ReqHeader || held >= maxHeld) {
			sc.flushInline()
			held = 0
		}
		req := &Request{}
		if err := ReadRequest(br, hdr[:], req, bufpool.Get); err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && ctx.Err() == nil {
				log.Debug("data-path connection closed", "remote", c.RemoteAddr().String(), "err", err)
			}
			if req.Payload != nil {
				bufpool.Put(req.Payload)
			}
			return
		}
		req.Alone = br.Buffered() < ReqHeader
		if inline != nil && inline(req) {
			req.Inline = true
			resp, release := h(ctx, req)
			if !IsWouldBlock(resp) {
				sc.send(req, resp, release, false)
				held++
				continue
			}
			// It would wait for a device: off the reader, like any other.
			if release != nil {
				release()
			}
			req.Inline = false
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, release := h(ctx, req)
			if IsWouldBlock(resp) {
				resp = misusedWouldBlock()
			}
			sc.send(req, resp, release, true)
			<-sem
		}()
	}
}

// Errorf builds an error response with a message.
func Errorf(status uint16, format string, args ...any) Response {
	return Response{Status: status, Payload: []byte(fmt.Sprintf(format, args...))}
}
