package wire

// local.go: a server in the same process as its client. When a frontend and
// an SDS run in one process (cairn colocate), the frontend's requests for
// the chunks whose primary is that SDS need no network hop: the Client for
// the SDS's address calls its handler directly. That saves two TCP sends
// and two wake-ups of another process per request (docs/benchmarks.md,
// "One process for a frontend and an SDS").
//
// Nothing else changes for the request: the handler checks its epoch,
// route and role the same way, and, when the client has an identity, it
// sees the client's own peer (PeerFrom), so the SDS's role checks apply as
// if the request had come through a handshake. Trust is the process: only
// code in it can register or reach a local server.

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"time"
)

// localServer is a handler registered with ServeLocal.
type localServer struct {
	h      Handler
	inline func(*Request) bool
	// busy counts the requests being served; stop sets stopped, which
	// refuses later ones, and waits for busy to drain. (Not a lock held
	// across the handler: a handler may call the same server, as a
	// server-side copy reading from its own SDS does.)
	busy    atomic.Int64
	stopped atomic.Bool
}

// errLocalStopped: the local server stopped between the lookup and the
// call; the data client retries, as after a refused connection.
var errLocalStopped = errors.New("wire: the server in this process stopped")

var (
	localMu sync.Mutex
	// locals maps an address to its server in this process; copied on
	// every change, so a lookup is one atomic load and a map access.
	locals atomic.Pointer[map[string]*localServer]
)

// ServeLocal makes h answer the requests that Clients of this process send
// to addr, without the network, until stop is called. inline says which
// requests may run on the sender's goroutine when nothing else is at hand
// (the server's inline rule, ServeInline); the others get a goroutine of
// their own, as on a served connection. A second registration of the same
// address replaces the first; stop removes only its own, and returns once
// the requests it is serving have been answered.
func ServeLocal(addr string, h Handler, inline func(*Request) bool) (stop func()) {
	ls := &localServer{h: h, inline: inline}
	setLocal(addr, ls, nil)
	return func() {
		setLocal(addr, nil, ls)
		ls.stopped.Store(true)
		for ls.busy.Load() > 0 {
			time.Sleep(time.Millisecond)
		}
	}
}

// setLocal publishes a copy of the registrations with addr set to ls (nil:
// removed), if addr is registered to was (nil: whatever it is).
func setLocal(addr string, ls, was *localServer) {
	localMu.Lock()
	defer localMu.Unlock()
	m := map[string]*localServer{}
	if old := locals.Load(); old != nil {
		if was != nil && (*old)[addr] != was {
			return
		}
		maps.Copy(m, *old)
	}
	if ls == nil {
		delete(m, addr)
	} else {
		m[addr] = ls
	}
	locals.Store(&m)
}

// local returns the server of this process at the client's address, if any.
func (c *Client) local() *localServer {
	m := locals.Load()
	if m == nil || len(*m) == 0 {
		return nil
	}
	return (*m)[c.addr]
}

// Local reports whether this client's address is served in this process
// (ServeLocal): its requests then take no network hop.
func (c *Client) Local() bool { return c.local() != nil }

// peerContext gives the handler the client's identity, as a handshake
// would (mode none: no peer, as on a connection of mode none).
func (c *Client) peerContext(ctx context.Context) context.Context {
	if c.Security.mode() == ModeNone || c.Security.ID == nil {
		return ctx
	}
	return context.WithValue(ctx, peerKey{}, c.Security.ID.Peer())
}

// serve runs one request on the local server and returns its answer the
// way a connection's reader would: the payload in dst when it fits, else
// in a new buffer (the handler's own is released before this returns), and
// a non-OK status as a *StatusError beside the response.
func (ls *localServer) serve(ctx context.Context, req *Request, dst []byte) (*Response, error) {
	if len(req.Payload) > MaxPayload {
		return nil, fmt.Errorf("%w: %d bytes", ErrTooLarge, len(req.Payload))
	}
	ls.busy.Add(1)
	defer ls.busy.Add(-1)
	if ls.stopped.Load() {
		return nil, errLocalStopped
	}
	resp, release := ls.h(ctx, req)
	if IsWouldBlock(resp) {
		if release != nil {
			release()
		}
		if req.Inline {
			return nil, errWouldBlock
		}
		resp = misusedWouldBlock()
	}
	if n := len(resp.Payload); n > 0 {
		var b []byte
		if n <= len(dst) {
			b = dst[:n]
		} else {
			b = make([]byte, n)
		}
		copy(b, resp.Payload)
		resp.Payload = b
	}
	if release != nil {
		release()
	}
	if resp.Status != StatusOK {
		return &resp, &StatusError{Status: resp.Status, Aux: resp.Aux, Epoch: resp.Epoch, Message: string(resp.Payload)}
	}
	return &resp, nil
}

// doLocal is Do for a local server.
func (c *Client) doLocal(ctx context.Context, ls *localServer, req *Request, dst []byte) (*Response, error) {
	if c.closed.Load() {
		return nil, ErrClosed
	}
	req.Inline = false // the caller waits for it anyway
	return ls.serve(c.peerContext(ctx), req, dst)
}

// goLocal is Go for a local server: done runs on this goroutine for a
// request the server would serve inline and nothing is held behind it
// (hold false: the frontend has no more requests at hand), else on a
// goroutine of its own (also when the inline attempt answers WouldBlock:
// the request then runs again there); OnIdle follows it either way.
func (c *Client) goLocal(ls *localServer, req *Request, dst []byte, timeout time.Duration, hold bool, done func(*Response, error)) {
	serve := func() (*Response, error) {
		ctx, cancel := context.WithTimeout(c.peerContext(context.Background()), timeout)
		defer cancel()
		return ls.serve(ctx, req, dst)
	}
	finish := func(resp *Response, err error) {
		done(resp, err)
		if c.OnIdle != nil {
			c.OnIdle()
		}
	}
	req.Alone = !hold
	if !hold && ls.inline != nil && ls.inline(req) && !c.closed.Load() {
		req.Inline = true
		if resp, err := serve(); !errors.Is(err, errWouldBlock) {
			finish(resp, err)
			return
		}
		req.Inline = false // it would wait for a device: on a goroutine, like the rest
	}
	go func() {
		if c.closed.Load() {
			finish(nil, ErrClosed)
			return
		}
		finish(serve())
	}()
}

// errWouldBlock: the local handler answered WouldBlock to an inline request.
var errWouldBlock = errors.New("wire: would block")
