package pki_test

import (
	"crypto/tls"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cairn-storage/cairn/appliance/internal/pki"
	"github.com/cairn-storage/cairn/appliance/internal/pki/pkitest"
)

func TestIssueLoadAndPeer(t *testing.T) {
	k := pkitest.New(t)
	id := k.Identity(pki.RoleSDS, "sds1")
	if got := id.Peer(); got != (pki.Peer{Role: "sds", Name: "sds1"}) {
		t.Fatalf("peer %v", got)
	}
	st, err := os.Stat(filepath.Join(id.Dir(), pki.NodeKeyFile))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("node.key mode %v err %v; want 0600", st.Mode(), err)
	}
	st, err = os.Stat(filepath.Join(k.CADir(), pki.CAKeyFile))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("ca.key mode %v err %v; want 0600", st.Mode(), err)
	}
	if _, err := os.Stat(filepath.Join(id.Dir(), pki.CAKeyFile)); !os.IsNotExist(err) {
		t.Fatalf("a node directory must not hold the CA key (stat: %v)", err)
	}
	info := pki.InfoOf(id.Leaf())
	if info.Role != "sds" || info.Name != "sds1" || !info.NotAfter.After(time.Now().Add(300*24*time.Hour)) {
		t.Fatalf("info %+v", info)
	}
	if _, err := pki.InitCA(k.CADir(), "test", 0); err == nil || !strings.Contains(err.Error(), "already holds a CA") {
		t.Fatalf("InitCA over an existing CA: %v", err)
	}
}

func TestBadInputRefused(t *testing.T) {
	k := pkitest.New(t)
	for _, r := range []pki.Request{{Role: "root", Name: "x"}, {Role: "sds", Name: ""}, {Role: "sds", Name: "../x"}, {Role: "sds", Name: "-x"}} {
		if err := k.CA.IssueTo(t.TempDir(), r); err == nil {
			t.Errorf("issued %+v", r)
		}
	}
	d := k.Dir(pki.RoleNBD, "n1")
	if err := os.Chmod(filepath.Join(d, pki.NodeKeyFile), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := pki.LoadIdentity(d); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("world-readable key accepted: %v", err)
	}
	// A certificate of another cluster's CA in this cluster's directory.
	other := pkitest.New(t)
	od := other.Dir(pki.RoleNBD, "n1")
	b, _ := os.ReadFile(filepath.Join(k.CADir(), pki.CACertFile))
	if err := os.WriteFile(filepath.Join(od, pki.CACertFile), b, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := pki.LoadIdentity(od); err == nil || !strings.Contains(err.Error(), "not valid under") {
		t.Fatalf("foreign certificate accepted: %v", err)
	}
}

// pair is a connected loopback TCP pair (buffered, unlike net.Pipe: a side
// that fails sends its alert without waiting for the other to read).
func pair(t *testing.T) (net.Conn, net.Conn) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	acc := make(chan net.Conn, 1)
	go func() { c, _ := l.Accept(); acc <- c }()
	b, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	a := <-acc
	if a == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}

// handshake runs a TLS handshake and returns both sides' errors and the
// peer the server saw.
func handshake(t *testing.T, srv, cli *tls.Config) (error, error, pki.Peer) {
	t.Helper()
	a, b := pair(t)
	_ = a.SetDeadline(time.Now().Add(20 * time.Second))
	_ = b.SetDeadline(time.Now().Add(20 * time.Second))
	s, c := tls.Server(a, srv), tls.Client(b, cli)
	errc := make(chan error, 1)
	go func() {
		err := c.Handshake()
		if err == nil {
			// TLS 1.3: the client is done before the server has checked its
			// certificate; a read shows whether the server kept the connection.
			_, err = c.Read(make([]byte, 1))
			if err == io.EOF {
				err = nil
			}
		}
		b.Close()
		errc <- err
	}()
	serr := s.Handshake()
	var p pki.Peer
	if serr == nil {
		p, _ = pki.PeerFromState(s.ConnectionState())
	}
	a.Close()
	cerr := <-errc
	return serr, cerr, p
}

func TestTLSRolesAndNames(t *testing.T) {
	k := pkitest.New(t)
	sds := k.Identity(pki.RoleSDS, "sds1")
	nbd := k.Identity(pki.RoleNBD, "n1")
	host := k.Identity(pki.RoleHost, "esx1")
	serr, cerr, p := handshake(t, sds.ServerTLS(pki.RoleSDS, pki.RoleNBD), nbd.ClientTLS("sds1", pki.RoleSDS))
	if serr != nil || cerr != nil || p != nbd.Peer() {
		t.Fatalf("allowed peer: server %v client %v peer %v", serr, cerr, p)
	}
	if serr, _, _ := handshake(t, sds.ServerTLS(pki.RoleSDS, pki.RoleNBD), host.ClientTLS("sds1", pki.RoleSDS)); serr == nil || !strings.Contains(serr.Error(), `role "host"`) {
		t.Fatalf("a host certificate reached the data path: %v", serr)
	}
	if _, cerr, _ := handshake(t, sds.ServerTLS(), nbd.ClientTLS("sds2", pki.RoleSDS)); cerr == nil || !strings.Contains(cerr.Error(), "expected sds2") {
		t.Fatalf("wrong server name accepted: %v", cerr)
	}
	// Another CA's certificate, from a client that trusts any server.
	rd := pkitest.New(t).Dir(pki.RoleSDS, "sds1")
	rc, err := tls.LoadX509KeyPair(filepath.Join(rd, pki.NodeCertFile), filepath.Join(rd, pki.NodeKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	rogue := &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{rc}}
	if serr, _, _ := handshake(t, sds.ServerTLS(), rogue); serr == nil || !strings.Contains(serr.Error(), "not issued by this cluster") {
		t.Fatalf("another CA's certificate accepted: %v", serr)
	}
	// No certificate at all.
	if serr, _, _ := handshake(t, sds.ServerTLS(), &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS13}); serr == nil {
		t.Fatal("a client without a certificate was accepted")
	}
}

func TestReloadRotates(t *testing.T) {
	k := pkitest.New(t)
	d := k.Dir(pki.RoleGateway, "gw1")
	id, err := pki.LoadIdentity(d)
	if err != nil {
		t.Fatal(err)
	}
	old := id.Leaf().SerialNumber
	if err := k.CA.IssueTo(d, pki.Request{Role: pki.RoleGateway, Name: "gw1"}); err != nil {
		t.Fatal(err)
	}
	if err := id.Reload(); err != nil {
		t.Fatal(err)
	}
	if id.Leaf().SerialNumber.Cmp(old) == 0 {
		t.Fatal("reload kept the old certificate")
	}
	if err := k.CA.IssueTo(d, pki.Request{Role: pki.RoleSDS, Name: "gw1"}); err != nil {
		t.Fatal(err)
	}
	if err := id.Reload(); err == nil || id.Peer().Role != pki.RoleGateway {
		t.Fatalf("reload to another role: err %v, peer %v", err, id.Peer())
	}
	// Handshakes use the current certificate.
	if err := k.CA.IssueTo(d, pki.Request{Role: pki.RoleGateway, Name: "gw1"}); err != nil {
		t.Fatal(err)
	}
	if err := id.Reload(); err != nil {
		t.Fatal(err)
	}
	cli := k.Identity(pki.RoleClient, "c")
	a, b := pair(t)
	go func() { s := tls.Server(a, id.ServerTLS()); _ = s.Handshake(); _, _ = io.Copy(io.Discard, s) }()
	c := tls.Client(b, cli.ClientTLS("gw1"))
	if err := c.Handshake(); err != nil {
		t.Fatal(err)
	}
	if got := c.ConnectionState().PeerCertificates[0].SerialNumber; got.Cmp(id.Leaf().SerialNumber) != 0 {
		t.Fatal("the server presented a certificate other than the reloaded one")
	}
	c.Close()
	a.Close()
}

// TestLoadDuringRenewal: a renewal replaces node.key, then node.crt. A load
// between the two (a daemon starting, a command run) gets the new pair once
// the certificate follows, and a directory whose key and certificate never
// go together is still refused, saying so.
func TestLoadDuringRenewal(t *testing.T) {
	k := pkitest.New(t)
	d := k.Dir(pki.RoleSDS, "sds1")
	certPEM, keyPEM, err := k.CA.Issue(pki.Request{Role: pki.RoleSDS, Name: "sds1"})
	if err != nil {
		t.Fatal(err)
	}
	replace := func(name string, data []byte) {
		tmp := filepath.Join(d, ".next")
		if err := os.WriteFile(tmp, data, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(d, name)); err != nil {
			t.Fatal(err)
		}
	}
	replace(pki.NodeKeyFile, keyPEM) // the renewal's first rename
	done := make(chan struct{})
	go func() {
		time.Sleep(30 * time.Millisecond)
		replace(pki.NodeCertFile, certPEM) // and its second, while the load waits
		close(done)
	}()
	id, err := pki.LoadIdentity(d)
	<-done
	if err != nil {
		t.Fatalf("load during a renewal: %v", err)
	}
	if want, _ := pki.LoadIdentity(d); !id.Leaf().Equal(want.Leaf()) {
		t.Fatal("the load during a renewal did not get the new certificate")
	}

	other, _, err := k.CA.Issue(pki.Request{Role: pki.RoleSDS, Name: "sds1"})
	if err != nil {
		t.Fatal(err)
	}
	replace(pki.NodeCertFile, other) // a certificate for another key, for good
	if _, err := pki.LoadIdentity(d); err == nil || !strings.Contains(err.Error(), "does not match") {
		t.Fatalf("load of a key and certificate that do not go together: %v", err)
	}
}
