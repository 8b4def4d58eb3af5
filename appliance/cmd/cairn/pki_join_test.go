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
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()

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
