package nbd

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/cairn-storage/cairn/appliance/internal/blockdev"
	"github.com/cairn-storage/cairn/appliance/internal/pki"
	"github.com/cairn-storage/cairn/appliance/internal/pki/pkitest"
)

// BenchmarkRead4K measures the server's per-request cost: random 4 KiB
// reads over loopback TCP from a MemVolume, at queue depth 1 and 32, with
// a pipelining Go client in the same process (its cost is included), in
// clear and over TLS (STARTTLS with a host certificate; the client's TLS
// cost is included too).
func BenchmarkRead4K(b *testing.B) {
	for _, depth := range []int{1, 32} {
		for _, tls := range []bool{false, true} {
			b.Run(benchName(depth, tls), func(b *testing.B) { benchIO(b, cmdRead, depth, tls) })
		}
	}
}

// BenchmarkWrite4K is the same for 4 KiB writes.
func BenchmarkWrite4K(b *testing.B) {
	for _, depth := range []int{1, 32} {
		for _, tls := range []bool{false, true} {
			b.Run(benchName(depth, tls), func(b *testing.B) { benchIO(b, cmdWrite, depth, tls) })
		}
	}
}

func benchName(depth int, tls bool) string {
	if tls {
		return fmt.Sprintf("qd%d-tls", depth)
	}
	return fmt.Sprintf("qd%d", depth)
}

func benchIO(b *testing.B, typ uint16, depth int, useTLS bool) {
	const size = 64 << 20
	const bs = 4096
	vol := blockdev.NewMemVolume("vol", 1, size)
	var rc *rawClient
	if useTLS {
		kit := pkitest.New(b)
		id := kit.Identity(pki.RoleNBD, "nbd1")
		_, addr := startServer(b, newResolver(vol), func(s *Server) { s.TLS = HostTLS(id, "A") })
		rc = dialRaw(b, addr)
		rc.c.(*net.TCPConn).SetNoDelay(true)
		rc.handshake(flagCFixedNewstyle | flagCNoZeroes)
		if err := rc.startTLS(kit.Identity(pki.RoleHost, "A").ClientTLS("", pki.RoleNBD)); err != nil {
			b.Fatal(err)
		}
		if _, e := rc.infoOrGo(optGo, "vol"); e != 0 {
			b.Fatalf("GO over TLS: %#x", e)
		}
	} else {
		_, addr := startServer(b, newResolver(vol))
		rc, _ = connect(b, addr, "vol")
		rc.c.(*net.TCPConn).SetNoDelay(true)
	}
	rc.c.SetDeadline(time.Time{})
	payload := make([]byte, bs)
	frameLen := requestHeaderLen
	if typ == cmdWrite {
		frameLen += bs
	}
	replyLen := replyHeaderLen
	if typ == cmdRead {
		replyLen += bs
	}
	n := b.N
	slots := make(chan struct{}, depth)
	errc := make(chan error, 1)
	b.SetBytes(bs)
	b.ReportAllocs()
	b.ResetTimer()
	go func() {
		// Send as many requests as there are free slots in one write.
		out := make([]byte, 0, depth*frameLen)
		for sent := 0; sent < n; {
			slots <- struct{}{}
			k := 1
			for k < depth && sent+k < n {
				select {
				case slots <- struct{}{}:
					k++
					continue
				default:
				}
				break
			}
			out = out[:0]
			for i := 0; i < k; i++ {
				off := uint64((sent+i)*7919%(size/bs)) * bs
				var p []byte
				if typ == cmdWrite {
					p = payload
				}
				out = appendRequest(out, typ, 0, uint64(sent+i), off, bs, p)
			}
			if _, err := rc.c.Write(out); err != nil {
				errc <- err
				return
			}
			sent += k
		}
		errc <- nil
	}()
	br := bufio.NewReaderSize(rc.br, 256<<10) // rc.br holds nothing yet: the server sent no byte since GO's ACK
	reply := make([]byte, replyLen)
	for i := 0; i < n; i++ {
		if _, err := io.ReadFull(br, reply); err != nil {
			b.Fatal(err)
		}
		if binary.BigEndian.Uint32(reply) != simpleReplyMagic || binary.BigEndian.Uint32(reply[4:]) != 0 {
			b.Fatalf("bad reply %x", reply[:16])
		}
		<-slots
	}
	b.StopTimer()
	if err := <-errc; err != nil {
		b.Fatal(err)
	}
}
