package nbd

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cairn-storage/cairn/appliance/internal/blockdev"
	"github.com/cairn-storage/cairn/appliance/internal/pki"
	"github.com/cairn-storage/cairn/appliance/internal/pki/pkitest"
)

// The fuzz targets feed arbitrary client bytes to one server connection
// over net.Pipe. The server must not panic, must finish once the client
// closes (no hang), and allocates at most what the 1 MiB export and the
// protocol limits allow. The seed corpus lives in testdata/fuzz; regenerate
// it with NBD_WRITE_SEEDS=1 go test -run TestWriteFuzzSeeds.

const fuzzVolSize = 1 << 20

func fuzzConn(t *testing.T, input []byte) { fuzzConnTLS(t, input, nil, nil) }

func fuzzServer(tlsCfg *tls.Config) *Server {
	r := newResolver(blockdev.NewMemVolume("vol", 1, fuzzVolSize), blockdev.NewMemVolume("", 2, 64<<10))
	srv := NewServer(r, nil)
	srv.HandshakeTimeout = 2 * time.Second
	srv.ShutdownGrace = time.Second
	srv.TLS = tlsCfg
	return srv
}

// fuzzConnTLS: fuzzConn against a server that requires TLS when srvCfg is
// set. Without cliCfg the input is what a client sends in clear (before, or
// instead of, STARTTLS); with it, the client first negotiates STARTTLS with
// that (valid) certificate and sends the input inside TLS.
func fuzzConnTLS(t *testing.T, input []byte, srvCfg, cliCfg *tls.Config) {
	srv := fuzzServer(srvCfg)
	cs, ss := net.Pipe()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	served := make(chan struct{})
	go func() {
		defer close(served)
		srv.ServeConn(ctx, ss)
	}()
	start := time.Now()
	cs.SetWriteDeadline(start.Add(5 * time.Second))
	var c net.Conn = cs
	if cliCfg != nil {
		c = fuzzStartTLS(t, cs, cliCfg)
	}
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		io.Copy(io.Discard, c)
	}()
	c.Write(input) // fails early if the server hangs up; that is fine
	cs.Close()
	select {
	case <-served:
	case <-time.After(10 * time.Second):
		t.Fatalf("server did not finish 10s after the client closed (input %d bytes)", len(input))
	}
	// Nothing the client can send makes the server wait once the client
	// is gone; a slow iteration means something blocked until a timeout.
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("connection took %v to finish (input %d bytes)", d, len(input))
	}
	<-drained
	if a := srv.Stats().ActiveConnections + srv.Stats().Handshaking; a != 0 {
		t.Fatalf("%d connections still counted after ServeConn returned", a)
	}
	if n := srv.Stats().RefusedClients; cliCfg != nil && n != 0 {
		t.Fatalf("a client with a valid certificate was counted as refused")
	}
}

// fuzzStartTLS negotiates STARTTLS as a well-behaved client and returns the
// TLS connection.
func fuzzStartTLS(t *testing.T, cs net.Conn, cfg *tls.Config) net.Conn {
	cs.SetReadDeadline(time.Now().Add(5 * time.Second))
	defer cs.SetReadDeadline(time.Time{})
	var greet [18]byte
	var rep [20]byte
	if _, err := io.ReadFull(cs, greet[:]); err != nil {
		t.Fatalf("greeting: %v", err)
	}
	cs.Write(append(clientFlags(flagCFixedNewstyle|flagCNoZeroes), optionFrame(optStartTLS, nil)...))
	if _, err := io.ReadFull(cs, rep[:]); err != nil || binary.BigEndian.Uint32(rep[12:]) != repAck {
		t.Fatalf("STARTTLS: reply %x, err %v", rep, err)
	}
	tc := tls.Client(cs, cfg)
	if err := tc.Handshake(); err != nil {
		t.Fatalf("TLS handshake with a valid host certificate: %v", err)
	}
	return tc
}

func FuzzNegotiation(f *testing.F) {
	// Seeds: testdata/fuzz/FuzzNegotiation (from negotiationSeeds).
	f.Fuzz(fuzzConn)
}

// FuzzTLSNegotiation drives a TLS-only server twice per input: pre is
// everything a client sends in clear (the server must answer only
// TLS_REQD/ACK and never leak an export), post is what a client holding a
// valid host certificate sends inside TLS after STARTTLS (the haggling
// parser again, then transmission).
func FuzzTLSNegotiation(f *testing.F) {
	kit := pkitest.New(f)
	srvCfg := HostTLS(kit.Identity(pki.RoleNBD, "nbd1"), "A")
	cliCfg := kit.Identity(pki.RoleHost, "A").ClientTLS("", pki.RoleNBD)
	// Seeds: testdata/fuzz/FuzzTLSNegotiation (from tlsSeeds).
	f.Fuzz(func(t *testing.T, pre, post []byte) {
		fuzzConnTLS(t, pre, srvCfg, nil)
		fuzzConnTLS(t, post, srvCfg, cliCfg)
	})
}

func FuzzTransmission(f *testing.F) {
	// Seeds: testdata/fuzz/FuzzTransmission (from transmissionSeeds).
	f.Fuzz(func(t *testing.T, requests []byte) {
		fuzzConn(t, append(goPrefix(), requests...))
	})
}

func clientFlags(f uint32) []byte {
	return binary.BigEndian.AppendUint32(nil, f)
}

// goPrefix is a client's negotiation up to a successful GO on "vol".
func goPrefix() []byte {
	b := clientFlags(flagCFixedNewstyle | flagCNoZeroes)
	return append(b, optionFrame(optGo, infoData("vol", infoBlockSize))...)
}

func cat(parts ...[]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

func negotiationSeeds() [][]byte {
	fl := clientFlags(flagCFixedNewstyle | flagCNoZeroes)
	badMagic := optionFrame(optList, nil)
	badMagic[2] = 'X'
	bigOpt := optionFrame(optInfo, nil)
	binary.BigEndian.PutUint32(bigOpt[12:], maxOptionLen+10)
	return [][]byte{
		{},
		clientFlags(0xffffffff),
		cat(fl, optionFrame(optList, nil), optionFrame(optInfo, infoData("vol", infoName, infoDescription, infoBlockSize)),
			optionFrame(optGo, infoData("vol")), requestFrame(cmdRead, 0, 1, 0, 4096, nil), requestFrame(cmdDisc, 0, 2, 0, 0, nil)),
		cat(clientFlags(flagCFixedNewstyle), optionFrame(optExportName, []byte("vol")), requestFrame(cmdFlush, 0, 1, 0, 0, nil)),
		cat(clientFlags(0), optionFrame(optExportName, nil)),
		cat(fl, optionFrame(optExportName, []byte("missing"))),
		cat(fl, optionFrame(optGo, infoData("missing")), optionFrame(optAbort, nil)),
		cat(fl, optionFrame(optStructuredReply, nil), optionFrame(99, []byte("x")), optionFrame(optList, []byte{1})),
		cat(fl, badMagic),
		cat(fl, bigOpt, make([]byte, 64)),
		cat(fl, optionFrame(optGo, []byte{0, 0, 0, 3, 'v', 'o'})),
	}
}

// tlsSeeds are (pre, post) pairs for FuzzTLSNegotiation: clear-text
// attempts, and sessions inside TLS.
func tlsSeeds() [][2][]byte {
	fl := clientFlags(flagCFixedNewstyle | flagCNoZeroes)
	neg := negotiationSeeds()
	return [][2][]byte{
		{nil, nil},
		{cat(fl, optionFrame(optList, nil), optionFrame(optGo, infoData("vol")), optionFrame(optExportName, []byte("vol"))),
			cat(optionFrame(optList, nil), optionFrame(optStartTLS, nil), optionFrame(optGo, infoData("vol", infoName)),
				requestFrame(cmdRead, 0, 1, 0, 4096, nil), requestFrame(cmdDisc, 0, 2, 0, 0, nil))},
		{cat(fl, optionFrame(optStartTLS, []byte{1}), optionFrame(optAbort, nil)), cat(optionFrame(optExportName, []byte("vol")),
			requestFrame(cmdWrite, 0, 1, 0, 512, make([]byte, 512)))},
		{cat(fl, optionFrame(optStartTLS, nil), optionFrame(optList, nil)), cat(optionFrame(optInfo, infoData("missing")), optionFrame(optAbort, nil))},
		{neg[7], neg[9][4:]},
	}
}

func transmissionSeeds() [][]byte {
	page := make([]byte, 4096)
	for i := range page {
		page[i] = byte(i)
	}
	badMagic := requestFrame(cmdRead, 0, 1, 0, 512, nil)
	badMagic[0] = 0
	return [][]byte{
		{},
		cat(requestFrame(cmdWrite, cmdFlagFUA, 1, 4096, 4096, page), requestFrame(cmdRead, 0, 2, 4096, 4096, nil),
			requestFrame(cmdFlush, 0, 3, 0, 0, nil), requestFrame(cmdDisc, 0, 4, 0, 0, nil)),
		cat(requestFrame(cmdTrim, 0, 1, 100, 5000, nil), requestFrame(cmdWriteZeroes, cmdFlagNoHole, 2, 0, 8192, nil),
			requestFrame(cmdWriteZeroes, cmdFlagFastZero, 3, 8192, 8192, nil), requestFrame(cmdCache, 0, 4, 0, 4096, nil)),
		cat(requestFrame(cmdRead, 0, 1, fuzzVolSize, 512, nil), requestFrame(cmdWrite, 0, 2, fuzzVolSize-512, 1024, make([]byte, 1024)),
			requestFrame(cmdRead, 0, 3, 0, maxPayload+1, nil), requestFrame(cmdRead, 0, 4, ^uint64(0), 512, nil)),
		cat(requestFrame(cmdWrite, 0, 1, 0, maxDiscard+1, nil)),
		cat(requestFrame(cmdWrite, 0, 1, 0, 1<<20, page)),
		cat(requestFrame(7, 0, 1, 0, 4096, nil), requestFrame(cmdRead, 0xffff, 2, 0, 512, nil), badMagic),
		cat(requestFrame(cmdRead, 0, 1, 3, 1000, nil), requestFrame(cmdWrite, 0, 2, 3, 512, make([]byte, 512))),
	}
}

// TestWriteFuzzSeeds regenerates testdata/fuzz from the seed builders.
func TestWriteFuzzSeeds(t *testing.T) {
	if os.Getenv("NBD_WRITE_SEEDS") == "" {
		t.Skip("set NBD_WRITE_SEEDS=1 to regenerate testdata/fuzz")
	}
	write := func(target string, seeds [][]byte) {
		dir := filepath.Join("testdata", "fuzz", target)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for i, s := range seeds {
			body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", s)
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("seed-%02d", i)), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	write("FuzzNegotiation", negotiationSeeds())
	write("FuzzTransmission", transmissionSeeds())
	dir := filepath.Join("testdata", "fuzz", "FuzzTLSNegotiation")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for i, s := range tlsSeeds() {
		body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n[]byte(%q)\n", s[0], s[1])
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("seed-%02d", i)), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
