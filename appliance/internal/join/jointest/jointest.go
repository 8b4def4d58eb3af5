// Package jointest runs a join service for tests, as `cairn pki serve` does.
package jointest

import (
	"context"
	"log/slog"
	"net"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cairn-storage/cairn/appliance/internal/join"
	"github.com/cairn-storage/cairn/appliance/internal/pki"
	"github.com/cairn-storage/cairn/appliance/internal/pki/pkitest"
	"github.com/cairn-storage/cairn/appliance/internal/refusals"
)

// Start serves the join service of kit's CA on loopback, as the MDM mdm1,
// with its tokens in etcd, until the test ends. It returns the service's
// URL and the reporter its refusals go to. Refusals pause 1 ms, not 1 s.
func Start(t testing.TB, kit *pkitest.Kit, etcd *clientv3.Client) (string, *refusals.Reporter) {
	t.Helper()
	rep := refusals.New(pki.RoleMDM, "mdm1", slog.New(slog.DiscardHandler))
	return Serve(t, &join.Server{CA: kit.CA, Identity: kit.Identity(pki.RoleMDM, "mdm1"), Store: join.Store{Etcd: etcd},
		Log: slog.New(slog.DiscardHandler), Pause: time.Millisecond, Refusals: rep}), rep
}

// Serve runs srv on loopback until the test ends and returns its URL.
func Serve(t testing.TB, srv *join.Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { srv.Serve(ctx, ln); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return "https://" + ln.Addr().String()
}
