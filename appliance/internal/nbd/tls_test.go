package nbd

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairn-storage/cairn/appliance/internal/blockdev"
	"github.com/cairn-storage/cairn/appliance/internal/pki"
	"github.com/cairn-storage/cairn/appliance/internal/pki/pkitest"
)

// tlsCluster is a cluster CA with the NBD server's identity, and two NBD
// servers: host A's (exports a1, a2) and host B's (exports b1).
type tlsCluster struct {
	kit          *pkitest.Kit
	srvA, srvB   *Server
	addrA, addrB string
	volA         blockdev.Volume

	mu      sync.Mutex
	refusal []string // "peer: reason" from OnRefused, both servers
}

func (tc *tlsCluster) refusals() []string {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	return append([]string(nil), tc.refusal...)
}

func newTLSCluster(t *testing.T) *tlsCluster {
	t.Helper()
	kit := pkitest.New(t)
	id := kit.Identity(pki.RoleNBD, "nbd1")
	tc := &tlsCluster{kit: kit, volA: blockdev.NewMemVolume("a1", 1, testSize)}
	record := func(remote, peer, reason string) {
		tc.mu.Lock()
		defer tc.mu.Unlock()
		if remote == "" {
			reason = "no remote address: " + reason
		}
		tc.refusal = append(tc.refusal, peer+": "+reason)
	}
	tc.srvA, tc.addrA = startServer(t, newResolver(tc.volA, blockdev.NewMemVolume("a2", 2, 1<<20)),
		func(s *Server) { s.TLS, s.OnRefused = HostTLS(id, "A"), record })
	tc.srvB, tc.addrB = startServer(t, newResolver(blockdev.NewMemVolume("b1", 3, 1<<20)),
		func(s *Server) { s.TLS, s.OnRefused = HostTLS(id, "B"), record })
	return tc
}

// clientTLS is what a host's NBD client uses: its certificate, and the
// cluster CA to check that the server is a Cairn NBD server.
func clientTLS(t *testing.T, kit *pkitest.Kit, role, name string) *tls.Config {
	t.Helper()
	return kit.Identity(role, name).ClientTLS("", pki.RoleNBD)
}

// startTLS sends STARTTLS, expects the ACK and runs the client handshake;
// it returns the handshake error. With TLS 1.3 a refused client
// certificate shows at the first read, not in the handshake.
func (rc *rawClient) startTLS(cfg *tls.Config) error {
	rc.t.Helper()
	rc.option(optStartTLS, nil)
	if r := rc.optReply(); r.opt != optStartTLS || r.typ != repAck {
		rc.t.Fatalf("STARTTLS: reply %#x for option %d, want ACK", r.typ, r.opt)
	}
	tc := tls.Client(rc.c, cfg)
	err := tc.Handshake()
	rc.c, rc.br = tc, bufio.NewReader(tc)
	return err
}

// list sends LIST and returns the names, or the error reply type.
func (rc *rawClient) list() ([]string, uint32) {
	rc.t.Helper()
	rc.option(optList, nil)
	var names []string
	for {
		r := rc.optReply()
		switch r.typ {
		case repAck:
			return names, 0
		case repServer:
			n := binary.BigEndian.Uint32(r.data)
			names = append(names, string(r.data[4:4+n]))
		default:
			return names, r.typ
		}
	}
}

func waitRefused(t *testing.T, s *Server, want uint64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for s.Stats().RefusedClients < want {
		if time.Now().After(deadline) {
			t.Fatalf("RefusedClients = %d, want %d", s.Stats().RefusedClients, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestTLSRequiredBeforeStartTLS(t *testing.T) {
	tc := newTLSCluster(t)
	rc := dialRaw(t, tc.addrA)
	rc.handshake(flagCFixedNewstyle | flagCNoZeroes)
	// Every option but STARTTLS and ABORT: TLS_REQD, and nothing in the
	// reply names an export.
	for _, o := range []struct {
		opt  uint32
		data []byte
	}{
		{optList, nil}, {optInfo, infoData("a1", infoName)}, {optGo, infoData("a1")},
		{optStructuredReply, nil}, {99, []byte("x")}, {optInfo, infoData("nope")},
	} {
		rc.option(o.opt, o.data)
		r := rc.optReply()
		if r.opt != o.opt || r.typ != repErrTLSReqd {
			t.Fatalf("option %d before TLS: reply %#x, want ERR_TLS_REQD", o.opt, r.typ)
		}
		if bytes.Contains(r.data, []byte("a1")) || bytes.Contains(r.data, []byte("a2")) {
			t.Fatalf("option %d before TLS: reply names an export: %q", o.opt, r.data)
		}
	}
	// EXPORT_NAME cannot be refused with a reply: the server hangs up
	// without sending the export's size.
	rc.option(optExportName, []byte("a1"))
	rc.expectClosed()
	waitRefused(t, tc.srvA, 1)

	// A plain client that asks, is refused and leaves is counted too.
	rc = dialRaw(t, tc.addrA)
	rc.handshake(flagCFixedNewstyle | flagCNoZeroes)
	if _, e := rc.list(); e != repErrTLSReqd {
		t.Fatalf("LIST: %#x, want ERR_TLS_REQD", e)
	}
	rc.c.Close()
	waitRefused(t, tc.srvA, 2)

	// ABORT is answered in clear.
	rc = dialRaw(t, tc.addrA)
	rc.handshake(flagCFixedNewstyle | flagCNoZeroes)
	rc.option(optAbort, nil)
	if r := rc.optReply(); r.typ != repAck {
		t.Fatalf("ABORT before TLS: %#x, want ACK", r.typ)
	}
	rc.expectClosed()
}

func TestTLSHostSeesItsExportsOnly(t *testing.T) {
	tc := newTLSCluster(t)
	hostA := clientTLS(t, tc.kit, pki.RoleHost, "A")

	rc := dialRaw(t, tc.addrA)
	rc.handshake(flagCFixedNewstyle | flagCNoZeroes)
	if err := rc.startTLS(hostA); err != nil {
		t.Fatalf("host A on A's server: handshake: %v", err)
	}
	names, e := rc.list()
	if e != 0 || fmt.Sprint(names) != "[a1 a2]" {
		t.Fatalf("LIST over TLS = %v (error %#x), want [a1 a2]", names, e)
	}
	if _, e := rc.infoOrGo(optInfo, "b1"); e != repErrUnknown {
		t.Fatalf("INFO b1 (host B's) on A's server: %#x, want ERR_UNKNOWN", e)
	}
	// STARTTLS again: ERR_INVALID (not TLS_REQD: TLS is up).
	rc.option(optStartTLS, nil)
	if r := rc.optReply(); r.typ != repErrInvalid {
		t.Fatalf("second STARTTLS: %#x, want ERR_INVALID", r.typ)
	}
	ei, e := rc.infoOrGo(optGo, "a1")
	if e != 0 || ei.size != testSize {
		t.Fatalf("GO a1 over TLS: error %#x size %d", e, ei.size)
	}
	// Data through TLS: what is written is in the volume, and reads back.
	page := bytes.Repeat([]byte("cairn-tls-"), 410)[:4096]
	if code, _ := rc.do(cmdWrite, cmdFlagFUA, 8192, 4096, page); code != 0 {
		t.Fatalf("WRITE over TLS: errno %d", code)
	}
	if got := readVol(t, tc.volA, 8192, 4096); !bytes.Equal(got, page) {
		t.Fatal("the volume does not hold what was written over TLS")
	}
	if code, got := rc.do(cmdRead, 0, 8192, 4096, nil); code != 0 || !bytes.Equal(got, page) {
		t.Fatalf("READ over TLS: errno %d, data equal %v", code, bytes.Equal(got, page))
	}
	rc.request(cmdDisc, 0, 1, 0, 0, nil)
	rc.expectClosed()

	// Host A's certificate on host B's server: refused, nothing listed.
	rc = dialRaw(t, tc.addrB)
	rc.handshake(flagCFixedNewstyle | flagCNoZeroes)
	expectRefused(t, rc, hostA)
	waitRefused(t, tc.srvB, 1)
}

// expectRefused: the handshake fails, at once or (TLS 1.3) at the first
// read after it; the server never answers an option.
func expectRefused(t *testing.T, rc *rawClient, cfg *tls.Config) {
	t.Helper()
	if err := rc.startTLS(cfg); err != nil {
		return
	}
	rc.option(optList, nil)
	rc.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	b, err := io.ReadAll(rc.br)
	if err == nil && len(b) == 0 {
		t.Fatal("the server closed without an alert; want a TLS alert")
	}
	if len(b) > 0 || err == nil || !strings.Contains(err.Error(), "tls:") {
		t.Fatalf("after the handshake: read %d bytes, err %v; want a TLS alert and nothing else", len(b), err)
	}
}

func TestTLSRefusesWrongCertificates(t *testing.T) {
	tc := newTLSCluster(t)
	// Another cluster's host A, not checking the server (an attacker would
	// not): the server's own CA check must refuse it.
	otherCluster := clientTLS(t, pkitest.New(t), pki.RoleHost, "A")
	otherCluster.VerifyConnection = nil
	cases := []struct {
		name string
		cfg  *tls.Config
	}{
		{"no certificate", &tls.Config{InsecureSkipVerify: true}},
		{"another cluster's host A", otherCluster},
		{"an sds certificate named A", clientTLS(t, tc.kit, pki.RoleSDS, "A")},
		{"a client (tool) certificate", clientTLS(t, tc.kit, pki.RoleClient, "A")},
		{"host B", clientTLS(t, tc.kit, pki.RoleHost, "B")},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rc := dialRaw(t, tc.addrA)
			rc.handshake(flagCFixedNewstyle | flagCNoZeroes)
			expectRefused(t, rc, c.cfg)
			waitRefused(t, tc.srvA, uint64(i+1))
		})
	}
	if a := tc.srvA.Stats().AcceptedConnections; a != uint64(len(cases)) {
		t.Fatalf("accepted %d connections, want %d", a, len(cases))
	}
	// Each refusal is reported with what the certificate claims and why.
	got := tc.refusals()
	want := []string{": ", "host/A: ", "sds/A: ", "client/A: ", "host/B: "}
	if len(got) != len(want) {
		t.Fatalf("OnRefused got %d reports, want %d: %q", len(got), len(want), got)
	}
	for i, w := range want {
		if !strings.HasPrefix(got[i], w) || !strings.Contains(got[i], "TLS handshake refused") {
			t.Errorf("report %d (%s) = %q, want it to start %q and name the TLS refusal", i, cases[i].name, got[i], w)
		}
	}
	if !strings.Contains(got[4], "exports the volumes of host A only") {
		t.Errorf("host B's refusal does not say why: %q", got[4])
	}
}

func TestStartTLSProtocolErrors(t *testing.T) {
	tc := newTLSCluster(t)
	// STARTTLS with data: ERR_INVALID, and still no TLS.
	rc := dialRaw(t, tc.addrA)
	rc.handshake(flagCFixedNewstyle | flagCNoZeroes)
	rc.option(optStartTLS, []byte{1})
	if r := rc.optReply(); r.typ != repErrInvalid {
		t.Fatalf("STARTTLS with data: %#x, want ERR_INVALID", r.typ)
	}
	if _, e := rc.list(); e != repErrTLSReqd {
		t.Fatalf("LIST after a bad STARTTLS: %#x, want ERR_TLS_REQD", e)
	}

	// Bytes sent behind STARTTLS, before its ACK: possibly injected in
	// clear by a man in the middle; the server hangs up after the ACK.
	rc = dialRaw(t, tc.addrA)
	rc.handshake(flagCFixedNewstyle | flagCNoZeroes)
	rc.write(append(optionFrame(optStartTLS, nil), optionFrame(optList, nil)...))
	if r := rc.optReply(); r.typ != repAck {
		t.Fatalf("STARTTLS: %#x, want ACK", r.typ)
	}
	rc.expectClosed()

	// A plain server: STARTTLS is not supported, the session goes on.
	_, addr := startServer(t, newResolver(blockdev.NewMemVolume("p", 1, 1<<20)))
	rc = dialRaw(t, addr)
	rc.handshake(flagCFixedNewstyle | flagCNoZeroes)
	rc.option(optStartTLS, nil)
	if r := rc.optReply(); r.typ != repErrUnsup {
		t.Fatalf("STARTTLS on a plain server: %#x, want ERR_UNSUP", r.typ)
	}
	if names, e := rc.list(); e != 0 || fmt.Sprint(names) != "[p]" {
		t.Fatalf("LIST on a plain server: %v %#x", names, e)
	}
}

func TestCheckPlainListen(t *testing.T) {
	for _, c := range []struct {
		addr    string
		allowed bool
		ok      bool
		says    string
	}{
		{"127.0.0.1:10809", true, true, ""},
		{"[::1]:10809", true, true, ""},
		{"localhost:10809", true, true, ""},
		{"unix:/run/cairn/nbd.sock", true, true, ""},
		{"127.0.0.1:10809", false, false, "--allow-plain-loopback"},
		{"0.0.0.0:10809", true, false, "not a loopback address"},
		{":10809", true, false, "not a loopback address"},
		{"10.0.0.5:10809", true, false, "--tls require"},
		{"nbd.example:10809", true, false, "not a loopback address"},
		{"unix:", true, false, "not a loopback address"},
	} {
		err := CheckPlainListen(c.addr, c.allowed)
		if (err == nil) != c.ok || err != nil && !strings.Contains(err.Error(), c.says) {
			t.Errorf("CheckPlainListen(%q, %v) = %v", c.addr, c.allowed, err)
		}
	}
}

// gnutlsDir issues role/name a certificate and links its files under the
// names qemu's tls-creds-x509 and libnbd's tls-certificates look for.
func gnutlsDir(t *testing.T, kit *pkitest.Kit, role, name string) string {
	t.Helper()
	d := kit.Dir(role, name)
	for link, target := range map[string]string{"ca-cert.pem": pki.CACertFile, "client-cert.pem": pki.NodeCertFile, "client-key.pem": pki.NodeKeyFile} {
		if err := os.Symlink(target, filepath.Join(d, link)); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

// TestTLSThirdPartyClients: libnbd and qemu, with a host certificate, over
// STARTTLS; with another host's certificate or none, refused.
func TestTLSThirdPartyClients(t *testing.T) {
	nbdinfo := needTool(t, "nbdinfo", "libnbd-bin")
	qemuIO := needTool(t, "qemu-io", "qemu-utils")
	tc := newTLSCluster(t)
	certsA := gnutlsDir(t, tc.kit, pki.RoleHost, "A")
	certsB := gnutlsDir(t, tc.kit, pki.RoleHost, "B")

	out := runTool(t, time.Minute, nbdinfo, "--list", "--json", "nbds://"+tc.addrA+"?tls-certificates="+certsA)
	var list struct {
		TLS     bool `json:"TLS"`
		Exports []struct {
			Name string `json:"export-name"`
		} `json:"exports"`
	}
	if err := json.Unmarshal(out, &list); err != nil {
		t.Fatalf("nbdinfo --list: %v\n%s", err, out)
	}
	if len(list.Exports) != 2 || list.Exports[0].Name != "a1" || list.Exports[1].Name != "a2" || !list.TLS {
		t.Fatalf("nbdinfo --list over TLS: %s", out)
	}

	_, port, _ := net.SplitHostPort(tc.addrA)
	out = runTool(t, time.Minute, qemuIO, "--object", "tls-creds-x509,id=tls0,dir="+certsA+",endpoint=client",
		"--image-opts", "driver=nbd,host=127.0.0.1,port="+port+",export=a1,tls-creds=tls0",
		"-c", "write -P 0xa5 65536 131072", "-c", "read -P 0xa5 65536 131072")
	if bytes.Contains(out, []byte("failed")) {
		t.Fatalf("qemu-io over TLS: %s", out)
	}
	if got := readVol(t, tc.volA, 65536, 131072); !bytes.Equal(got, bytes.Repeat([]byte{0xa5}, 131072)) {
		t.Fatal("the volume does not hold the pattern qemu-io wrote over TLS")
	}

	refused := tc.srvA.Stats().RefusedClients
	for _, uri := range []string{
		"nbds://" + tc.addrA + "/a1?tls-certificates=" + certsB, // host B's certificate
		"nbd://" + tc.addrA + "/a1",                             // no TLS
	} {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		out, err := exec.CommandContext(ctx, nbdinfo, uri).CombinedOutput()
		cancel()
		if err == nil {
			t.Fatalf("nbdinfo %s: opened the export: %s", uri, out)
		}
		if bytes.Contains(out, []byte("export-size")) {
			t.Fatalf("nbdinfo %s: learned the export's size: %s", uri, out)
		}
		refused++
		waitRefused(t, tc.srvA, refused)
	}
}
