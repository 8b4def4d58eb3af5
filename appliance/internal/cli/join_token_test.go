package cli

import (
	"context"
	"crypto/x509"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cairn-storage/cairn/appliance/internal/gateway"
	"github.com/cairn-storage/cairn/appliance/internal/join"
	"github.com/cairn-storage/cairn/appliance/internal/join/jointest"
	"github.com/cairn-storage/cairn/appliance/internal/pki"
	"github.com/cairn-storage/cairn/appliance/internal/pki/pkitest"
)

// TestJoinTokenCommands: create writes the token to a 0600 file and never to
// the terminal; the file is what `cairn pki join` spends; ls and rm.
func TestJoinTokenCommands(t *testing.T) {
	kit := pkitest.New(t)
	h := newHarness(t, time.Hour, func(c *gateway.Config) { c.ClusterCA = func() *x509.Certificate { return kit.CA.Cert } })
	h.login()
	dir := t.TempDir()
	h.fails(2, "--role", "join-token", "create", "--out", filepath.Join(dir, "t0"))
	h.fails(1, "lifetime", "join-token", "create", "--role", "sds", "--ttl", "5s", "--out", filepath.Join(dir, "t0"))
	if _, err := os.Stat(filepath.Join(dir, "t0")); err == nil {
		t.Fatal("a refused create left its file")
	}
	file := filepath.Join(dir, "t1")
	out := h.ok("join-token", "create", "--role", "sds,target", "--ttl", "10m", "--out", file)
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := join.Parse(string(b))
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(file); st.Mode().Perm() != 0o600 || strings.Contains(out, tok.Secret) || !strings.Contains(out, tok.ID) {
		t.Fatalf("create said %q (file mode %v)", out, st.Mode())
	}
	h.fails(1, "file exists", "join-token", "create", "--role", "sds", "--out", file)
	if ls := h.ok("join-token", "ls"); len(strings.Split(strings.TrimSpace(ls), "\n")) != 2 || !strings.Contains(ls, "sds,target") {
		t.Fatalf("ls:\n%s", ls)
	}
	// The file is what a node spends.
	url, _ := jointest.Start(t, kit, h.etcd)
	ctx := context.Background()
	if _, err := join.Join(ctx, []string{url}, string(b), pki.Request{Role: pki.RoleSDS, Name: "n1"}, filepath.Join(dir, "pki")); err != nil {
		t.Fatal(err)
	}
	h.ok("join-token", "create", "--role", "host", "--out", filepath.Join(dir, "t2"))
	b, _ = os.ReadFile(filepath.Join(dir, "t2"))
	tok, _ = join.Parse(string(b))
	if got := h.ok("join-token", "rm", tok.ID); !strings.Contains(got, "revoked join token "+tok.ID) {
		t.Fatalf("rm: %q", got)
	}
	h.fails(1, "not found", "join-token", "rm", tok.ID)
	if ls := h.ok("join-token", "ls"); strings.Contains(ls, tok.ID) {
		t.Fatalf("revoked still listed:\n%s", ls)
	}
}
