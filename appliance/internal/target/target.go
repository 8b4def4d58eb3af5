// Package target is the `cairn target` service of an SVM: it keeps the
// kernel's LIO iSCSI configuration in line with the volumes mapped to hosts
// and serves each mapped volume's TCMU ring with Cairn's SCSI layer.
package target

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cairn-storage/cairn/appliance/internal/blockdev"
	"github.com/cairn-storage/cairn/appliance/internal/lio"
	"github.com/cairn-storage/cairn/appliance/internal/scsi"
	"github.com/cairn-storage/cairn/appliance/internal/tcmu"
)

// Host is one initiator a volume is mapped to.
type Host struct {
	IQN  string
	CHAP lio.Credentials // empty: no CHAP
}

// Mapping is one volume and the hosts that may see it.
type Mapping struct {
	VolumeID string
	// LUN is the LUN number hosts see; -1 lets the target choose (it keeps
	// a LUN's number once chosen; give numbers explicitly so every SVM uses
	// the same one).
	LUN      int
	ReadOnly bool
	Hosts    []Host
}

// LIO is the kernel target configuration: read it, change it.
type LIO interface {
	Read() (lio.State, error)
	Apply(ctx context.Context, actions []lio.Action) error
}

// KernelLIO reads configfs and applies changes with rtslib-fb.
type KernelLIO struct {
	IQN    string
	Prefix string // backstore prefix; "" is lio.BackstorePrefix
	Root   string // lio.ConfigfsRoot
	RTSLib lio.RTSLib
}

func (k KernelLIO) Read() (lio.State, error) {
	p := k.Prefix
	if p == "" {
		p = lio.BackstorePrefix
	}
	return lio.ReadState(k.Root, k.IQN, p)
}
func (k KernelLIO) Apply(ctx context.Context, a []lio.Action) error {
	return k.RTSLib.Apply(ctx, a)
}

// Config configures Run.
type Config struct {
	IQN string // this SVM's target name
	// BackstorePrefix names this target's backstores (default
	// lio.BackstorePrefix); only tests running two targets in one kernel
	// change it, to a prefix no other target's names start with.
	BackstorePrefix string
	Portals         []string        // "ip:port"; default "0.0.0.0:3260"
	MutualCHAP      lio.Credentials // the target's secret for mutual CHAP (optional)

	// Mappings lists what should be exported now. Run calls it every
	// Interval and whenever Changed fires.
	Mappings func(ctx context.Context) ([]Mapping, error)
	Changed  <-chan struct{}
	Interval time.Duration // default 2 s

	// Open opens a volume by id; Run closes nothing (volumes are owned by
	// the caller's client) but stops using a volume once it is unmapped.
	Open func(ctx context.Context, volumeID string) (blockdev.Volume, error)
	// NewHandler builds the SCSI command handler for a volume; nil serves
	// volumes with scsi.NewLUN(vol, SCSIOptions), resolving EXTENDED COPY
	// peers among the volumes this target exports.
	NewHandler  func(vol blockdev.Volume) tcmu.Handler
	SCSIOptions scsi.Options

	// LIO defaults to KernelLIO with rtslib-fb saving to lio.DefaultSaveFile.
	LIO LIO
	// Serve serves one backstore's ring until ctx ends; default ServeUIO.
	Serve func(ctx context.Context, backstore string, h tcmu.Handler) error
	Log   *slog.Logger
}

// ServeUIO finds the uio device of backstore, maps it and serves it.
func ServeUIO(ctx context.Context, backstore string, h tcmu.Handler, log *slog.Logger) error {
	d, err := tcmu.FindDevice(ctx, tcmu.SysClassUIO, backstore, 30*time.Second)
	if err != nil {
		return err
	}
	dev, err := tcmu.Open("/dev", d, log)
	if err != nil {
		return err
	}
	defer dev.Close()
	log.Info("serving TCMU ring", "backstore", backstore, "uio", d.Dev, "map_bytes", d.MapSize)
	return dev.Serve(ctx, h)
}

// server is one running ring server.
type server struct {
	cancel context.CancelFunc
	done   chan struct{}
	vol    blockdev.Volume
}

// Run keeps LIO in sync until ctx ends, then stops serving (the LIO
// configuration stays: initiators' commands wait in the rings, and the
// kernel fails them after its command timeout, until the next start).
func Run(ctx context.Context, cfg Config) error {
	if cfg.IQN == "" || cfg.Mappings == nil || cfg.Open == nil {
		return errors.New("target: IQN, Mappings and Open are required")
	}
	if len(cfg.Portals) == 0 {
		cfg.Portals = []string{"0.0.0.0:3260"}
	}
	if cfg.BackstorePrefix == "" {
		cfg.BackstorePrefix = lio.BackstorePrefix
	}
	if cfg.Interval <= 0 {
		cfg.Interval = 2 * time.Second
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.LIO == nil {
		cfg.LIO = KernelLIO{IQN: cfg.IQN, Prefix: cfg.BackstorePrefix, Root: lio.ConfigfsRoot,
			RTSLib: lio.RTSLib{SaveFile: lio.DefaultSaveFile, Options: lio.DefaultBackstoreOptions}}
	}
	if cfg.Serve == nil {
		log := cfg.Log
		cfg.Serve = func(ctx context.Context, b string, h tcmu.Handler) error { return ServeUIO(ctx, b, h, log) }
	}
	s := &syncer{cfg: cfg, servers: map[string]*server{}, vols: map[string]blockdev.Volume{}}
	if s.cfg.NewHandler == nil {
		s.cfg.NewHandler = SCSIHandlers(cfg.SCSIOptions, s.resolve)
	}
	defer s.stopAll()
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C:
		case <-cfg.Changed:
		}
		if err := s.sync(ctx); err != nil && ctx.Err() == nil {
			cfg.Log.Error("target: sync with mappings failed; retrying", "err", err, "in", cfg.Interval)
		}
		timer.Reset(cfg.Interval)
	}
}

type syncer struct {
	cfg     Config
	mu      sync.Mutex                 // guards servers and vols
	servers map[string]*server         // by backstore name
	vols    map[string]blockdev.Volume // opened volumes by id
	wg      sync.WaitGroup
}

// sync makes one pass: mappings -> desired state -> plan -> apply, starting
// ring servers for new backstores and stopping them for removed ones.
func (s *syncer) sync(ctx context.Context) error {
	mappings, err := s.cfg.Mappings(ctx)
	if err != nil {
		return fmt.Errorf("target: list mappings: %w", err)
	}
	cur, err := s.cfg.LIO.Read()
	if err != nil {
		return fmt.Errorf("target: read LIO state: %w", err)
	}
	exports, err := s.exports(ctx, mappings, cur)
	if err != nil {
		return err
	}
	want, err := lio.Desired(s.cfg.BackstorePrefix, s.cfg.IQN, s.cfg.Portals, s.cfg.MutualCHAP, exports)
	if err != nil {
		return err
	}
	plan, err := lio.Diff(cur, want)
	if err != nil {
		return err
	}
	if len(plan.Before) > 0 {
		s.cfg.Log.Info("target: applying LIO changes", "actions", actionSummary(plan.Before))
		if err := s.apply(ctx, plan.Before); err != nil {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err() // stopping: Run stops the ring servers
		}
	}
	for _, e := range exports {
		s.mu.Lock()
		vol := s.vols[e.VolumeID]
		s.mu.Unlock()
		s.ensureServer(ctx, lio.BackstoreName(s.cfg.BackstorePrefix, e.VolumeID), vol)
	}
	s.mu.Lock()
	var gone []*server
	for name, srv := range s.servers {
		if _, ok := want.Backstores[name]; !ok {
			gone = append(gone, srv)
			delete(s.servers, name)
		}
	}
	s.mu.Unlock()
	for _, srv := range gone {
		srv.cancel()
		<-srv.done
	}
	s.mu.Lock()
	for id := range s.vols {
		if _, ok := want.Backstores[lio.BackstoreName(s.cfg.BackstorePrefix, id)]; !ok {
			delete(s.vols, id)
		}
	}
	s.mu.Unlock()
	if len(plan.After) > 0 {
		s.cfg.Log.Info("target: removing backstores", "actions", actionSummary(plan.After))
		if err := s.apply(ctx, plan.After); err != nil {
			return err
		}
	}
	return nil
}

// apply makes one LIO change. A change that has begun runs to its end,
// also when the target is being stopped: rtslib killed between its configfs
// writes and its save would leave LIO half changed, or saveconfig.json
// behind LIO (a restore at the next boot brought back an ACL the target had
// removed). systemd's stop timeout bounds a change that hangs.
func (s *syncer) apply(ctx context.Context, acts []lio.Action) error {
	return s.cfg.LIO.Apply(context.WithoutCancel(ctx), acts)
}

// exports opens the mapped volumes and numbers their LUNs: an explicit
// number wins, then the number LIO already uses, then the lowest free one.
// A volume that cannot be opened is left out this round unless it was
// already exported (then its last known export stays, so a transient
// failure does not pull a LUN from under a host).
func (s *syncer) exports(ctx context.Context, mappings []Mapping, cur lio.State) ([]lio.Export, error) {
	used := map[int]bool{}
	curLUN := map[string]int{}
	if cur.Target != nil {
		for lun, bs := range cur.Target.LUNs {
			curLUN[bs] = lun
		}
	}
	for _, m := range mappings {
		if m.LUN >= 0 {
			used[m.LUN] = true
		}
	}
	var out []lio.Export
	var auto []int // indexes into out needing a number
	for _, m := range mappings {
		s.mu.Lock()
		vol, ok := s.vols[m.VolumeID]
		s.mu.Unlock()
		if !ok {
			v, err := s.cfg.Open(ctx, m.VolumeID)
			if err != nil {
				s.cfg.Log.Warn("target: cannot open mapped volume; not exported this round", "volume", m.VolumeID, "err", err)
				continue
			}
			vol = v
			s.mu.Lock()
			s.vols[m.VolumeID] = v
			s.mu.Unlock()
		}
		e := lio.Export{VolumeID: m.VolumeID, Size: vol.Size(), Serial: vol.Serial(), LUN: m.LUN}
		for _, h := range m.Hosts {
			e.Hosts = append(e.Hosts, lio.HostAccess{IQN: h.IQN, CHAP: h.CHAP, ReadOnly: m.ReadOnly})
		}
		if e.LUN < 0 {
			if l, ok := curLUN[lio.BackstoreName(s.cfg.BackstorePrefix, m.VolumeID)]; ok && !used[l] {
				e.LUN = l
				used[l] = true
			} else {
				auto = append(auto, len(out))
			}
		}
		out = append(out, e)
	}
	next := 0
	for _, i := range auto {
		for used[next] {
			next++
		}
		out[i].LUN = next
		used[next] = true
	}
	slices.SortFunc(out, func(a, b lio.Export) int { return a.LUN - b.LUN })
	return out, nil
}

// ensureServer starts serving a backstore's ring if nobody does. The server
// retries (a ring can break, the uio device can appear late) until stopped.
func (s *syncer) ensureServer(ctx context.Context, name string, vol blockdev.Volume) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.servers[name]; ok {
		return
	}
	sctx, cancel := context.WithCancel(ctx)
	srv := &server{cancel: cancel, done: make(chan struct{}), vol: vol}
	s.servers[name] = srv
	h := s.cfg.NewHandler(vol)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer close(srv.done)
		backoff := 500 * time.Millisecond
		for sctx.Err() == nil {
			err := s.cfg.Serve(sctx, name, h)
			if sctx.Err() != nil {
				return
			}
			s.cfg.Log.Error("target: ring server stopped; restarting", "backstore", name, "err", err, "in", backoff)
			select {
			case <-sctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 10*time.Second)
		}
	}()
}

// resolve finds an exported volume by its WWN (EXTENDED COPY targets).
func (s *syncer) resolve(wwn [16]byte) (blockdev.Volume, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, v := range s.vols {
		if v.WWN() == wwn {
			return v, true
		}
	}
	return nil, false
}

func (s *syncer) stopAll() {
	s.mu.Lock()
	for _, srv := range s.servers {
		srv.cancel()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// actionSummary names the actions for the log (no secrets: ACLs by initiator).
func actionSummary(acts []lio.Action) string {
	var b strings.Builder
	for i, a := range acts {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(a.Op)
		switch {
		case a.Backstore != nil:
			b.WriteString(" " + a.Backstore.Name)
		case a.ACL != nil:
			b.WriteString(" " + a.ACL.Initiator)
		case a.Initiator != "":
			fmt.Fprintf(&b, " %s lun %d", a.Initiator, a.LUN)
		case a.Name != "":
			b.WriteString(" " + a.Name)
		case a.Portal != "":
			b.WriteString(" " + a.Portal)
		}
	}
	return b.String()
}
