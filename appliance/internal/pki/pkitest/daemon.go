package pkitest

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/cairn-storage/cairn/appliance/internal/pki"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Publish runs the product's pki.Publish for id against etcd until the
// test ends (the daemon's lease is revoked then, so its entry goes).
func Publish(t testing.TB, c *clientv3.Client, id *pki.Identity) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); pki.Publish(ctx, c, id, slog.New(slog.NewTextHandler(io.Discard, nil))) }()
	t.Cleanup(func() { cancel(); <-done })
}

// IdentityFor issues a certificate for r (a validity of its own, say) into
// a PKI directory of its own and loads it; Identity.Dir names the directory,
// where a test can issue the renewal.
func (k *Kit) IdentityFor(r pki.Request) *pki.Identity {
	k.t.Helper()
	d := filepath.Join(k.dir, r.Role+"-"+r.Name)
	if err := k.CA.IssueTo(d, r); err != nil {
		k.t.Fatal(err)
	}
	id, err := pki.LoadIdentity(d)
	if err != nil {
		k.t.Fatal(err)
	}
	return id
}
