// Package etcdtest starts a real embedded etcd member for tests.
package etcdtest

import (
	"context"
	"log/slog"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/cairn-storage/cairn/appliance/internal/mdm"
	"github.com/cairn-storage/cairn/appliance/internal/pki"
	"github.com/cairn-storage/cairn/appliance/internal/pki/pkitest"
	"github.com/cairn-storage/cairn/appliance/internal/porttest"
	"github.com/cairn-storage/cairn/appliance/internal/refusals"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
)

func freeURL(t testing.TB) url.URL {
	t.Helper()
	return url.URL{Scheme: "http", Host: porttest.Addr(t)}
}

// withFreePorts calls start with a fresh client and peer URL until it does
// not fail for a port taken meanwhile (another test's porttest.Addr may
// pick the same port before etcd binds it).
func withFreePorts(t testing.TB, start func(cu, pu url.URL) error) {
	t.Helper()
	for i := 0; ; i++ {
		err := start(freeURL(t), freeURL(t))
		if err == nil {
			return
		}
		if i == 4 || !strings.Contains(err.Error(), "address already in use") {
			t.Fatalf("start etcd: %v", err)
		}
	}
}

// Start runs a single-member etcd in t.TempDir() and returns a client to it.
// Both are closed when the test ends.
func Start(t testing.TB) *clientv3.Client {
	t.Helper()
	return StartMember(t).Client
}

// Member is a single-member etcd that a test may stop and start again (same
// data directory and URLs), to see what its clients do while it is away.
type Member struct {
	Client *clientv3.Client // connected to the member, across restarts
	t      testing.TB
	cfg    *embed.Config
	e      *embed.Etcd
}

// StartMember runs a single-member etcd in t.TempDir(); it and its Client are
// closed when the test ends. Each of configure changes the member's
// configuration before it starts (e.g. a small QuotaBackendBytes).
func StartMember(t testing.TB, configure ...func(*embed.Config)) *Member {
	t.Helper()
	m := &Member{t: t}
	var cu url.URL
	withFreePorts(t, func(c, pu url.URL) error {
		cfg := embed.NewConfig()
		cfg.Dir = t.TempDir()
		cfg.LogLevel = "error"
		cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{c}, []url.URL{c}
		cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{pu}, []url.URL{pu}
		cfg.InitialCluster = cfg.Name + "=" + pu.String()
		for _, f := range configure {
			f(cfg)
		}
		var err error
		cu = c
		m.cfg = cfg
		m.e, err = embed.StartEtcd(cfg)
		return err
	})
	m.ready()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{cu.String()}, DialTimeout: 5 * time.Second})
	if err != nil {
		m.e.Close()
		t.Fatal(err)
	}
	m.Client = cli
	t.Cleanup(func() { cli.Close(); m.Stop() })
	return m
}

func (m *Member) ready() {
	select {
	case <-m.e.Server.ReadyNotify():
	case <-time.After(30 * time.Second):
		m.e.Close()
		m.t.Fatal("etcd did not become ready in 30s")
	}
}

// Stop stops the member (its client stays, failing or waiting).
func (m *Member) Stop() {
	if m.e != nil {
		m.e.Close()
		m.e = nil
	}
}

// Restart starts the stopped member again on its data and URLs.
func (m *Member) Restart() {
	m.t.Helper()
	cfg := *m.cfg
	cfg.ClusterState = embed.ClusterStateFlagExisting
	var err error
	for i := 0; i < 50; i++ { // the old listeners may take a moment to go
		if m.e, err = embed.StartEtcd(&cfg); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		m.t.Fatalf("restart etcd: %v", err)
	}
	m.ready()
}

// StartTLS runs a single-member etcd the way an MDM with a PKI serves it
// (mdm.Start with an identity of kit's CA: https, client certificates
// required, only mdm peers), enables the MDM leader's access control
// (mdm.EnsureAccess) and returns its client URL. Connect with Client. The
// member stops when the test ends.
func StartTLS(t testing.TB, kit *pkitest.Kit) string {
	t.Helper()
	u, _ := StartTLSReporting(t, kit)
	return u
}

// StartTLSReporting is StartTLS, also returning the reporter that receives
// the connections etcd refused (as `cairn mdm` has).
func StartTLSReporting(t testing.TB, kit *pkitest.Kit) (string, *refusals.Reporter) {
	t.Helper()
	rep := refusals.New(pki.RoleMDM, "mdm1", slog.New(slog.DiscardHandler))
	var cfg mdm.Config
	var e *embed.Etcd
	var cu url.URL
	withFreePorts(t, func(c, pu url.URL) error {
		c.Scheme, pu.Scheme = "https", "https"
		cu = c
		cfg = mdm.Config{Name: "mdm1", DataDir: t.TempDir(), PeerURL: pu.String(), ClientURL: cu.String(),
			Identity: kit.Identity(pki.RoleMDM, "mdm1"), Refusals: rep}
		var err error
		e, err = mdm.Start(cfg)
		return err
	})
	t.Cleanup(e.Close)
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(30 * time.Second):
		t.Fatal("etcd did not become ready in 30s")
	}
	root := Client(t, cu.String(), cfg.Identity)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := mdm.EnsureAccess(ctx, root, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatalf("etcd access control: %v", err)
	}
	return cu.String(), rep
}

// Client connects to url with id's certificate (through mdm.ClientConfig,
// as the daemons do); it is closed when the test ends.
func Client(t testing.TB, url string, id *pki.Identity) *clientv3.Client {
	t.Helper()
	cfg, err := mdm.ClientConfig([]string{url}, id, nil)
	if err != nil {
		t.Fatal(err)
	}
	cli, err := clientv3.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}
