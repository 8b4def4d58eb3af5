// Package sds is Cairn's data server: it owns a set of devices, stores
// 1 MiB chunks on them (thin: allocated on first write, zeros until then),
// serves the data path as primary of some placement groups and secondary of
// others, and mirrors every change from primary to secondary before it is
// acknowledged.
package sds

// server.go: the SDS as a whole: its configuration, start-up (finding its
// object, opening the index and devices, listening) and the tasks it runs
// until it stops.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cairn-storage/cairn/appliance/internal/catalog"
	"github.com/cairn-storage/cairn/appliance/internal/client"
	"github.com/cairn-storage/cairn/appliance/internal/pki"
	"github.com/cairn-storage/cairn/appliance/internal/refusals"
	"github.com/cairn-storage/cairn/appliance/internal/wire"
)

// Config configures an SDS.
type Config struct {
	Name      string // the SDS object's name in the model
	Listen    string // data-path listen address
	Advertise string // address clients use; default: the listener's
	StateDir  string // chunk index and local state
	Etcd      *clientv3.Client
	Logger    *slog.Logger
	// StatsInterval between published statistics (default 2 s).
	StatsInterval time.Duration
	// LeaseTTL of the liveness key in seconds (default 3).
	LeaseTTL int64
	// ReadCache serves chunk reads through the kernel's page cache (the
	// SDS read cache, like ScaleIO's RAM read cache); writes stay direct.
	ReadCache bool
	// Security is the data path's handshake, for connections to this SDS
	// (its mode is the floor clients must meet) and from it to other SDSs.
	// nil: mode none, no handshake, no role checks.
	Security *wire.Security
	// Local also serves the data path to clients in this process without
	// the network (wire.ServeLocal at the advertised address): a frontend
	// run in the same process (cairn colocate) then reaches the chunks
	// this SDS is primary of with no hop.
	Local bool
}

// Server is a running SDS.
type Server struct {
	cfg   Config
	log   *slog.Logger
	cat   *catalog.Catalog
	cl    *client.Cluster
	idx   *index
	locks *rangeLocks
	id    string
	addr  string

	mu       sync.RWMutex
	devices  map[string]*device // attached, by device id
	prepared map[string]*device // prepared, not yet in the model, by id

	gcSeen map[uint64]bool // volumes missing at the previous collection

	heal *healer
	kick chan struct{} // re-run healing observation now
	// leaseValidUntil (Unix ns): until then this SDS holds a current
	// liveness lease and may acknowledge writes that reached only its copy.
	leaseValidUntil atomic.Int64

	refusals wire.LogLimiter    // refused requests, for the log (roles.go)
	reporter *refusals.Reporter // refused connections and requests, for the events

	started time.Time // this run's start: the published counters begin here
	statsMu sync.RWMutex
	vols    map[uint64]*volCounters
	total   volCounters
}

// Run starts an SDS and serves until ctx ends.
func Run(ctx context.Context, cfg Config) error {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.StatsInterval == 0 {
		cfg.StatsInterval = 2 * time.Second
	}
	if cfg.LeaseTTL == 0 {
		cfg.LeaseTTL = 3
	}
	log := cfg.Logger.With("sds", cfg.Name)
	if err := os.MkdirAll(cfg.StateDir, 0o700); err != nil {
		return fmt.Errorf("sds %s: state directory: %w", cfg.Name, err)
	}
	cat, err := catalog.Open(ctx, cfg.Etcd, log)
	if err != nil {
		return fmt.Errorf("sds %s: %w", cfg.Name, err)
	}
	s := &Server{cfg: cfg, log: log, cat: cat, cl: client.New(cat, log), locks: newRangeLocks(),
		devices: map[string]*device{}, prepared: map[string]*device{}, vols: map[uint64]*volCounters{}, kick: make(chan struct{}, 1), started: time.Now().UTC()}
	s.cl.Security = cfg.Security
	s.heal = newHealer(s)
	defer s.cl.Close()

	// Find our own object; the administrator creates it (cairnctl sds create).
	// Once found, its id is kept in the state directory (sdsIDFile): an SDS
	// renamed through the API finds itself by id on its next start.
	hint := time.Now()
	idFile := filepath.Join(cfg.StateDir, sdsIDFile)
	known, _ := os.ReadFile(idFile)
	for {
		if obj, ok := cat.SDS(strings.TrimSpace(string(known))); ok && len(known) > 0 {
			s.id = obj.ID
			break
		}
		if obj, ok := cat.SDSByName(cfg.Name); ok {
			s.id = obj.ID
			if err := os.WriteFile(idFile, []byte(obj.ID+"\n"), 0o600); err != nil {
				return fmt.Errorf("sds %s: record its id in %s: %w", cfg.Name, idFile, err)
			}
			break
		}
		if time.Since(hint) > 10*time.Second {
			log.Info("waiting for this SDS to be added to the cluster", "hint", fmt.Sprintf("cairnctl sds create --name %s --address %s --pd <pd>", cfg.Name, cfg.Listen))
			hint = time.Now()
		}
		select {
		case <-ctx.Done():
			return nil
		case <-cat.Changed():
		case <-time.After(time.Second):
		}
	}
	s.idx, err = openIndex(filepath.Join(cfg.StateDir, "index.db"))
	if err != nil {
		return fmt.Errorf("sds %s: %w", cfg.Name, err)
	}
	defer s.idx.close()
	s.attachDevices()
	defer s.closeDevices()

	l, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("sds %s: listen on %s: %w", cfg.Name, cfg.Listen, err)
	}
	s.addr = cfg.Advertise
	if s.addr == "" {
		s.addr = l.Addr().String()
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wg.Add(3)
	go func() { defer wg.Done(); s.liveness(wctx) }()
	go func() { defer wg.Done(); s.followDevices(wctx) }()
	go func() { defer wg.Done(); s.publishStats(wctx) }()
	// Refused connections and requests become security events.
	s.reporter = refusals.New(pki.RoleSDS, cfg.Name, log)
	wg.Add(1)
	go func() { defer wg.Done(); s.reporter.Run(wctx, cfg.Etcd, 0) }()
	sec := cfg.Security
	if sec != nil {
		c := *sec
		c.OnRefused = func(remote, peer, reason string) { s.reporter.Refused("data path", remote, peer, reason) }
		sec = &c
	}
	log.Info("SDS serving", "id", s.id, "address", s.addr, "devices", len(s.devices), "data_security", cfg.Security.String())
	stopLocal := func() {}
	if cfg.Local {
		stopLocal = wire.ServeLocal(s.addr, s.handle, inlineOp)
		log.Info("SDS also serving this process's frontends without the network", "address", s.addr)
	}
	err = wire.ServeSecure(wctx, l, sec, s.handle, inlineOp, log)
	cancel()
	stopLocal()
	if err2 := s.flush(); err2 != nil {
		log.Error("final flush failed", "err", err2)
	}
	return err
}

// sdsIDFile in the state directory holds the SDS's object id (layout v1:
// 16 hex digits and a newline), written when it first finds itself by name.
const sdsIDFile = "sds-id"

func (s *Server) followDevices(ctx context.Context) {
	gc := time.NewTicker(5 * time.Second)
	defer gc.Stop()
	s.heal.observe(ctx)
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.cat.Changed():
			s.attachDevices()
			s.heal.observe(ctx)
		case <-s.kick:
			s.heal.observe(ctx)
		case <-gc.C:
			s.collectDeletedVolumes()
			s.heal.collectForeignChunks()
			s.heal.observe(ctx)
		}
	}
}

// flush makes every completed write durable: the devices (the chunk index
// is synced at every commit already).
func (s *Server) flush() error {
	s.mu.RLock()
	devs := make([]*device, 0, len(s.devices))
	for _, d := range s.devices {
		devs = append(devs, d)
	}
	s.mu.RUnlock()
	var errs []error
	for _, d := range devs {
		if err := d.sync(); err != nil {
			errs = append(errs, fmt.Errorf("flush device %s: %w", d.path, err))
		}
	}
	return errors.Join(errs...)
}
