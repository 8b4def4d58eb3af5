package nbd

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/cairn-storage/cairn/appliance/internal/blockdev"
)

const testSize = 4 << 20

func TestNegotiationOptions(t *testing.T) {
	r := newResolver(blockdev.NewMemVolume("vol", 1, testSize), blockdev.NewMemVolume("ro", 2, 1<<20))
	r.readOnly["ro"] = true
	_, addr := startServer(t, r)
	rc := dialRaw(t, addr)
	rc.handshake(flagCFixedNewstyle | flagCNoZeroes)

	// LIST: one SERVER reply per export, then ACK.
	rc.option(optList, nil)
	var names []string
	for {
		rep := rc.optReply()
		if rep.typ == repAck {
			break
		}
		if rep.typ != repServer {
			t.Fatalf("LIST reply type %#x", rep.typ)
		}
		n := binary.BigEndian.Uint32(rep.data)
		names = append(names, string(rep.data[4:4+n]))
	}
	if fmt.Sprint(names) != "[ro vol]" {
		t.Fatalf("LIST = %v", names)
	}
	rc.option(optList, []byte{1})
	if rep := rc.optReply(); rep.typ != repErrInvalid {
		t.Fatalf("LIST with data: reply %#x, want ERR_INVALID", rep.typ)
	}

	// INFO on an unknown export: ERR_UNKNOWN, and the session goes on.
	if _, e := rc.infoOrGo(optInfo, "nope"); e != repErrUnknown {
		t.Fatalf("INFO unknown: %#x, want ERR_UNKNOWN", e)
	}
	ei, e := rc.infoOrGo(optInfo, "vol", infoName, infoDescription)
	if e != 0 {
		t.Fatalf("INFO vol: %#x", e)
	}
	wantFlags := tflagHasFlags | tflagSendFlush | tflagSendFUA | tflagSendTrim | tflagSendWriteZeroes | tflagCanMultiConn
	if ei.size != testSize || ei.flags&wantFlags != wantFlags || ei.flags&tflagReadOnly != 0 {
		t.Fatalf("INFO vol: size %d flags %#x", ei.size, ei.flags)
	}
	if ei.minBS != 512 || ei.prefBS != 4096 || ei.maxBS != 32<<20 {
		t.Fatalf("block sizes %d/%d/%d", ei.minBS, ei.prefBS, ei.maxBS)
	}
	if !ei.gotName || ei.name != "vol" || !ei.gotDesc {
		t.Fatalf("name/description: %+v", ei)
	}
	ei, _ = rc.infoOrGo(optInfo, "ro")
	if ei.flags&tflagReadOnly == 0 || ei.flags&tflagSendTrim != 0 {
		t.Fatalf("read-only export flags %#x", ei.flags)
	}

	// Malformed INFO: name length beyond the data; count not matching.
	bad := infoData("vol")
	binary.BigEndian.PutUint32(bad, 200)
	rc.option(optGo, bad)
	if rep := rc.optReply(); rep.typ != repErrInvalid {
		t.Fatalf("malformed GO: %#x", rep.typ)
	}
	rc.option(optInfo, append(infoData("vol", infoName), 0))
	if rep := rc.optReply(); rep.typ != repErrInvalid {
		t.Fatalf("INFO with trailing byte: %#x", rep.typ)
	}

	// Unknown and unsupported options.
	for _, opt := range []uint32{99, optStructuredReply, optStartTLS, 10, 11} {
		rc.option(opt, nil)
		if rep := rc.optReply(); rep.typ != repErrUnsup || rep.opt != opt {
			t.Fatalf("option %d: reply %#x for %d, want ERR_UNSUP", opt, rep.typ, rep.opt)
		}
	}

	// Oversized option data is skipped and refused; the session survives.
	rc.option(optInfo, make([]byte, maxOptionLen+1))
	if rep := rc.optReply(); rep.typ != repErrTooBig {
		t.Fatalf("oversized option: %#x, want ERR_TOO_BIG", rep.typ)
	}

	// GO enters transmission.
	if _, e := rc.infoOrGo(optGo, "vol"); e != 0 {
		t.Fatalf("GO: %#x", e)
	}
	if code, data := rc.do(cmdRead, 0, 0, 4096, nil); code != 0 || !isZero(data) {
		t.Fatalf("read after GO: %d", code)
	}
	rc.request(cmdDisc, 0, 1, 0, 0, nil)
	rc.expectClosed()
}

func TestNegotiationHardDisconnects(t *testing.T) {
	r := newResolver(blockdev.NewMemVolume("vol", 1, testSize))
	_, addr := startServer(t, r)
	cases := []struct {
		name string
		run  func(rc *rawClient)
	}{
		{"unknown client flag", func(rc *rawClient) { rc.handshake(flagCFixedNewstyle | 1<<5) }},
		{"bad option magic", func(rc *rawClient) {
			rc.handshake(flagCFixedNewstyle)
			f := optionFrame(optList, nil)
			f[0] ^= 0xff
			rc.write(f)
		}},
		{"export name unknown", func(rc *rawClient) {
			rc.handshake(flagCFixedNewstyle)
			rc.option(optExportName, []byte("nope"))
		}},
		{"export name too long", func(rc *rawClient) {
			rc.handshake(flagCFixedNewstyle)
			rc.option(optExportName, bytes.Repeat([]byte("a"), maxNameLen+1))
		}},
		{"option larger than the discard limit", func(rc *rawClient) {
			rc.handshake(flagCFixedNewstyle)
			f := optionFrame(optInfo, nil)
			binary.BigEndian.PutUint32(f[12:], maxOptionDiscard+1)
			rc.write(f)
		}},
		{"abort", func(rc *rawClient) {
			rc.handshake(flagCFixedNewstyle)
			rc.option(optAbort, nil)
			if rep := rc.optReply(); rep.typ != repAck {
				t.Fatalf("ABORT reply %#x", rep.typ)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rc := dialRaw(t, addr)
			rc.t = t
			tc.run(rc)
			rc.expectClosed()
		})
	}
}

func TestExportName(t *testing.T) {
	r := newResolver(blockdev.NewMemVolume("vol", 1, testSize))
	_, addr := startServer(t, r)
	for _, noZeroes := range []bool{false, true} {
		rc := dialRaw(t, addr)
		f := flagCFixedNewstyle
		if noZeroes {
			f |= flagCNoZeroes
		}
		rc.handshake(f)
		rc.option(optExportName, []byte("vol"))
		b := rc.read(10)
		if binary.BigEndian.Uint64(b) != testSize || binary.BigEndian.Uint16(b[8:])&tflagCanMultiConn == 0 {
			t.Fatalf("EXPORT_NAME reply %x", b)
		}
		if !noZeroes && !isZero(rc.read(124)) {
			t.Fatal("reserved bytes not zero")
		}
		payload := bytes.Repeat([]byte{0xab}, 512)
		if code, _ := rc.do(cmdWrite, 0, 512, 512, payload); code != 0 {
			t.Fatalf("write: %d", code)
		}
		if code, data := rc.do(cmdRead, 0, 512, 512, nil); code != 0 || !bytes.Equal(data, payload) {
			t.Fatalf("read back: code %d", code)
		}
	}
}

func TestRequestErrors(t *testing.T) {
	vol := blockdev.NewMemVolume("vol", 1, testSize)
	ro := blockdev.NewMemVolume("ro", 2, testSize)
	r := newResolver(vol, ro)
	r.readOnly["ro"] = true
	_, addr := startServer(t, r)
	rc, _ := connect(t, addr, "vol")
	page := make([]byte, 4096)

	cases := []struct {
		name    string
		typ     uint16
		flags   uint16
		off     uint64
		length  uint32
		payload []byte
		want    uint32
	}{
		{"read past end", cmdRead, 0, testSize - 512, 1024, nil, errInval},
		{"read offset overflow", cmdRead, 0, ^uint64(0) - 100, 512, nil, errInval},
		{"read over 32 MiB", cmdRead, 0, 0, 32<<20 + 512, nil, errInval},
		{"write past end", cmdWrite, 0, testSize, 4096, page, errNoSpc},
		{"write unaligned", cmdWrite, 0, 100, 4096, page, errInval},
		{"write zeroes past end", cmdWriteZeroes, 0, testSize - 4096, 8192, nil, errNoSpc},
		{"write zeroes unaligned", cmdWriteZeroes, 0, 0, 100, nil, errInval},
		{"trim past end", cmdTrim, 0, testSize, 4096, nil, errInval},
		{"cache past end", cmdCache, 0, testSize, 4096, nil, errInval},
		{"unknown command", 42, 0, 0, 0, nil, errInval},
		{"block status not negotiated", 7, 0, 0, 4096, nil, errInval},
		{"unknown flag", cmdRead, 1 << 9, 0, 512, nil, errInval},
		{"no-hole on a write", cmdWrite, cmdFlagNoHole, 0, 4096, page, errInval},
	}
	for _, tc := range cases {
		code, _ := rc.do(tc.typ, tc.flags, tc.off, tc.length, tc.payload)
		if code != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, describe(code), describe(tc.want))
		}
	}
	// The stream is still in sync after all those (payloads were skipped).
	payload := make([]byte, 4096)
	rand.Read(payload)
	if code, _ := rc.do(cmdWrite, 0, 8192, 4096, payload); code != 0 {
		t.Fatalf("write: %d", code)
	}
	// Unaligned reads are served from the covering sectors.
	if code, data := rc.do(cmdRead, 0, 8192+100, 1000, nil); code != 0 || !bytes.Equal(data, payload[100:1100]) {
		t.Fatalf("unaligned read: code %d", code)
	}
	if code, _ := rc.do(cmdRead, 0, testSize, 0, nil); code != 0 {
		t.Fatalf("empty read at end: %d", code)
	}

	// Read-only export: writes refused, reads fine.
	rr, _ := connect(t, addr, "ro")
	for _, typ := range []uint16{cmdWrite, cmdTrim, cmdWriteZeroes} {
		var p []byte
		if typ == cmdWrite {
			p = page
		}
		if code, _ := rr.do(typ, 0, 0, 4096, p); code != errPerm {
			t.Errorf("read-only command %d: %s, want EPERM", typ, describe(code))
		}
	}
	if code, _ := rr.do(cmdRead, 0, 0, 4096, nil); code != 0 {
		t.Errorf("read-only read: %d", code)
	}
	if code, _ := rr.do(cmdFlush, 0, 0, 0, nil); code != 0 {
		t.Errorf("read-only flush: %d", code)
	}
}

func TestProtocolViolations(t *testing.T) {
	r := newResolver(blockdev.NewMemVolume("vol", 1, testSize))
	_, addr := startServer(t, r)

	t.Run("bad request magic", func(t *testing.T) {
		rc, _ := connect(t, addr, "vol")
		f := requestFrame(cmdRead, 0, 1, 0, 512, nil)
		f[3] ^= 1
		rc.write(f)
		rc.expectClosed()
	})
	t.Run("write far beyond the payload limit", func(t *testing.T) {
		rc, _ := connect(t, addr, "vol")
		rc.request(cmdWrite, 0, 9, 0, maxDiscard+512, nil)
		if code, ck := rc.reply(); code != errInval || ck != 9 {
			t.Fatalf("reply %d for %d, want EINVAL", code, ck)
		}
		rc.expectClosed()
	})
	t.Run("write just beyond the payload limit is skipped", func(t *testing.T) {
		rc, _ := connect(t, addr, "vol")
		n := uint32(maxPayload + 512)
		rc.request(cmdWrite, 0, 9, 0, n, nil)
		rc.write(make([]byte, n))
		if code, ck := rc.reply(); code != errInval || ck != 9 {
			t.Fatalf("reply %d for %d, want EINVAL", code, ck)
		}
		if code, _ := rc.do(cmdFlush, 0, 0, 0, nil); code != 0 {
			t.Fatalf("flush after skipped write: %d", code)
		}
	})
}

// TestConcurrentOutOfOrder: a slow read does not hold back a later one.
func TestConcurrentOutOfOrder(t *testing.T) {
	vol := newSpy("vol", testSize)
	release := make(chan struct{})
	vol.gate = func(off int64) {
		if off == 0 {
			<-release
		}
	}
	_, addr := startServer(t, newResolver(vol))
	rc, _ := connect(t, addr, "vol")
	rc.request(cmdRead, 0, 1, 0, 4096, nil)
	rc.request(cmdRead, 0, 2, 4096, 4096, nil)
	code, ck := rc.reply()
	if code != 0 || ck != 2 {
		t.Fatalf("first reply: code %d cookie %d, want cookie 2", code, ck)
	}
	rc.read(4096)
	close(release)
	if code, ck := rc.reply(); code != 0 || ck != 1 {
		t.Fatalf("second reply: code %d cookie %d", code, ck)
	}
	rc.read(4096)
}

// TestDiscMidFlight: DISC while writes are in flight. The server must
// answer all of them, then close.
func TestDiscMidFlight(t *testing.T) {
	vol := newSpy("vol", testSize)
	vol.gate = func(int64) { time.Sleep(20 * time.Millisecond) }
	srv, addr := startServer(t, newResolver(vol))
	rc, _ := connect(t, addr, "vol")
	const n = 40
	var frames []byte
	want := make([]byte, n*4096)
	rand.Read(want)
	for i := 0; i < n; i++ {
		frames = append(frames, requestFrame(cmdWrite, 0, uint64(i), uint64(i)*4096, 4096, want[i*4096:(i+1)*4096])...)
	}
	frames = append(frames, requestFrame(cmdDisc, 0, 999, 0, 0, nil)...)
	rc.write(frames)
	seen := map[uint64]bool{}
	for i := 0; i < n; i++ {
		code, ck := rc.reply()
		if code != 0 || seen[ck] || ck >= n {
			t.Fatalf("reply %d: code %d cookie %d", i, code, ck)
		}
		seen[ck] = true
	}
	rc.expectClosed()
	if got := readVol(t, vol, 0, n*4096); !bytes.Equal(got, want) {
		t.Fatal("volume content differs from what was written before DISC")
	}
	deadline := time.Now().Add(5 * time.Second)
	for srv.Stats().ActiveConnections != 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if a := srv.Stats().ActiveConnections; a != 0 {
		t.Fatalf("%d connections still active after DISC", a)
	}
}

// TestCommandMapping checks what reaches the volume for each flag.
func TestCommandMapping(t *testing.T) {
	vol := newSpy("vol", testSize)
	_, addr := startServer(t, newResolver(vol))
	rc, _ := connect(t, addr, "vol")
	data := bytes.Repeat([]byte{0x5a}, 64<<10)

	if code, _ := rc.do(cmdWrite, cmdFlagFUA, 0, uint32(len(data)), data); code != 0 {
		t.Fatal(code)
	}
	if code, _ := rc.do(cmdWrite, 0, 1<<20, uint32(len(data)), data); code != 0 {
		t.Fatal(code)
	}
	vol.mu.Lock()
	if len(vol.writeFlags) != 2 || vol.writeFlags[0] != blockdev.FUA || vol.writeFlags[1] != 0 {
		t.Fatalf("write flags %v, want [FUA 0]", vol.writeFlags)
	}
	vol.mu.Unlock()

	// WRITE_ZEROES: NO_HOLE -> unmap=false; plain and FAST_ZERO -> unmap=true.
	if code, _ := rc.do(cmdWriteZeroes, cmdFlagNoHole, 0, 8192, nil); code != 0 {
		t.Fatal(code)
	}
	if code, _ := rc.do(cmdWriteZeroes, cmdFlagFastZero|cmdFlagFUA, 8192, 8192, nil); code != 0 {
		t.Fatal(code)
	}
	if !isZero(readVol(t, vol, 0, 16384)) || isZero(readVol(t, vol, 16384, 4096)) {
		t.Fatal("write zeroes: wrong range zeroed")
	}
	// TRIM: only whole sectors inside the range are unmapped.
	if code, _ := rc.do(cmdTrim, 0, 1<<20+100, 8192, nil); code != 0 {
		t.Fatal(code)
	}
	if code, _ := rc.do(cmdFlush, 0, 0, 0, nil); code != 0 {
		t.Fatal(code)
	}
	if code, _ := rc.do(cmdCache, 0, 0, 4096, nil); code != 0 {
		t.Fatal(code)
	}
	vol.mu.Lock()
	defer vol.mu.Unlock()
	if fmt.Sprint(vol.zeroUnmap) != "[false true]" {
		t.Fatalf("write zeroes unmap flags %v", vol.zeroUnmap)
	}
	if len(vol.unmaps) != 1 || vol.unmaps[0] != [2]int64{1<<20 + 512, 7680} {
		t.Fatalf("unmaps %v", vol.unmaps)
	}
	if vol.flushes != 2 { // FUA on write zeroes, then FLUSH
		t.Fatalf("flushes %d, want 2", vol.flushes)
	}
}

func TestVolumeErrors(t *testing.T) {
	vol := newSpy("vol", testSize)
	_, addr := startServer(t, newResolver(vol))
	rc, _ := connect(t, addr, "vol")
	for _, tc := range []struct {
		err  error
		want uint32
	}{
		{blockdev.ErrIO, errIO},
		{fmt.Errorf("wrapped: %w", blockdev.ErrUnavailable), errIO},
		{blockdev.ErrReadOnly, errPerm},
		{errInjected, errIO},
	} {
		vol.mu.Lock()
		vol.failWith = tc.err
		vol.mu.Unlock()
		if code, _ := rc.do(cmdRead, 0, 0, 4096, nil); code != tc.want {
			t.Errorf("read with %v: %s, want %s", tc.err, describe(code), describe(tc.want))
		}
		if code, _ := rc.do(cmdWrite, 0, 0, 4096, make([]byte, 4096)); code != tc.want {
			t.Errorf("write with %v: %s, want %s", tc.err, describe(code), describe(tc.want))
		}
	}
}

// TestShutdownFinishesInFlight: cancelling Serve lets a request in flight
// complete and be answered, then closes the connection.
func TestShutdownFinishesInFlight(t *testing.T) {
	vol := newSpy("vol", testSize)
	entered := make(chan struct{})
	release := make(chan struct{})
	var once sync.Once
	vol.gate = func(int64) {
		once.Do(func() { close(entered) })
		<-release
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := NewServer(newResolver(vol), testLogger(t))
	srv.ShutdownGrace = 5 * time.Second
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, l) }()
	rc, _ := connect(t, l.Addr().String(), "vol")
	rc.request(cmdRead, 0, 5, 0, 4096, nil)
	<-entered
	cancel()
	time.Sleep(50 * time.Millisecond)
	close(release)
	if code, ck := rc.reply(); code != 0 || ck != 5 {
		t.Fatalf("in-flight read after shutdown: code %d cookie %d", code, ck)
	}
	rc.read(4096)
	rc.expectClosed()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return")
	}
	if _, err := net.Dial("tcp", l.Addr().String()); err == nil {
		t.Fatal("listener still accepting after shutdown")
	}
}

func TestUnixSocket(t *testing.T) {
	path := t.TempDir() + "/nbd.sock"
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	vol := blockdev.NewMemVolume("vol", 1, testSize)
	srv := NewServer(newResolver(vol), testLogger(t))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, l) }()
	defer func() { cancel(); <-done }()

	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	rc := &rawClient{t: t, c: c}
	rc.br = bufioReader(c)
	rc.handshake(flagCFixedNewstyle | flagCNoZeroes)
	if _, e := rc.infoOrGo(optGo, "vol"); e != 0 {
		t.Fatal(e)
	}
	big := make([]byte, 1<<20)
	rand.Read(big)
	if code, _ := rc.do(cmdWrite, 0, 0, uint32(len(big)), big); code != 0 {
		t.Fatal(code)
	}
	if code, data := rc.do(cmdRead, 0, 0, uint32(len(big)), nil); code != 0 || !bytes.Equal(data, big) {
		t.Fatal("unix socket round trip failed")
	}
	c.Close()
}
