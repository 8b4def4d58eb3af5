// Package testcluster runs a real in-process Cairn cluster for tests: an
// embedded etcd, the MDM control loop, N SDSs with file-backed devices on
// loopback, and a data client.
package testcluster

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cairn-storage/cairn/appliance/internal/catalog"
	"github.com/cairn-storage/cairn/appliance/internal/client"
	"github.com/cairn-storage/cairn/appliance/internal/etcdtest"
	"github.com/cairn-storage/cairn/appliance/internal/mdm"
	"github.com/cairn-storage/cairn/appliance/internal/model"
	"github.com/cairn-storage/cairn/appliance/internal/pki"
	"github.com/cairn-storage/cairn/appliance/internal/pki/pkitest"
	"github.com/cairn-storage/cairn/appliance/internal/porttest"
	"github.com/cairn-storage/cairn/appliance/internal/sds"
	"github.com/cairn-storage/cairn/appliance/internal/sdsrpc"
	"github.com/cairn-storage/cairn/appliance/internal/wire"
)

// Cluster is a running test cluster.
type Cluster struct {
	T      testing.TB
	Etcd   *clientv3.Client
	Store  *model.Store
	Client *client.Cluster
	Cat    *catalog.Catalog
	PoolID string
	Dir    string
	SDSs   []*SDS
	Log    *slog.Logger
	local  []int // Options.LocalSDSs
	// PKI is the cluster's CA (nil with DataSecurity none): tests issue
	// more certificates from it (Security).
	PKI    *pkitest.Kit
	mode   wire.Mode
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// SDS is one running data server.
type SDS struct {
	ID, Name, Addr, State string
	Devices               []string
	cancel                context.CancelFunc
	done                  chan error
	sec                   *wire.Security // issued at its first start, kept across restarts
}

// Options size the cluster.
type Options struct {
	SDSs          int   // default 3
	DevicesPerSDS int   // default 2
	DeviceSize    int64 // default 256 MiB (sparse files)
	PGCount       int   // default 64
	// DataSecurity of every SDS and of the client: "" is authenticated
	// (certificates from a throw-away CA), or "secure", or "none".
	DataSecurity string
	// LocalSDSs are the indices of the SDSs that also serve the test's
	// process without the network (sds.Config.Local): the client (and the
	// other SDSs) reach them by a function call, as a frontend colocated
	// with an SDS does (cairn colocate).
	LocalSDSs []int
	// LogTo receives the cluster's log (default stderr), at warning level
	// unless CAIRN_TEST_LOG=info.
	LogTo io.Writer
}

// Start runs a cluster and stops it when the test ends.
func Start(t testing.TB, o Options) *Cluster {
	t.Helper()
	if o.SDSs == 0 {
		o.SDSs = 3
	}
	if o.DevicesPerSDS == 0 {
		o.DevicesPerSDS = 2
	}
	if o.DeviceSize == 0 {
		o.DeviceSize = 256 << 20
	}
	if o.PGCount == 0 {
		o.PGCount = 64
	}
	lvl := slog.LevelWarn
	if os.Getenv("CAIRN_TEST_LOG") == "info" {
		lvl = slog.LevelInfo
	}
	if o.LogTo == nil {
		o.LogTo = os.Stderr
	}
	log := slog.New(slog.NewTextHandler(o.LogTo, &slog.HandlerOptions{Level: lvl}))
	mode := wire.ModeAuthenticated
	if o.DataSecurity != "" {
		var err error
		if mode, err = wire.ParseMode(o.DataSecurity); err != nil {
			t.Fatal(err)
		}
	}
	cli := etcdtest.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	c := &Cluster{T: t, Etcd: cli, Store: model.NewStore(cli), Dir: t.TempDir(), Log: log, mode: mode, ctx: ctx, cancel: cancel, local: o.LocalSDSs}
	if mode != wire.ModeNone {
		c.PKI = pkitest.New(t)
	}
	t.Cleanup(c.Stop)

	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	sys := model.System{ID: model.NewID(), Name: "test", Created: time.Now()}
	_, err := cli.Put(ctx, model.SystemKey, mustJSON(sys))
	must(err)
	pd := model.ProtectionDomain{ID: model.NewID(), Name: "pd1"}
	must(c.Store.Create(ctx, model.KindPD, pd.ID, pd.Name, pd, nil))
	pool := model.StoragePool{ID: model.NewID(), Name: "pool1", PDID: pd.ID, SparePercent: 10, PGCount: o.PGCount, ZeroPadding: true}
	must(c.Store.Create(ctx, model.KindPool, pool.ID, pool.Name, pool, nil))
	c.PoolID = pool.ID

	c.wg.Add(1)
	go func() { defer c.wg.Done(); (&mdm.Controller{Etcd: cli, Log: log}).Run(ctx) }()

	for i := 0; i < o.SDSs; i++ {
		s := &SDS{ID: model.NewID(), Name: fmt.Sprintf("sds%d", i+1), Addr: porttest.Addr(t)}
		s.State = filepath.Join(c.Dir, s.Name)
		must(c.Store.Create(ctx, model.KindSDS, s.ID, s.Name, model.SDS{ID: s.ID, Name: s.Name, PDID: pd.ID, Address: s.Addr, State: model.SDSNormal}, nil))
		c.SDSs = append(c.SDSs, s)
		c.StartSDS(i)
	}
	cat, err := catalog.Open(ctx, cli, log)
	must(err)
	c.Cat = cat
	c.Client = client.New(cat, log)
	c.Client.Security = c.Security(pki.RoleClient, "testclient")
	c.Client.RetryFor = 20 * time.Second
	prober := c.Security(pki.RoleGateway, "testgateway")
	for i, s := range c.SDSs {
		c.waitLive(s.ID)
		for d := 0; d < o.DevicesPerSDS; d++ {
			path := filepath.Join(c.Dir, fmt.Sprintf("%s-dev%d.img", s.Name, d))
			f, err := os.Create(path)
			must(err)
			must(f.Truncate(o.DeviceSize))
			f.Close()
			id := model.NewID()
			peer := wire.NewClient(s.Addr, 1)
			peer.Security = prober
			capacity, err := sdsrpc.PrepareDevice(ctx, peer, sdsrpc.PrepareDeviceRequest{ClusterID: sys.ID, DeviceID: id, Path: path})
			peer.Close()
			must(err)
			must(c.Store.Create(ctx, model.KindDevice, id, fmt.Sprintf("%s-d%d", s.Name, d), model.Device{ID: id, Name: fmt.Sprintf("%s-d%d", s.Name, d), SDSID: s.ID, PoolID: pool.ID, Path: path, Capacity: capacity, State: model.DeviceNormal}, nil))
			c.SDSs[i].Devices = append(c.SDSs[i].Devices, path)
		}
	}
	// Wait for the placement map.
	deadline := time.Now().Add(20 * time.Second)
	for {
		if m, ok := cat.Map(pool.ID); ok && len(m.PGs) == o.PGCount && countDevices(m) == o.SDSs*o.DevicesPerSDS {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no placement map after 20 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	return c
}

func countDevices(m *model.PlacementMap) int {
	s := map[string]bool{}
	for _, pg := range m.PGs {
		for _, c := range pg {
			s[c.DeviceID] = true
		}
	}
	return len(s)
}

func (c *Cluster) waitLive(id string) {
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		r, err := c.Etcd.Get(c.ctx, model.LiveKey(id))
		if err == nil && len(r.Kvs) == 1 {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	c.T.Fatalf("SDS %s not live after 20 s", id)
}

// StartSDS (re)starts SDS i.
func (c *Cluster) StartSDS(i int) {
	s := c.SDSs[i]
	if s.sec == nil {
		s.sec = c.Security(pki.RoleSDS, s.Name)
	}
	ctx, cancel := context.WithCancel(c.ctx)
	s.cancel, s.done = cancel, make(chan error, 1)
	go func() {
		s.done <- sds.Run(ctx, sds.Config{Name: s.Name, Listen: s.Addr, StateDir: s.State, Etcd: c.Etcd, Logger: c.Log, StatsInterval: 500 * time.Millisecond, ReadCache: true,
			Security: s.sec, Local: slices.Contains(c.local, i)})
	}()
	if c.Cat != nil {
		c.waitLive(s.ID)
	}
}

// Security is the data-path security, in the cluster's mode, of a new
// certificate for role/name from the cluster's CA (nil in mode none).
func (c *Cluster) Security(role, name string) *wire.Security {
	c.T.Helper()
	if c.mode == wire.ModeNone {
		return nil
	}
	sec, err := wire.NewSecurity(c.mode, c.PKI.Identity(role, name))
	if err != nil {
		c.T.Fatal(err)
	}
	return sec
}

// StopSDS stops SDS i gracefully.
func (c *Cluster) StopSDS(i int) {
	s := c.SDSs[i]
	if s.cancel == nil {
		return
	}
	s.cancel()
	if err := <-s.done; err != nil {
		c.T.Errorf("sds %s: %v", s.Name, err)
	}
	s.cancel = nil
}

// CreateVolume creates a volume directly in the model and opens it.
func (c *Cluster) CreateVolume(name string, size int64, thin bool) *client.Volume {
	c.T.Helper()
	id := model.NewID()
	v := model.Volume{ID: id, Name: name, PoolID: c.PoolID, Size: size, Thin: thin, WWN: "6" + id + "000000000000000", Serial: id, Created: time.Now()}
	if err := c.Store.Create(c.ctx, model.KindVolume, id, name, v, nil); err != nil {
		c.T.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(c.ctx, 10*time.Second)
	defer cancel()
	for {
		vol, err := c.Client.Open(ctx, name)
		if err == nil {
			return vol
		}
		if ctx.Err() != nil {
			c.T.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Stop stops everything.
func (c *Cluster) Stop() {
	for i := range c.SDSs {
		c.StopSDS(i)
	}
	if c.Client != nil {
		c.Client.Close()
	}
	c.cancel()
	c.wg.Wait()
}

func mustJSON(v any) string {
	b, err := jsonMarshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

var jsonMarshal = func(v any) ([]byte, error) { return json.Marshal(v) }
