package nbd

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/cairn-storage/cairn/appliance/internal/blockdev"
)

// mapResolver exports a fixed set of volumes to every client.
type mapResolver struct {
	mu       sync.Mutex
	vols     map[string]blockdev.Volume
	readOnly map[string]bool
	listErr  error
}

func newResolver(vols ...blockdev.Volume) *mapResolver {
	r := &mapResolver{vols: map[string]blockdev.Volume{}, readOnly: map[string]bool{}}
	for _, v := range vols {
		r.vols[v.Name()] = v
	}
	return r
}

func (r *mapResolver) Lookup(_ context.Context, name string, _ net.Addr) (blockdev.Volume, bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	v, ok := r.vols[name]
	if !ok {
		return nil, false, ErrUnknownExport
	}
	return v, r.readOnly[name], nil
}

func (r *mapResolver) List(context.Context, net.Addr) ([]string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.listErr != nil {
		return nil, r.listErr
	}
	var names []string
	for n := range r.vols {
		names = append(names, n)
	}
	sort.Strings(names)
	return names, nil
}

func testLogger(t testing.TB) *slog.Logger {
	if os.Getenv("NBD_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return nil
}

// startServer serves r on a loopback TCP port until the test ends, and
// checks that Serve returns promptly after cancellation. opts adjust the
// server before it starts (TLS).
func startServer(t testing.TB, r Resolver, opts ...func(*Server)) (*Server, string) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := NewServer(r, testLogger(t))
	srv.ShutdownGrace = 2 * time.Second
	for _, o := range opts {
		o(srv)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, l) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("Serve did not return 10s after cancel")
		}
	})
	return srv, l.Addr().String()
}

// rawClient speaks NBD frame by frame, so tests can send anything.
type rawClient struct {
	t  testing.TB
	c  net.Conn
	br *bufio.Reader
	mu sync.Mutex // serialises writes from several goroutines
}

func dialRaw(t testing.TB, addr string) *rawClient {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(30 * time.Second))
	return &rawClient{t: t, c: c, br: bufio.NewReader(c)}
}

func (rc *rawClient) write(b []byte) {
	rc.t.Helper()
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if _, err := rc.c.Write(b); err != nil {
		rc.t.Fatalf("write: %v", err)
	}
}

func (rc *rawClient) read(n int) []byte {
	rc.t.Helper()
	b := make([]byte, n)
	if _, err := io.ReadFull(rc.br, b); err != nil {
		rc.t.Fatalf("read %d bytes: %v", n, err)
	}
	return b
}

// expectClosed checks that the server closed the connection.
func (rc *rawClient) expectClosed() {
	rc.t.Helper()
	rc.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	b, err := io.ReadAll(rc.br)
	if err != nil {
		rc.t.Fatalf("expected the server to close the connection; got %v after %d bytes", err, len(b))
	}
	if len(b) != 0 {
		rc.t.Fatalf("expected the server to close the connection; got %d more bytes", len(b))
	}
}

// handshake reads the greeting and sends client flags.
func (rc *rawClient) handshake(clientFlags uint32) {
	rc.t.Helper()
	g := rc.read(18)
	if binary.BigEndian.Uint64(g) != nbdMagic || binary.BigEndian.Uint64(g[8:]) != optMagic {
		rc.t.Fatalf("bad greeting %x", g)
	}
	if f := binary.BigEndian.Uint16(g[16:]); f != flagFixedNewstyle|flagNoZeroes {
		rc.t.Fatalf("handshake flags %#x", f)
	}
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], clientFlags)
	rc.write(b[:])
}

func optionFrame(opt uint32, data []byte) []byte {
	b := make([]byte, 16+len(data))
	binary.BigEndian.PutUint64(b, optMagic)
	binary.BigEndian.PutUint32(b[8:], opt)
	binary.BigEndian.PutUint32(b[12:], uint32(len(data)))
	copy(b[16:], data)
	return b
}

func (rc *rawClient) option(opt uint32, data []byte) { rc.write(optionFrame(opt, data)) }

type optReply struct {
	opt, typ uint32
	data     []byte
}

func (rc *rawClient) optReply() optReply {
	rc.t.Helper()
	h := rc.read(20)
	if m := binary.BigEndian.Uint64(h); m != optReplyMagic {
		rc.t.Fatalf("bad option reply magic %#x", m)
	}
	n := binary.BigEndian.Uint32(h[16:])
	if n > 1<<20 {
		rc.t.Fatalf("option reply of %d bytes", n)
	}
	return optReply{binary.BigEndian.Uint32(h[8:]), binary.BigEndian.Uint32(h[12:]), rc.read(int(n))}
}

func infoData(name string, infos ...uint16) []byte {
	b := make([]byte, 4+len(name)+2+2*len(infos))
	binary.BigEndian.PutUint32(b, uint32(len(name)))
	copy(b[4:], name)
	binary.BigEndian.PutUint16(b[4+len(name):], uint16(len(infos)))
	for i, in := range infos {
		binary.BigEndian.PutUint16(b[6+len(name)+2*i:], in)
	}
	return b
}

type exportInfo struct {
	size             uint64
	flags            uint16
	minBS, prefBS    uint32
	maxBS            uint32
	name, desc       string
	gotName, gotDesc bool
}

// infoOrGo sends INFO or GO and collects the replies up to the ACK; it
// returns the error reply type instead if there is one.
func (rc *rawClient) infoOrGo(opt uint32, name string, infos ...uint16) (exportInfo, uint32) {
	rc.t.Helper()
	rc.option(opt, infoData(name, infos...))
	var ei exportInfo
	for {
		r := rc.optReply()
		if r.opt != opt {
			rc.t.Fatalf("reply for option %d, want %d", r.opt, opt)
		}
		switch r.typ {
		case repAck:
			return ei, 0
		case repInfo:
			switch binary.BigEndian.Uint16(r.data) {
			case infoExport:
				ei.size = binary.BigEndian.Uint64(r.data[2:])
				ei.flags = binary.BigEndian.Uint16(r.data[10:])
			case infoBlockSize:
				ei.minBS = binary.BigEndian.Uint32(r.data[2:])
				ei.prefBS = binary.BigEndian.Uint32(r.data[6:])
				ei.maxBS = binary.BigEndian.Uint32(r.data[10:])
			case infoName:
				ei.name, ei.gotName = string(r.data[2:]), true
			case infoDescription:
				ei.desc, ei.gotDesc = string(r.data[2:]), true
			}
		default:
			if r.typ&(1<<31) == 0 {
				rc.t.Fatalf("unexpected reply type %d", r.typ)
			}
			return ei, r.typ
		}
	}
}

// connect negotiates with GO and returns the export size.
func connect(t testing.TB, addr, name string) (*rawClient, exportInfo) {
	t.Helper()
	rc := dialRaw(t, addr)
	rc.handshake(flagCFixedNewstyle | flagCNoZeroes)
	ei, e := rc.infoOrGo(optGo, name)
	if e != 0 {
		t.Fatalf("GO %q: error reply %#x", name, e)
	}
	return rc, ei
}

func requestFrame(typ, flags uint16, cookie, off uint64, length uint32, payload []byte) []byte {
	return appendRequest(nil, typ, flags, cookie, off, length, payload)
}

func appendRequest(b []byte, typ, flags uint16, cookie, off uint64, length uint32, payload []byte) []byte {
	b = binary.BigEndian.AppendUint32(b, requestMagic)
	b = binary.BigEndian.AppendUint16(b, flags)
	b = binary.BigEndian.AppendUint16(b, typ)
	b = binary.BigEndian.AppendUint64(b, cookie)
	b = binary.BigEndian.AppendUint64(b, off)
	b = binary.BigEndian.AppendUint32(b, length)
	return append(b, payload...)
}

func (rc *rawClient) request(typ, flags uint16, cookie, off uint64, length uint32, payload []byte) {
	rc.write(requestFrame(typ, flags, cookie, off, length, payload))
}

// reply reads a simple reply header: error and cookie.
func (rc *rawClient) reply() (uint32, uint64) {
	rc.t.Helper()
	h := rc.read(replyHeaderLen)
	if m := binary.BigEndian.Uint32(h); m != simpleReplyMagic {
		rc.t.Fatalf("bad reply magic %#x", m)
	}
	return binary.BigEndian.Uint32(h[4:]), binary.BigEndian.Uint64(h[8:])
}

// do sends one request and waits for its reply (no other request may be
// in flight); for a successful READ it returns the data.
func (rc *rawClient) do(typ, flags uint16, off uint64, length uint32, payload []byte) (uint32, []byte) {
	rc.t.Helper()
	const cookie = 0xc0ffee
	rc.request(typ, flags, cookie, off, length, payload)
	code, ck := rc.reply()
	if ck != cookie {
		rc.t.Fatalf("reply cookie %#x, want %#x", ck, cookie)
	}
	if code == 0 && typ == cmdRead {
		return 0, rc.read(int(length))
	}
	return code, nil
}

// spyVolume wraps a MemVolume, records how the server called it and can
// inject errors and delays.
type spyVolume struct {
	*blockdev.MemVolume
	mu         sync.Mutex
	writeFlags []blockdev.WriteFlags
	zeroUnmap  []bool
	unmaps     [][2]int64
	flushes    int
	failWith   error
	// gate, if set, is called before every ReadAt and WriteAt.
	gate func(off int64)
}

func newSpy(name string, size int64) *spyVolume {
	return &spyVolume{MemVolume: blockdev.NewMemVolume(name, 7, size)}
}

func (s *spyVolume) hook(off int64) error {
	s.mu.Lock()
	g, err := s.gate, s.failWith
	s.mu.Unlock()
	if g != nil {
		g(off)
	}
	return err
}

func (s *spyVolume) ReadAt(ctx context.Context, p []byte, off int64) error {
	if err := s.hook(off); err != nil {
		return err
	}
	return s.MemVolume.ReadAt(ctx, p, off)
}

func (s *spyVolume) WriteAt(ctx context.Context, p []byte, off int64, f blockdev.WriteFlags) error {
	if err := s.hook(off); err != nil {
		return err
	}
	s.mu.Lock()
	s.writeFlags = append(s.writeFlags, f)
	s.mu.Unlock()
	return s.MemVolume.WriteAt(ctx, p, off, f)
}

func (s *spyVolume) WriteZeroes(ctx context.Context, off, n int64, unmap bool) error {
	s.mu.Lock()
	s.zeroUnmap = append(s.zeroUnmap, unmap)
	s.mu.Unlock()
	return s.MemVolume.WriteZeroes(ctx, off, n, unmap)
}

func (s *spyVolume) Unmap(ctx context.Context, off, n int64) error {
	s.mu.Lock()
	s.unmaps = append(s.unmaps, [2]int64{off, n})
	s.mu.Unlock()
	return s.MemVolume.Unmap(ctx, off, n)
}

func (s *spyVolume) Flush(ctx context.Context) error {
	s.mu.Lock()
	s.flushes++
	s.mu.Unlock()
	return s.MemVolume.Flush(ctx)
}

func readVol(t testing.TB, v blockdev.Volume, off, n int64) []byte {
	t.Helper()
	b := make([]byte, n)
	if err := v.ReadAt(context.Background(), b, off); err != nil {
		t.Fatalf("read volume: %v", err)
	}
	return b
}

func isZero(b []byte) bool {
	for _, x := range b {
		if x != 0 {
			return false
		}
	}
	return true
}

var errInjected = errors.New("injected")

func describe(code uint32) string { return fmt.Sprintf("errno %d", code) }

func bufioReader(c net.Conn) *bufio.Reader { return bufio.NewReader(c) }
