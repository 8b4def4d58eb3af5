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
}

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

func (c *Client) conn(ctx context.Context) (*clientConn, error) {
	if c.closed.Load() {
		return nil, ErrClosed
	}
	i := int(c.next.Add(1) % uint64(len(c.conns)))
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
	if tc, ok := nc.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	cc := &clientConn{c: nc, bw: bufio.NewWriterSize(nc, 256<<10), pending: map[uint64]*call{}}
	go cc.readLoop()
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
	cc, err := c.conn(ctx)
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
}

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
}

func (cc *clientConn) fail(err error) {
	cc.mu.Lock()
	if cc.err == nil {
		cc.err = err
	}
	cc.broken.Store(true)
	p := cc.pending
	cc.pending = map[uint64]*call{}
	cc.mu.Unlock()
	cc.c.Close()
	for _, cl := range p {
		cl.err = cc.err
		cl.done <- struct{}{}
	}
}

func (cc *clientConn) do(ctx context.Context, req *Request, dst []byte) (*Response, error) {
	cl := callPool.Get().(*call)
	cl.dst, cl.err, cl.resp = dst, nil, Response{}
	cc.mu.Lock()
	if cc.err != nil {
		err := cc.err
		cc.mu.Unlock()
		callPool.Put(cl)
		return nil, err
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
		werr = cc.bw.Flush()
	}
	cc.wmu.Unlock()
	if werr != nil {
		cc.fail(fmt.Errorf("send to %s: %w", cc.c.RemoteAddr(), werr))
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

func (cc *clientConn) readLoop() {
	br := bufio.NewReaderSize(cc.c, 256<<10)
	var hdr [RespHeader]byte
	for {
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
			if _, err := io.ReadFull(br, buf); err != nil {
				if cl != nil {
					cl.err = fmt.Errorf("connection to %s: %w", cc.c.RemoteAddr(), err)
					cl.done <- struct{}{}
				}
				cc.fail(err)
				return
			}
			crc = crc32.Update(crc, castagnoli, buf)
		}
		if crc != want {
			if cl != nil {
				cl.err = ErrChecksum
				cl.done <- struct{}{}
			}
			cc.fail(fmt.Errorf("from %s: %w", cc.c.RemoteAddr(), ErrChecksum))
			return
		}
		if cl == nil {
			continue // cancelled by its sender
		}
		r.Payload = buf
		cl.resp = r
		cl.done <- struct{}{}
	}
}

// Handler serves one request. It returns the response and, if the payload
// is a pooled buffer, a function that releases it once sent (or nil).
type Handler func(ctx context.Context, req *Request) (Response, func())

// MaxInFlight bounds concurrently served requests per connection.
const MaxInFlight = 256

// Serve accepts connections on l and serves them with h until ctx ends.
func Serve(ctx context.Context, l net.Listener, h Handler, log *slog.Logger) error {
	var wg sync.WaitGroup
	conns := map[net.Conn]struct{}{}
	var mu sync.Mutex
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
			serveConn(ctx, c, h, log)
			mu.Lock()
			delete(conns, c)
			mu.Unlock()
		}()
	}
}

func serveConn(ctx context.Context, c net.Conn, h Handler, log *slog.Logger) {
	defer c.Close()
	br := bufio.NewReaderSize(c, 256<<10)
	bw := bufio.NewWriterSize(c, 256<<10)
	var wmu sync.Mutex
	var queued atomic.Int32
	var broken atomic.Bool
	sem := make(chan struct{}, MaxInFlight)
	var wg sync.WaitGroup
	defer wg.Wait()
	var hdr [ReqHeader]byte
	for {
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
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, release := h(ctx, req)
			resp.ID = req.ID
			var rh [RespHeader]byte
			PutResponseHeader(rh[:], &resp)
			queued.Add(1) // before the lock: a writer that sees others queued leaves the flush to them
			wmu.Lock()
			var err error
			if !broken.Load() {
				if _, err = bw.Write(rh[:]); err == nil && len(resp.Payload) > 0 {
					_, err = bw.Write(resp.Payload)
				}
				if queued.Add(-1) == 0 && err == nil {
					err = bw.Flush()
				}
				if err != nil {
					broken.Store(true)
					c.Close()
				}
			} else {
				queued.Add(-1)
			}
			wmu.Unlock()
			if release != nil {
				release()
			}
			if req.Payload != nil {
				bufpool.Put(req.Payload)
			}
			<-sem
		}()
	}
}

// Errorf builds an error response with a message.
func Errorf(status uint16, format string, args ...any) Response {
	return Response{Status: status, Payload: []byte(fmt.Sprintf(format, args...))}
}
