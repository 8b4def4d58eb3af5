package pkitest

import (
	"context"
	"io"
	"log/slog"
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
