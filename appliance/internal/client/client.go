// Package client is Cairn's data client (the SDC): it maps volume ranges to
// chunks, chunks to placement groups, groups to their primary SDS, sends
// the requests, and retries across placement changes. Every frontend (NBD,
// SCSI) and the SDSs themselves (server-side copy) use it.
package client

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/cairn-storage/cairn/appliance/internal/blockdev"
	"github.com/cairn-storage/cairn/appliance/internal/catalog"
	"github.com/cairn-storage/cairn/appliance/internal/model"
	"github.com/cairn-storage/cairn/appliance/internal/placement"
	"github.com/cairn-storage/cairn/appliance/internal/wire"
)

// Cluster is a connection to a Cairn cluster's data path.
type Cluster struct {
	Cat *catalog.Catalog
	log *slog.Logger
	// RetryFor bounds how long one chunk request keeps retrying through
	// map changes and unreachable SDSs before failing with ErrUnavailable.
	RetryFor time.Duration
	// AttemptTimeout bounds one attempt (a partitioned SDS never answers).
	AttemptTimeout time.Duration
	// ConnsPerSDS is the number of TCP connections to each SDS.
	ConnsPerSDS int
	// MapAddr rewrites SDS addresses before dialling (nil: as registered),
	// for clients behind NAT or port forwarding (e.g. a test guest).
	MapAddr func(addr string) string
	// Security is the handshake every connection to an SDS runs (set
	// before the first request; nil: mode none). The client accepts any
	// server holding an sds certificate of the cluster, not a particular
	// name: the catalog's SDS names can be changed through the API, the
	// name in a certificate cannot, and every SDS may hold any chunk.
	Security *wire.Security

	mu    sync.RWMutex
	peers map[string]*wire.Client

	idleMu  sync.RWMutex
	idleFns map[uint64]func()
	idleSeq uint64
}

// FlushHeld sends the requests held back by ReadAtAsync and WriteAtAsync
// (on every connection of the cluster, not only this volume's).
func (v *Volume) FlushHeld() { v.c.FlushHeld() }

// FlushHeld sends the requests held back on every connection.
func (c *Cluster) FlushHeld() {
	c.mu.RLock()
	defer c.mu.RUnlock()
	for _, p := range c.peers {
		p.FlushHeld()
	}
}

// OnIdle on a volume registers with its cluster (see Cluster.OnIdle).
func (v *Volume) OnIdle(f func()) (cancel func()) { return v.c.OnIdle(f) }

// OnIdle registers f to run after ReadAtAsync and WriteAtAsync callbacks,
// as blockdev.AsyncVolume describes. The returned function unregisters f.
func (c *Cluster) OnIdle(f func()) (cancel func()) {
	c.idleMu.Lock()
	defer c.idleMu.Unlock()
	if c.idleFns == nil {
		c.idleFns = map[uint64]func(){}
	}
	c.idleSeq++
	id := c.idleSeq
	c.idleFns[id] = f
	return func() {
		c.idleMu.Lock()
		delete(c.idleFns, id)
		c.idleMu.Unlock()
	}
}

func (c *Cluster) runIdle() {
	c.idleMu.RLock()
	defer c.idleMu.RUnlock()
	for _, f := range c.idleFns {
		f()
	}
}

// New returns a data client over a catalog.
func New(cat *catalog.Catalog, log *slog.Logger) *Cluster {
	return &Cluster{Cat: cat, log: log, RetryFor: 60 * time.Second, AttemptTimeout: 5 * time.Second, ConnsPerSDS: 2, peers: map[string]*wire.Client{}}
}

// Close closes every connection.
func (c *Cluster) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.peers {
		p.Close()
	}
	c.peers = map[string]*wire.Client{}
}

// Peer returns the (shared) wire client for an address.
func (c *Cluster) Peer(addr string) *wire.Client {
	c.mu.RLock()
	p := c.peers[addr]
	c.mu.RUnlock()
	if p != nil {
		return p
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	p = c.peers[addr]
	if p == nil {
		dial := addr
		if c.MapAddr != nil {
			dial = c.MapAddr(addr)
		}
		p = wire.NewClient(dial, c.ConnsPerSDS)
		p.Security = c.Security
		p.OnIdle = c.runIdle
		p.Together = smallRead
		c.peers[addr] = p
	}
	return p
}

// smallRead: the reads an SDS serves on its connection's reader go
// together on a peer's first connection (wire.Client.Together). Their
// answers then leave the SDS in bursts and reach one reader here. Spread
// over two connections, as before, they cost 1.3-1.6x the context switches
// and 1.3-1.4x the system calls per read at QD 8-32 (same-run A/Bs,
// docs/benchmarks.md, "Small reads on one connection"). Writes and
// large reads still use every connection. A read the page cache cannot
// answer at once does not hold the others up: the SDS serves it off the
// reader (wire.WouldBlock).
func smallRead(r *wire.Request) bool { return r.Op == wire.OpRead && r.Length <= wire.MaxInlineRead }

// ErrNoVolume: no such volume.
var ErrNoVolume = errors.New("no such volume")

// Open returns a volume by name or id.
func (c *Cluster) Open(ctx context.Context, name string) (*Volume, error) {
	id, v, ok := c.Cat.VolumeByName(name)
	if !ok {
		if err := c.Cat.Refresh(ctx); err != nil {
			return nil, err
		}
		if id, v, ok = c.Cat.VolumeByName(name); !ok {
			return nil, fmt.Errorf("volume %q: %w", name, ErrNoVolume)
		}
	}
	return c.volume(id, v)
}

// OpenID returns a volume by wire id.
func (c *Cluster) OpenID(id uint64) (*Volume, error) {
	v, ok := c.Cat.Volume(id)
	if !ok {
		return nil, fmt.Errorf("volume %016x: %w", id, ErrNoVolume)
	}
	return c.volume(id, v)
}

func (c *Cluster) volume(id uint64, v model.Volume) (*Volume, error) {
	vol := &Volume{c: c, id: id, name: v.Name, size: v.Size, thin: v.Thin, serial: v.Serial}
	if w, err := hex.DecodeString(v.WWN); err == nil && len(w) == 16 {
		copy(vol.wwn[:], w)
	}
	return vol, nil
}

// Do sends one chunk-level request to the current primary of the chunk
// holding req.Offset, retrying across epoch changes and unreachable SDSs.
// Every attempt sends req again, with Epoch set to that of the map naming
// the primary; req.OnRetry, if set, runs after each attempt that may have
// taken effect (no answer, or StatusUnavailable), so the next one says so.
func (c *Cluster) Do(ctx context.Context, req *wire.Request, dst []byte) (*wire.Response, error) {
	chunk := req.Offset / model.ChunkSize
	deadline := time.Now().Add(c.RetryFor)
	backoff := 20 * time.Millisecond
	var lastErr error
	for attempt := 0; ; attempt++ {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if attempt > 0 {
			if time.Now().After(deadline) {
				return nil, fmt.Errorf("volume %016x chunk %d: %w (last error: %v)", req.Volume, chunk, blockdev.ErrUnavailable, lastErr)
			}
			// Wait for a map/liveness change or a short backoff.
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-c.Cat.Changed():
			case <-time.After(backoff):
			}
			backoff = min(backoff*2, 500*time.Millisecond)
		}
		addr, epoch, err := c.primary(req.Volume, chunk)
		if err != nil {
			if _, known := c.Cat.Volume(req.Volume); errors.Is(err, errNoMap) && !known {
				return nil, fmt.Errorf("volume %016x: %w", req.Volume, ErrNoVolume)
			}
			lastErr = err
			continue
		}
		req.Epoch = epoch
		actx, cancel := context.WithTimeout(ctx, c.AttemptTimeout)
		resp, err := c.Peer(addr).Do(actx, req, dst)
		cancel()
		if err == nil {
			return resp, nil
		}
		var se *wire.StatusError
		ambiguous := !errors.As(err, &se) || se.Status == wire.StatusUnavailable
		if ambiguous && req.OnRetry != nil {
			req.OnRetry(req)
		}
		if wire.WaitIfStale(ctx, c.Cat, err) {
			lastErr = err
			continue
		}
		if errors.As(err, &se) {
			switch se.Status {
			case wire.StatusNotPrimary, wire.StatusUnavailable:
				lastErr = err
				continue
			}
			return resp, err
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		lastErr = err // connection refused/reset, attempt timeout: retry
	}
}

func pgOf(vol, chunk uint64, n int) int { return placement.PG(vol, chunk, n) }

var errNoMap = errors.New("no placement map for the volume's pool yet")

// primary finds a chunk's live primary and the epoch of the map naming it.
func (c *Cluster) primary(vol, chunk uint64) (addr string, epoch uint64, err error) {
	route, ok := c.Cat.ChunkRoute(vol, chunk, pgOf)
	if !ok || len(route.Copies) == 0 {
		return "", 0, errNoMap
	}
	addr, live := c.Cat.SDSAddress(route.Copies[0].SDSID)
	if !live {
		return "", 0, fmt.Errorf("primary SDS %s is not live", route.Copies[0].SDSID)
	}
	return addr, route.Epoch, nil
}

// Volume is an open Cairn volume; it implements blockdev.Volume.
type Volume struct {
	c      *Cluster
	id     uint64
	name   string
	size   int64
	thin   bool
	wwn    [16]byte
	serial string
}

var _ blockdev.AsyncVolume = (*Volume)(nil)

func (v *Volume) Name() string      { return v.name }
func (v *Volume) ID() uint64        { return v.id }
func (v *Volume) Size() int64       { return v.size }
func (v *Volume) WWN() [16]byte     { return v.wwn }
func (v *Volume) Serial() string    { return v.serial }
func (v *Volume) Thin() bool        { return v.thin }
func (v *Volume) Cluster() *Cluster { return v.c }

// pieces splits [off, off+n) at chunk boundaries and runs fn on each, in
// parallel when there are several. fn gets the piece's volume offset and
// its position relative to off.
func pieces(ctx context.Context, off, n int64, fn func(ctx context.Context, off, rel, n int64) error) error {
	first := off / model.ChunkSize
	last := (off + n - 1) / model.ChunkSize
	if n <= 0 {
		return nil
	}
	if first == last {
		return fn(ctx, off, 0, n)
	}
	var wg sync.WaitGroup
	errs := make([]error, last-first+1)
	for ch := first; ch <= last; ch++ {
		ps := max(off, ch*model.ChunkSize)
		pe := min(off+n, (ch+1)*model.ChunkSize)
		wg.Add(1)
		go func(i int64) {
			defer wg.Done()
			errs[i] = fn(ctx, ps, ps-off, pe-ps)
		}(ch - first)
	}
	wg.Wait()
	return errors.Join(errs...)
}

func mapErr(err error) error {
	var se *wire.StatusError
	if errors.As(err, &se) {
		switch se.Status {
		case wire.StatusInvalid:
			return fmt.Errorf("%w: %s", blockdev.ErrOutOfRange, se.Message)
		case wire.StatusIOError, wire.StatusChecksum, wire.StatusNoSpace:
			return fmt.Errorf("%w: %s", blockdev.ErrIO, se.Error())
		}
		return fmt.Errorf("%w: %s", blockdev.ErrIO, se.Error())
	}
	return err
}

func (v *Volume) check(off, n int64) error { return blockdev.Check(v.size, off, n) }

func (v *Volume) ReadAt(ctx context.Context, p []byte, off int64) error {
	if err := v.check(off, int64(len(p))); err != nil {
		return err
	}
	return pieces(ctx, off, int64(len(p)), func(ctx context.Context, o, rel, n int64) error {
		dst := p[rel : rel+n]
		resp, err := v.c.Do(ctx, &wire.Request{Op: wire.OpRead, Volume: v.id, Offset: uint64(o), Length: uint32(n)}, dst)
		if err != nil {
			return mapErr(err)
		}
		if len(resp.Payload) != int(n) {
			return fmt.Errorf("%w: short read from SDS (%d of %d bytes)", blockdev.ErrIO, len(resp.Payload), n)
		}
		if &resp.Payload[0] != &dst[0] {
			copy(dst, resp.Payload)
		}
		return nil
	})
}

// ReadAtAsync reads like ReadAt and reports the outcome to done, without a
// goroutine of its own in the common case: a read inside one chunk whose
// primary is live is sent at once and done runs on the connection's reader
// when the answer arrives. Reads across chunks, without a route yet, or
// whose first attempt fails go through ReadAt (retries and all) on a new
// goroutine. done, hold and the idle hooks: see blockdev.AsyncVolume.
func (v *Volume) ReadAtAsync(ctx context.Context, p []byte, off int64, hold bool, done func(error)) {
	req := &wire.Request{Op: wire.OpRead, Volume: v.id, Offset: uint64(off), Length: uint32(len(p))}
	v.async(ctx, req, p, hold, func() error { return v.ReadAt(ctx, p, off) }, func(resp *wire.Response) bool {
		if len(resp.Payload) != len(p) {
			return false
		}
		if &resp.Payload[0] != &p[0] {
			copy(p, resp.Payload)
		}
		return true
	}, done)
}

// WriteAtAsync writes like WriteAt, the way ReadAtAsync reads: p must stay
// untouched until done.
func (v *Volume) WriteAtAsync(ctx context.Context, p []byte, off int64, flags blockdev.WriteFlags, hold bool, done func(error)) {
	req := &wire.Request{Op: wire.OpWrite, Flags: wflags(flags), Volume: v.id, Offset: uint64(off), Length: uint32(len(p)), Payload: p}
	v.async(ctx, req, nil, hold, func() error { return v.WriteAt(ctx, p, off, flags) }, nil, done)
}

// async sends a one-chunk request to its primary without waiting (see
// ReadAtAsync); sync is the retrying path, taken for anything else or
// after a failed attempt; accept checks an OK answer (nil: any).
func (v *Volume) async(ctx context.Context, req *wire.Request, dst []byte, hold bool, sync func() error, accept func(*wire.Response) bool, done func(error)) {
	c := v.c
	off, n := int64(req.Offset), int64(req.Length)
	if err := v.check(off, n); err != nil {
		done(err)
		c.runIdle()
		return
	}
	slow := func() {
		go func() {
			done(sync())
			c.runIdle()
		}()
	}
	chunk := uint64(off) / model.ChunkSize
	if n == 0 || uint64(off+n-1)/model.ChunkSize != chunk {
		slow()
		return
	}
	addr, epoch, err := c.primary(v.id, chunk)
	if err != nil {
		slow()
		return
	}
	req.Epoch = epoch
	p := c.Peer(addr)
	if !hold && p.Local() {
		// Served on this goroutine, maybe for a while (a mirrored write
		// waits for its copy): the requests held before it go out first.
		c.FlushHeld()
	}
	p.Go(req, dst, c.AttemptTimeout, hold, func(resp *wire.Response, err error) {
		if err != nil || ctx.Err() != nil || (accept != nil && !accept(resp)) {
			slow() // the sync path retries, waits for map changes and maps errors
			return
		}
		done(nil)
	})
}

func wflags(f blockdev.WriteFlags) uint8 {
	if f&blockdev.FUA != 0 {
		return wire.FlagFUA
	}
	return 0
}

func (v *Volume) WriteAt(ctx context.Context, p []byte, off int64, flags blockdev.WriteFlags) error {
	if err := v.check(off, int64(len(p))); err != nil {
		return err
	}
	return pieces(ctx, off, int64(len(p)), func(ctx context.Context, o, rel, n int64) error {
		_, err := v.c.Do(ctx, &wire.Request{Op: wire.OpWrite, Flags: wflags(flags), Volume: v.id, Offset: uint64(o), Length: uint32(n), Payload: p[rel : rel+n]}, nil)
		return mapErr(err)
	})
}

// Flush asks every live SDS to make its completed writes durable: the
// primaries forwarded every write to their secondaries before acknowledging,
// so flushing all SDSs covers both copies of everything written.
func (v *Volume) Flush(ctx context.Context) error { return v.c.FlushAll(ctx) }

// FlushAll flushes every live SDS.
func (c *Cluster) FlushAll(ctx context.Context) error {
	live := c.Cat.LiveSDSs()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for id, addr := range live {
		wg.Add(1)
		go func() {
			defer wg.Done()
			actx, cancel := context.WithTimeout(ctx, c.AttemptTimeout*2)
			defer cancel()
			_, err := c.Peer(addr).Do(actx, &wire.Request{Op: wire.OpFlush, Epoch: c.Cat.Epoch()}, nil)
			if err != nil && !wire.IsStatus(err, wire.StatusStaleEpoch) {
				mu.Lock()
				errs = append(errs, fmt.Errorf("flush SDS %s: %w", id, err))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		return fmt.Errorf("%w: %v", blockdev.ErrIO, errors.Join(errs...))
	}
	return nil
}

func (v *Volume) CompareAndWrite(ctx context.Context, cmp, data []byte, off int64, flags blockdev.WriteFlags) error {
	if len(cmp) != len(data) {
		return fmt.Errorf("compare-and-write: %d compare bytes but %d write bytes: %w", len(cmp), len(data), blockdev.ErrUnaligned)
	}
	if err := v.check(off, int64(len(cmp))); err != nil {
		return err
	}
	if off/model.ChunkSize != (off+int64(len(cmp))-1)/model.ChunkSize {
		// Atomicity lives at one primary: a range across two chunks would
		// need two. No SCSI command gets here: the SCSI layer advertises
		// and enforces a MAXIMUM COMPARE AND WRITE LENGTH of one block,
		// which never crosses a chunk. Only a direct caller can ask for
		// it, and is refused rather than given a non-atomic emulation.
		return fmt.Errorf("compare-and-write across a 1 MiB chunk boundary is not atomic: %w", blockdev.ErrOutOfRange)
	}
	payload := make([]byte, 2*len(cmp))
	copy(payload, cmp)
	copy(payload[len(cmp):], data)
	req := &wire.Request{Op: wire.OpCompareWrite, Flags: wflags(flags), Volume: v.id, Offset: uint64(off), Length: uint32(len(cmp)), Payload: payload}
	// Compare-and-write is not idempotent: once an attempt may have taken
	// effect (no answer, or an answer after the primary's local write),
	// retries carry FlagRetry so the primary recognises its own data, and
	// a miscompare then cannot be told from our own earlier success: it is
	// reported as an unknown outcome, never as a miscompare.
	req.OnRetry = func(r *wire.Request) { r.Flags |= wire.FlagRetry }
	_, err := v.c.Do(ctx, req, nil)
	var se *wire.StatusError
	if errors.As(err, &se) && se.Status == wire.StatusMiscompare {
		if req.Flags&wire.FlagRetry != 0 {
			return fmt.Errorf("compare-and-write: outcome unknown after a failed attempt (the block now differs): %w", blockdev.ErrUnavailable)
		}
		return &blockdev.MiscompareError{Offset: int64(se.Aux)}
	}
	return mapErr(err)
}

func (v *Volume) WriteZeroes(ctx context.Context, off, length int64, unmap bool) error {
	if err := v.check(off, length); err != nil {
		return err
	}
	var f uint8
	if unmap || v.thin {
		f = wire.FlagUnmap
	}
	return pieces(ctx, off, length, func(ctx context.Context, o, _, n int64) error {
		_, err := v.c.Do(ctx, &wire.Request{Op: wire.OpWriteZeroes, Flags: f, Volume: v.id, Offset: uint64(o), Length: uint32(n)}, nil)
		return mapErr(err)
	})
}

func (v *Volume) WriteSame(ctx context.Context, pattern []byte, off, length int64) error {
	if len(pattern) == 0 || len(pattern)%blockdev.SectorSize != 0 || length%int64(len(pattern)) != 0 {
		return fmt.Errorf("write same: pattern of %d bytes over %d bytes: %w", len(pattern), length, blockdev.ErrUnaligned)
	}
	if err := v.check(off, length); err != nil {
		return err
	}
	if blockdev.AllZero(pattern) {
		return v.WriteZeroes(ctx, off, length, false)
	}
	return pieces(ctx, off, length, func(ctx context.Context, o, rel, n int64) error {
		// Each piece starts at a multiple of the pattern length from off,
		// so the pattern phase is preserved.
		phase := rel % int64(len(pattern))
		pat := append(append([]byte(nil), pattern[phase:]...), pattern[:phase]...)
		_, err := v.c.Do(ctx, &wire.Request{Op: wire.OpWriteSame, Volume: v.id, Offset: uint64(o), Length: uint32(n), Payload: pat}, nil)
		return mapErr(err)
	})
}

func (v *Volume) Unmap(ctx context.Context, off, length int64) error {
	if err := v.check(off, length); err != nil {
		return err
	}
	return pieces(ctx, off, length, func(ctx context.Context, o, _, n int64) error {
		_, err := v.c.Do(ctx, &wire.Request{Op: wire.OpUnmap, Flags: wire.FlagUnmap, Volume: v.id, Offset: uint64(o), Length: uint32(n)}, nil)
		return mapErr(err)
	})
}

// CopyFrom copies server side: each destination chunk's primary reads the
// source range from the source's SDSs and writes it as a mirrored write.
func (v *Volume) CopyFrom(ctx context.Context, src blockdev.Volume, srcOff, dstOff, length int64) error {
	if err := v.check(dstOff, length); err != nil {
		return err
	}
	if err := blockdev.Check(src.Size(), srcOff, length); err != nil {
		return err
	}
	if _, ok := src.(*Volume); !ok {
		return fmt.Errorf("server-side copy needs a Cairn volume as source: %w", blockdev.ErrIO)
	}
	return pieces(ctx, dstOff, length, func(ctx context.Context, o, rel, n int64) error {
		var payload [8]byte
		binary.BigEndian.PutUint64(payload[:], src.ID())
		_, err := v.c.Do(ctx, &wire.Request{Op: wire.OpCopyFrom, Volume: v.id, Offset: uint64(o), Length: uint32(n), Aux: uint64(srcOff + rel), Payload: payload[:]}, nil)
		return mapErr(err)
	})
}

// Extents reports allocation per chunk (the allocation granularity).
func (v *Volume) Extents(ctx context.Context, off, length int64) ([]blockdev.Extent, error) {
	if err := v.check(off, length); err != nil {
		return nil, err
	}
	first := off / model.ChunkSize
	last := (off + length - 1) / model.ChunkSize
	mapped := make([]bool, last-first+1)
	err := pieces(ctx, off, length, func(ctx context.Context, o, _, n int64) error {
		resp, err := v.c.Do(ctx, &wire.Request{Op: wire.OpExtents, Volume: v.id, Offset: uint64(o), Length: uint32(n)}, nil)
		if err != nil {
			return mapErr(err)
		}
		mapped[o/model.ChunkSize-first] = len(resp.Payload) == 1 && resp.Payload[0] == 1
		return nil
	})
	if err != nil {
		return nil, err
	}
	var out []blockdev.Extent
	for ch := first; ch <= last; ch++ {
		ps := max(off, ch*model.ChunkSize)
		pe := min(off+length, (ch+1)*model.ChunkSize)
		m := mapped[ch-first]
		if k := len(out); k > 0 && out[k-1].Mapped == m {
			out[k-1].Length += pe - ps
		} else {
			out = append(out, blockdev.Extent{Offset: ps, Length: pe - ps, Mapped: m})
		}
	}
	return out, nil
}
