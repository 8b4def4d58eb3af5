package main

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cairn-storage/cairn/appliance/internal/join"
	"github.com/cairn-storage/cairn/appliance/internal/pki"
	"github.com/cairn-storage/cairn/appliance/internal/pki/pkitest"
	"github.com/cairn-storage/cairn/appliance/internal/porttest"
)

// TestPKIServeBootstrapWithoutEtcd: at a new system's first boot the first
// MDM's join service serves bootstrap joins at once, while etcd does not
// answer (the other MDMs need their certificates before it has a quorum),
// and `cairn pki join` takes the bootstrap token from its --token-file.
func TestPKIServeBootstrapWithoutEtcd(t *testing.T) {
	kit := pkitest.New(t)
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "bootstrap-token")
	if err := os.WriteFile(tokenFile, []byte("first-boot-token-of-the-deployer\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// An "etcd" that accepts connections and never answers: the schema
	// check would wait its full 10 s on it.
	mute, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer mute.Close()
	go func() {
		var held []net.Conn
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := mute.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	addr := porttest.Addr(t)

	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() {
		served <- pkiServe(ctx, []string{"--ca", kit.CADir(), "--pki", kit.Identity(pki.RoleMDM, "mdm1").Dir(),
			"--mdm", "https://" + mute.Addr().String(), "--listen", addr, "--bootstrap-token-file", tokenFile, "--log-level", "warn"})
	}()
	defer func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("pki serve: %v", err)
		}
	}()

	// Well under the schema check's 10 s, on a loaded machine too.
	out := filepath.Join(dir, "pki")
	deadline := time.Now().Add(8 * time.Second)
	for {
		err := pkiJoin(ctx, []string{"--url", "https://" + addr, "--token-file", tokenFile, "--out", out,
			"--role", pki.RoleMDM, "--name", "svm-2", "--host", "10.0.0.2"})
		if err == nil {
			break
		}
		if join.Final(err) || time.Now().After(deadline) {
			t.Fatalf("bootstrap join while etcd does not answer: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	id, err := pki.LoadIdentity(out)
	if err != nil || !id.CA().Equal(kit.CA.Cert) || id.Peer() != (pki.Peer{Role: pki.RoleMDM, Name: "svm-2"}) {
		t.Fatalf("joined: %v %v", id, err)
	}

	// Renewal at the same service, with the certificate just got: a new one
	// for a new key, same role and name; not before it is due unless forced.
	serial := id.Leaf().SerialNumber
	if err := pkiRenew(ctx, []string{"--pki", out, "--url", "https://" + addr}); err != nil {
		t.Fatalf("renew when not due: %v", err)
	}
	if id, _ := pki.LoadIdentity(out); id.Leaf().SerialNumber.Cmp(serial) != 0 {
		t.Fatal("renewed although not due")
	}
	if err := pkiRenew(ctx, []string{"--pki", out, "--url", "https://" + addr, "--force"}); err != nil {
		t.Fatalf("renew: %v", err)
	}
	if id, err := pki.LoadIdentity(out); err != nil || id.Leaf().SerialNumber.Cmp(serial) == 0 || id.Peer() != (pki.Peer{Role: pki.RoleMDM, Name: "svm-2"}) {
		t.Fatalf("after renewal: %v %v", id, err)
	}
	// The node that keeps the CA renews its own from it.
	own := kit.Dir(pki.RoleSDS, "svm-1")
	serial = mustIdentity(t, own).Leaf().SerialNumber
	if err := pkiRenew(ctx, []string{"--pki", own, "--ca", kit.CADir(), "--force"}); err != nil {
		t.Fatalf("renew from the CA: %v", err)
	}
	if mustIdentity(t, own).Leaf().SerialNumber.Cmp(serial) == 0 {
		t.Fatal("not renewed from the CA")
	}

	// A malformed token file stops the service before it listens.
	bad := filepath.Join(dir, "bad")
	os.WriteFile(bad, []byte("short"), 0o600)
	err = pkiServe(ctx, []string{"--ca", kit.CADir(), "--pki", kit.Identity(pki.RoleMDM, "mdm1").Dir(),
		"--mdm", "https://" + mute.Addr().String(), "--listen", "127.0.0.1:0", "--bootstrap-token-file", bad})
	if err == nil || !strings.Contains(err.Error(), "bootstrap token: malformed") || strings.Contains(err.Error(), "short") {
		t.Fatalf("a malformed bootstrap token: %v", err)
	}
}

func mustIdentity(t *testing.T, dir string) *pki.Identity {
	t.Helper()
	id, err := pki.LoadIdentity(dir)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// TestPKIFetchCAEveryMemberServes: at first boot a second MDM member joins
// at the first member's service (bootstrap token), fetches the CA with
// `cairn pki fetch-ca` (again: nothing to do), and serves joins itself: with
// the first member's service gone, a third node joins at the second's with
// the same bootstrap token (one window, from the CA's creation, on every
// member), and the second renews its own certificates from its copy.
func TestPKIFetchCAEveryMemberServes(t *testing.T) {
	kit := pkitest.New(t)
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "bootstrap-token")
	if err := os.WriteFile(tokenFile, []byte("first-boot-token-of-the-deployer\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// No etcd at all: first boot, before the quorum.
	noEtcd := freeAddr(t)
	serve := func(ctx context.Context, caDir, pkiDir, addr string) chan error {
		done := make(chan error, 1)
		go func() {
			done <- pkiServe(ctx, []string{"--ca", caDir, "--pki", pkiDir, "--mdm", "https://" + noEtcd,
				"--listen", addr, "--bootstrap-token-file", tokenFile, "--log-level", "warn"})
		}()
		return done
	}
	join1 := func(ctx context.Context, url, role, name, out string) {
		t.Helper()
		deadline := time.Now().Add(8 * time.Second)
		for {
			err := pkiJoin(ctx, []string{"--url", url, "--token-file", tokenFile, "--out", out, "--role", role, "--name", name, "--host", "127.0.0.1"})
			if err == nil {
				return
			}
			if join.Final(err) || time.Now().After(deadline) {
				t.Fatalf("join as %s/%s at %s: %v", role, name, url, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	first := freeAddr(t)
	ctx1, stop1 := context.WithCancel(context.Background())
	served1 := serve(ctx1, kit.CADir(), kit.Identity(pki.RoleMDM, "svm-1").Dir(), first)
	second := freeAddr(t)
	urls := "https://" + first + ",https://" + second
	mdm2, ca2 := filepath.Join(dir, "svm-2", "pki", "mdm"), filepath.Join(dir, "svm-2", "ca")
	join1(ctx1, urls, pki.RoleMDM, "svm-2", mdm2)
	if err := pkiFetchCA(ctx1, []string{"--url", urls, "--pki", mdm2, "--ca", ca2}); err != nil {
		t.Fatalf("fetch-ca: %v", err)
	}
	copied, err := pki.LoadCA(ca2)
	if err != nil || !copied.Cert.Equal(kit.CA.Cert) {
		t.Fatalf("the second member's CA: %v", err)
	}
	if err := pkiFetchCA(ctx1, []string{"--url", urls, "--pki", mdm2, "--ca", ca2}); err != nil {
		t.Fatalf("fetch-ca again: %v", err)
	}
	// Only an mdm certificate fetches: the sds one of the same SVM does not.
	sds2 := filepath.Join(dir, "svm-2", "pki", "sds")
	join1(ctx1, urls, pki.RoleSDS, "svm-2", sds2)
	if err := pkiFetchCA(ctx1, []string{"--url", urls, "--pki", sds2, "--ca", filepath.Join(dir, "stolen")}); err == nil ||
		!strings.Contains(err.Error(), "only an MDM member keeps the CA") {
		t.Fatalf("fetch-ca with an sds certificate: %v", err)
	}
	stop1()
	if err := <-served1; err != nil {
		t.Fatalf("first member's service: %v", err)
	}

	ctx2, stop2 := context.WithCancel(context.Background())
	defer stop2()
	served2 := serve(ctx2, ca2, mdm2, second)
	defer func() {
		stop2()
		if err := <-served2; err != nil {
			t.Errorf("second member's service: %v", err)
		}
	}()
	// The first member's service is down; the third node is given both.
	out3 := filepath.Join(dir, "svm-3", "pki", "sds")
	join1(ctx2, "https://"+first+",https://"+second, pki.RoleSDS, "svm-3", out3)
	if id := mustIdentity(t, out3); !id.CA().Equal(kit.CA.Cert) || id.Peer() != (pki.Peer{Role: pki.RoleSDS, Name: "svm-3"}) {
		t.Fatalf("joined at the second member: %v", id.Peer())
	}
	// Renewal at the second member's service, and from its own copy.
	serial := mustIdentity(t, out3).Leaf().SerialNumber
	if err := pkiRenew(ctx2, []string{"--pki", out3, "--url", "https://" + first + ",https://" + second, "--force"}); err != nil {
		t.Fatalf("renew at the second member: %v", err)
	}
	if mustIdentity(t, out3).Leaf().SerialNumber.Cmp(serial) == 0 {
		t.Fatal("not renewed at the second member")
	}
	serial = mustIdentity(t, sds2).Leaf().SerialNumber
	if err := pkiRenew(ctx2, []string{"--pki", sds2, "--ca", ca2, "--force"}); err != nil {
		t.Fatalf("renew from the second member's copy: %v", err)
	}
	if mustIdentity(t, sds2).Leaf().SerialNumber.Cmp(serial) == 0 {
		t.Fatal("not renewed from the copy")
	}
}

// freeAddr is a loopback address nothing listens on (yet).
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// TestPKIServeJoinTokenFileOpensNoWindow: an MDM member added to an existing
// system was given a cj1 join token (its --bootstrap-token-file): its join
// service opens no bootstrap window keyed to it, however young the CA.
func TestPKIServeJoinTokenFileOpensNoWindow(t *testing.T) {
	kit := pkitest.New(t)
	dir := t.TempDir()
	tok, _, err := join.New(pki.InfoOf(kit.CA.Cert).Fingerprint, []string{pki.RoleMDM}, join.DefaultTTL, "admin", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	spent := filepath.Join(dir, "join-token")
	bootstrap := filepath.Join(dir, "bootstrap-token")
	if err := os.WriteFile(spent, []byte(tok.String()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bootstrap, []byte("first-boot-token-of-the-deployer\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() {
		served <- pkiServe(ctx, []string{"--ca", kit.CADir(), "--pki", kit.Identity(pki.RoleMDM, "svm-2").Dir(), "--mdm", "https://" + freeAddr(t),
			"--listen", addr, "--bootstrap-token-file", spent, "--log-level", "warn"})
	}()
	defer func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("pki serve: %v", err)
		}
	}()
	deadline := time.Now().Add(8 * time.Second)
	for {
		err := pkiJoin(ctx, []string{"--url", "https://" + addr, "--token-file", bootstrap, "--out", filepath.Join(dir, "pki"),
			"--role", pki.RoleSDS, "--name", "svm-9"})
		if err != nil && join.Final(err) {
			if !strings.Contains(err.Error(), "has no bootstrap window") {
				t.Fatalf("a bootstrap join at a member that joined with a join token: %v", err)
			}
			return
		}
		if err == nil || time.Now().After(deadline) {
			t.Fatalf("a bootstrap join at a member that joined with a join token: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
