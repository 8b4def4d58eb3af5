// Command rogue is the attacker of the rogue-client test (tests/security):
// from a network namespace of its own, with no credentials or with
// credentials of the wrong kind, it tries to read and write chunks on the
// SDSs, read and change etcd, open NBD exports and guess the admin password.
// It speaks the protocols from the outside (raw frames, raw NBD, a stock
// etcd client, plain HTTP), never through Cairn's own client code, so a
// refusal it sees is one a stranger would see.
//
// It prints one line per attempt, "refused <probe>: <how>" or
// "ACCEPTED <probe>: <what got through>", and exits 1 if anything got
// through, 3 if an attempt could not reach its service (that proves
// nothing), 2 on a usage error.
package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"flag"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// report is what one probe saw: its lines, printed together once every
// probe is done (the probes run at once: most wait for a deadline), and
// its counts.
type report struct {
	out strings.Builder
	counts
}

type counts struct{ accepted, refused, unreachable int }

func (r *report) refusedf(probe, how string, a ...any) {
	r.refused++
	fmt.Fprintf(&r.out, "refused  %-34s %s\n", probe, fmt.Sprintf(how, a...))
}

// unreachablef: the attempt never reached the service (no route, nothing
// listening). It proves nothing, so it fails the run like an acceptance.
func (r *report) unreachablef(probe string, err error) {
	r.unreachable++
	fmt.Fprintf(&r.out, "UNREACHABLE %-31s %v\n", probe, err)
}

// reach checks that addr accepts TCP connections from here.
func (r *report) reach(probe, addr string) bool {
	c, err := net.DialTimeout("tcp", addr, 3*time.Second)
	if err != nil {
		r.unreachablef(probe, err)
		return false
	}
	c.Close()
	return true
}

func (r *report) acceptedf(probe, what string, a ...any) {
	r.accepted++
	fmt.Fprintf(&r.out, "ACCEPTED %-34s %s\n", probe, fmt.Sprintf(what, a...))
}

// creds is a certificate the attacker holds (a stolen host certificate, or
// one from another CA), or none.
type creds struct {
	label string
	cert  *tls.Certificate
}

func loadCreds(spec string) (creds, error) {
	label, dir, ok := strings.Cut(spec, "=")
	if !ok {
		return creds{}, fmt.Errorf("--cert %q: want LABEL=DIR", spec)
	}
	c, err := tls.LoadX509KeyPair(dir+"/node.crt", dir+"/node.key")
	if err != nil {
		return creds{}, fmt.Errorf("--cert %s: %w", spec, err)
	}
	return creds{label: label, cert: &c}, nil
}

func (c creds) tls() *tls.Config {
	cfg := &tls.Config{InsecureSkipVerify: true} // an attacker trusts any server
	if c.cert != nil {
		cfg.Certificates = []tls.Certificate{*c.cert}
	}
	return cfg
}

func main() {
	var sds, mdm, nbd, gw, volume string
	var certs multi
	var guesses int
	flag.StringVar(&sds, "sds", "", "comma-separated SDS data addresses")
	flag.StringVar(&mdm, "mdm", "", "comma-separated MDM client addresses (host:port)")
	flag.StringVar(&nbd, "nbd", "", "NBD server address")
	flag.StringVar(&gw, "gateway", "", "gateway address (host:port)")
	flag.StringVar(&volume, "volume", "vol1", "an export name that exists")
	flag.Var(&certs, "cert", "LABEL=PKIDIR: also attack with this certificate (repeatable)")
	flag.IntVar(&guesses, "guesses", 15, "password guesses against the gateway")
	flag.Parse()
	all := []creds{{label: "no-cert"}}
	for _, s := range certs {
		c, err := loadCreds(s)
		if err != nil {
			fmt.Fprintln(os.Stderr, "rogue:", err)
			os.Exit(2)
		}
		all = append(all, c)
	}
	// Every probe at once, each with its own report; printed in this order.
	var probes []func(*report)
	for _, a := range split(sds) {
		probes = append(probes, func(r *report) { probeSDSPlain(r, a) })
		for _, c := range all {
			probes = append(probes, func(r *report) { probeSDSTLS(r, a, c) })
		}
	}
	for _, a := range split(mdm) {
		probes = append(probes, func(r *report) { probeEtcd(r, "etcd-plain "+a, "http://"+a, nil) })
		for _, c := range all {
			probes = append(probes, func(r *report) { probeEtcd(r, "etcd-tls/"+c.label+" "+a, "https://"+a, c.tls()) })
		}
	}
	if nbd != "" {
		probes = append(probes, func(r *report) { probeNBD(r, nbd, volume, nil) })
		for _, c := range all {
			probes = append(probes, func(r *report) { probeNBD(r, nbd, volume, &c) })
		}
	}
	if gw != "" {
		probes = append(probes, func(r *report) { probeLogin(r, gw, guesses) })
	}
	reports := make([]report, len(probes))
	var wg sync.WaitGroup
	for i, p := range probes {
		wg.Add(1)
		go func() { defer wg.Done(); p(&reports[i]) }()
	}
	wg.Wait()
	var total counts
	for i := range reports {
		fmt.Print(reports[i].out.String())
		c := reports[i].counts
		total = counts{total.accepted + c.accepted, total.refused + c.refused, total.unreachable + c.unreachable}
	}
	fmt.Printf("%d attempts refused, %d accepted, %d did not reach their service\n", total.refused, total.accepted, total.unreachable)
	if total.accepted > 0 {
		os.Exit(1)
	}
	if total.unreachable > 0 {
		os.Exit(3)
	}
}

type multi []string

func (m *multi) String() string     { return strings.Join(*m, ",") }
func (m *multi) Set(s string) error { *m = append(*m, s); return nil }

func split(s string) []string {
	var out []string
	for _, x := range strings.Split(s, ",") {
		if x = strings.TrimSpace(x); x != "" {
			out = append(out, x)
		}
	}
	return out
}

// --- data path ---------------------------------------------------------

const (
	reqMagic  = 0x43525131 // "CRQ1"
	respMagic = 0x43525331 // "CRS1"
	opRead    = 2
	opWrite   = 3
	opChunk   = 32 // OpChunkPut

	statusForbidden = 13 // the sender may not send this (wire.StatusForbidden)
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// frame is a data-path request as docs describe it (wire/frame.go).
func frame(op uint8, id, epoch, volume, offset uint64, payload []byte) []byte {
	h := make([]byte, 64, 64+len(payload))
	be := binary.BigEndian
	be.PutUint32(h[0:], reqMagic)
	h[4] = op
	be.PutUint64(h[8:], id)
	be.PutUint64(h[16:], epoch)
	be.PutUint64(h[24:], volume)
	be.PutUint64(h[32:], offset)
	n := uint32(4096)
	if op == opChunk {
		n = uint32(len(payload))
	}
	be.PutUint32(h[48:], n)
	be.PutUint32(h[52:], uint32(len(payload)))
	crc := crc32.Update(crc32.Checksum(h[:60], castagnoli), castagnoli, payload)
	be.PutUint32(h[60:], crc)
	return append(h, payload...)
}

// talk sends frames for volumes 1..3 (read, write, chunk put) and reports
// whether any response header came back: a server that answers a frame at
// all has accepted the connection.
func talk(c net.Conn) (string, bool) {
	_ = c.SetDeadline(time.Now().Add(4 * time.Second))
	var out bytes.Buffer
	for v := uint64(1); v <= 3; v++ {
		out.Write(frame(opRead, v, 0, v, 0, nil))
		out.Write(frame(opWrite, 100+v, 0, v, 0, bytes.Repeat([]byte{0xEE}, 4096)))
	}
	if _, err := c.Write(out.Bytes()); err != nil {
		return "write: " + err.Error(), false
	}
	h := make([]byte, 40)
	if _, err := io.ReadFull(c, h); err != nil {
		return "no answer: " + err.Error(), false
	}
	if binary.BigEndian.Uint32(h) != respMagic {
		return fmt.Sprintf("not a data-path answer (% x)", h[:8]), false
	}
	status := binary.BigEndian.Uint16(h[4:])
	if status == statusForbidden {
		// A refusal in the protocol's own words (wire.StatusForbidden):
		// nothing was read or written.
		msg := make([]byte, min(int(binary.BigEndian.Uint32(h[32:])), 200))
		_, _ = io.ReadFull(c, msg)
		return fmt.Sprintf("answered forbidden: %s", msg), false
	}
	return fmt.Sprintf("answered status %d, epoch %d", status, binary.BigEndian.Uint64(h[16:])), true
}

func probeSDSPlain(r *report, addr string) {
	probe := "sds-plain " + addr
	c, err := net.DialTimeout("tcp", addr, 3*time.Second)
	if err != nil {
		r.unreachablef(probe, err)
		return
	}
	defer c.Close()
	if how, ok := talk(c); ok {
		r.acceptedf(probe, "%s", how)
	} else {
		r.refusedf(probe, "%s", how)
	}
}

func probeSDSTLS(r *report, addr string, cr creds) {
	probe := "sds-tls/" + cr.label + " " + addr
	if !r.reach(probe, addr) {
		return
	}
	d := &net.Dialer{Timeout: 3 * time.Second}
	c, err := tls.DialWithDialer(d, "tcp", addr, cr.tls())
	if err != nil {
		r.refusedf(probe, "handshake: %v", err)
		return
	}
	defer c.Close()
	// TLS 1.3: the client's handshake ends before the server has judged its
	// certificate; the verdict comes with the next read. Frames go both
	// inside TLS (secure mode) and, on the raw stream, are not tried: a
	// raw frame after a TLS handshake is what authenticated mode carries,
	// and a server that accepted the certificate has already lost.
	_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
	b := make([]byte, 1)
	if _, err := c.Read(b); err == nil {
		r.acceptedf(probe, "the server accepted the certificate (sent 0x%02x after the handshake)", b[0])
		return
	} else if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
		r.refusedf(probe, "after handshake: %v", err)
		return
	}
	if how, ok := talk(c); ok {
		r.acceptedf(probe, "%s", how)
	} else {
		r.refusedf(probe, "%s", how)
	}
}

// --- etcd --------------------------------------------------------------

func probeEtcd(r *report, probe, url string, cfg *tls.Config) {
	if !r.reach(probe, url[strings.Index(url, "//")+2:]) {
		return
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{url}, DialTimeout: 3 * time.Second, TLS: cfg, Logger: zap.NewNop()})
	if err != nil {
		r.refusedf(probe, "connect: %v", err)
		return
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	if got, err := cli.Get(ctx, "/cairn/", clientv3.WithPrefix(), clientv3.WithCountOnly()); err == nil {
		r.acceptedf(probe+" read", "read the model: %d keys", got.Count)
	} else {
		r.refusedf(probe+" read", "%s", short(err))
	}
	ctx2, cancel2 := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel2()
	if _, err := cli.Put(ctx2, "/cairn/v1/rogue", "x"); err == nil {
		r.acceptedf(probe+" write", "wrote /cairn/v1/rogue")
	} else {
		r.refusedf(probe+" write", "%s", short(err))
	}
}

func short(err error) string {
	s := err.Error()
	if len(s) > 140 {
		s = s[:140] + "..."
	}
	return s
}

// --- NBD ---------------------------------------------------------------

const (
	nbdOptMagic   = 0x49484156454F5054 // "IHAVEOPT"
	nbdReplyMagic = 0x3e889045565a9
	optList       = 3
	optStartTLS   = 5
	optGo         = 7
	repAck        = 1
	repServer     = 2
	repInfo       = 3
)

type nbdConn struct {
	c net.Conn
}

func (n *nbdConn) opt(opt uint32, data []byte) error {
	b := make([]byte, 16, 16+len(data))
	binary.BigEndian.PutUint64(b, nbdOptMagic)
	binary.BigEndian.PutUint32(b[8:], opt)
	binary.BigEndian.PutUint32(b[12:], uint32(len(data)))
	_, err := n.c.Write(append(b, data...))
	return err
}

// reply reads one option reply: its type and data (data bounded).
func (n *nbdConn) reply() (uint32, []byte, error) {
	h := make([]byte, 20)
	if _, err := io.ReadFull(n.c, h); err != nil {
		return 0, nil, err
	}
	if binary.BigEndian.Uint64(h) != nbdReplyMagic {
		return 0, nil, fmt.Errorf("bad reply magic")
	}
	typ, ln := binary.BigEndian.Uint32(h[12:]), binary.BigEndian.Uint32(h[16:])
	if ln > 1<<16 {
		return 0, nil, fmt.Errorf("reply of %d bytes", ln)
	}
	d := make([]byte, ln)
	_, err := io.ReadFull(n.c, d)
	return typ, d, err
}

func goData(name string) []byte {
	d := make([]byte, 4+len(name)+2)
	binary.BigEndian.PutUint32(d, uint32(len(name)))
	copy(d[4:], name)
	return d
}

// listAndGo asks for the export list and for the export; it reports what
// leaked.
func listAndGo(r *report, probe string, n *nbdConn, volume string) {
	if err := n.opt(optList, nil); err != nil {
		r.refusedf(probe+" list", "%v", err)
		return
	}
	var names []string
	for {
		typ, d, err := n.reply()
		if err != nil {
			r.refusedf(probe+" list", "%v", err)
			return
		}
		if typ == repServer && len(d) >= 4 {
			names = append(names, string(d[4:min(len(d), 4+int(binary.BigEndian.Uint32(d)))]))
			continue
		}
		if typ == repAck {
			break
		}
		if typ&(1<<31) != 0 {
			break // an error reply ends the list
		}
	}
	if len(names) > 0 {
		r.acceptedf(probe+" list", "exports listed: %v", names)
	} else {
		r.refusedf(probe+" list", "no export listed")
	}
	if err := n.opt(optGo, goData(volume)); err != nil {
		r.refusedf(probe+" go", "%v", err)
		return
	}
	for {
		typ, d, err := n.reply()
		if err != nil {
			r.refusedf(probe+" go", "%v", err)
			return
		}
		switch {
		case typ == repInfo:
			continue
		case typ == repAck:
			r.acceptedf(probe+" go", "export %q opened", volume)
			return
		default:
			r.refusedf(probe+" go", "error 0x%x: %.100s", typ, d)
			return
		}
	}
}

func probeNBD(r *report, addr, volume string, cr *creds) {
	probe := "nbd-plain " + addr
	if cr != nil {
		probe = "nbd-tls/" + cr.label + " " + addr
	}
	c, err := net.DialTimeout("tcp", addr, 3*time.Second)
	if err != nil {
		r.unreachablef(probe, err)
		return
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(6 * time.Second))
	g := make([]byte, 18)
	if _, err := io.ReadFull(c, g); err != nil || string(g[:8]) != "NBDMAGIC" {
		r.refusedf(probe, "no NBD greeting: %v", err)
		return
	}
	if _, err := c.Write([]byte{0, 0, 0, 3}); err != nil { // fixed newstyle, no zeroes
		r.refusedf(probe, "%v", err)
		return
	}
	n := &nbdConn{c: c}
	if cr == nil {
		listAndGo(r, probe, n, volume)
		return
	}
	if err := n.opt(optStartTLS, nil); err != nil {
		r.refusedf(probe, "%v", err)
		return
	}
	if typ, d, err := n.reply(); err != nil || typ != repAck {
		r.refusedf(probe, "STARTTLS answered 0x%x %.80s %v", typ, d, err)
		return
	}
	tc := tls.Client(c, cr.tls())
	if err := tc.Handshake(); err != nil {
		r.refusedf(probe, "handshake: %v", err)
		return
	}
	listAndGo(r, probe, &nbdConn{c: tc}, volume)
}

// --- gateway -----------------------------------------------------------

func probeLogin(r *report, addr string, guesses int) {
	if !r.reach("login-guess "+addr, addr) {
		return
	}
	cl := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	codes := map[int]int{}
	for i := 0; i < guesses; i++ {
		body := fmt.Sprintf(`{"username":"admin","password":"guess-%d-%d"}`, i, time.Now().UnixNano())
		resp, err := cl.Post("https://"+addr+"/api/v1/login", "application/json", strings.NewReader(body))
		if err != nil {
			r.unreachablef("login-guess "+addr, err)
			return
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
		resp.Body.Close()
		codes[resp.StatusCode]++
		if resp.StatusCode == http.StatusOK {
			r.acceptedf("login-guess "+addr, "guess %d logged in", i)
			return
		}
	}
	if codes[http.StatusTooManyRequests] == 0 {
		r.acceptedf("login-guess "+addr, "%d guesses, never throttled (answers %v)", guesses, codes)
		return
	}
	r.refusedf("login-guess "+addr, "%d guesses: answers %v (429 = throttled)", guesses, codes)
}
