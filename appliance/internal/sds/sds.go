// Package sds is Cairn's data server: it owns a set of devices, stores
// 1 MiB chunks on them (thin: allocated on first write, zeros until then),
// serves the data path as primary of some placement groups and secondary of
// others, and mirrors every change from primary to secondary before it is
// acknowledged.
package sds

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
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

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cairn-storage/cairn/appliance/internal/bufpool"
	"github.com/cairn-storage/cairn/appliance/internal/catalog"
	"github.com/cairn-storage/cairn/appliance/internal/client"
	"github.com/cairn-storage/cairn/appliance/internal/iostats"
	"github.com/cairn-storage/cairn/appliance/internal/model"
	"github.com/cairn-storage/cairn/appliance/internal/placement"
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

	started time.Time // this run's start: the published counters begin here
	statsMu sync.RWMutex
	vols    map[uint64]*volCounters
	total   volCounters
}

type volCounters struct{ iostats.Counters }

func (c *volCounters) snapshot() model.IOCounters { return c.Snapshot() }

var errNoSpace = errors.New("no free chunk slot on the device")

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
	log.Info("SDS serving", "id", s.id, "address", s.addr, "devices", len(s.devices))
	err = wire.ServeInline(wctx, l, s.handle, inlineOp, log)
	cancel()
	if err2 := s.flush(); err2 != nil {
		log.Error("final flush failed", "err", err2)
	}
	return err
}

// attachDevices opens every device the model assigns to this SDS.
func (s *Server) attachDevices() {
	sys := s.cat.System()
	for _, d := range s.cat.Devices(s.id) {
		s.mu.RLock()
		_, done := s.devices[d.ID]
		s.mu.RUnlock()
		if done || d.State == model.DeviceRemoving {
			continue
		}
		s.mu.Lock()
		pd := s.prepared[d.ID]
		delete(s.prepared, d.ID)
		s.mu.Unlock()
		if pd == nil {
			var err error
			pd, err = s.openExisting(d, sys.ID)
			if err != nil {
				s.log.Error("device unavailable", "device", d.Path, "err", err)
				continue
			}
		}
		if err := s.idx.attach(pd); err != nil {
			s.log.Error("device index", "device", d.Path, "err", err)
			pd.close()
			continue
		}
		s.mu.Lock()
		s.devices[d.ID] = pd
		s.mu.Unlock()
		s.log.Info("device attached", "device", d.Path, "id", d.ID, "slots", pd.super.Slots, "direct_io_align", pd.align)
	}
}

func (s *Server) openExisting(d model.Device, clusterID string) (*device, error) {
	dev, err := openDevice(d.Path, s.cfg.ReadCache)
	if err != nil {
		return nil, err
	}
	sb, _, err := dev.readSuper()
	if err != nil {
		dev.close()
		return nil, fmt.Errorf("device %s: %w", d.Path, err)
	}
	if sb.DeviceID != d.ID || sb.ClusterID != clusterID {
		dev.close()
		return nil, fmt.Errorf("device %s holds device %s of cluster %s, expected device %s of cluster %s: the path now names another disk", d.Path, sb.DeviceID, sb.ClusterID, d.ID, clusterID)
	}
	dev.id, dev.super = d.ID, sb
	return dev, nil
}

func (s *Server) closeDevices() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, d := range s.devices {
		d.close()
	}
	for _, d := range s.prepared {
		d.close()
	}
}

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

// collectDeletedVolumes frees the chunks of volumes that no longer exist.
// A chunk of a volume this SDS has never seen cannot exist: every data
// request is checked against the catalog first.
func (s *Server) collectDeletedVolumes() {
	if s.cat.Epoch() == 0 {
		return // no map yet: the snapshot may be empty
	}
	// Data is only freed when its volume was absent at two passes in a
	// row, so a momentarily incomplete snapshot can never destroy data.
	missing := map[uint64]bool{}
	freed := 0
	for _, k := range s.idx.chunks() {
		if _, ok := s.cat.Volume(k.vol); ok {
			continue
		}
		missing[k.vol] = true
		if !s.gcSeen[k.vol] {
			continue
		}
		unlock := s.locks.lock(k, 0, model.ChunkSize)
		if _, ok := s.cat.Volume(k.vol); !ok {
			if loc, ok := s.idx.lookup(k); ok {
				if err := loc.dev.zero(loc.dev.slotOffset(loc.slot), model.ChunkSize); err == nil {
					if s.idx.free(k) == nil {
						freed++
					}
				}
			}
		}
		unlock()
	}
	s.gcSeen = missing
	if freed > 0 {
		s.log.Info("freed chunks of deleted volumes", "chunks", freed)
	}
}

// liveness keeps the SDS's lease-bound liveness key; the MDM leader treats
// its expiry as the SDS's failure. It renews the lease every second and
// records until when the lease is certainly current: the server's expiry is
// at least TTL after the renewal request was sent.
func (s *Server) liveness(ctx context.Context) {
	val, _ := json.Marshal(model.SDSLive{Address: s.addr, PID: os.Getpid(), Since: time.Now().UTC()})
	ttl := time.Duration(s.cfg.LeaseTTL) * time.Second
	var lease clientv3.LeaseID
	for ctx.Err() == nil {
		sent := time.Now()
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		var err error
		if lease == 0 {
			var g *clientv3.LeaseGrantResponse
			if g, err = s.cfg.Etcd.Grant(rctx, s.cfg.LeaseTTL); err == nil {
				if _, err = s.cfg.Etcd.Put(rctx, model.LiveKey(s.id), string(val), clientv3.WithLease(g.ID)); err == nil {
					lease = g.ID
				}
			}
		} else {
			var k *clientv3.LeaseKeepAliveResponse
			if k, err = s.cfg.Etcd.KeepAliveOnce(rctx, lease); err == nil && k.TTL <= 0 {
				err = errors.New("lease expired")
			}
			if err != nil && (errors.Is(err, rpctypes.ErrLeaseNotFound) || strings.Contains(err.Error(), "lease expired") || strings.Contains(err.Error(), "requested lease not found")) {
				lease = 0 // expired: the leader has declared us dead; register again
			}
		}
		cancel()
		if err == nil && lease != 0 {
			s.leaseValidUntil.Store(sent.Add(ttl - 300*time.Millisecond).UnixNano())
		} else if ctx.Err() == nil {
			s.log.Debug("liveness lease", "err", err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second - time.Since(sent)):
		}
	}
	if lease != 0 {
		rctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, _ = s.cfg.Etcd.Revoke(rctx, lease)
		cancel()
	}
}

// leaseValid reports whether the SDS may acknowledge a solo write now.
func (s *Server) leaseValid() bool { return time.Now().UnixNano() < s.leaseValidUntil.Load() }

// deviceFailed takes a device out after an I/O error: no more I/O on it,
// and its state in the model becomes error, so the leader rebuilds its
// copies elsewhere. The SDS itself keeps serving its other devices.
func (s *Server) deviceFailed(d *device, cause error) {
	if !d.failed.CompareAndSwap(false, true) {
		return
	}
	s.log.Error("device failed: taken out of service, its data will be rebuilt elsewhere", "device", d.path, "id", d.id, "err", cause)
	go func() {
		st := model.NewStore(s.cfg.Etcd)
		for i := 0; i < 20; i++ {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			var dev model.Device
			rev, err := st.Get(ctx, model.Key(model.KindDevice, d.id), &dev)
			if err == nil {
				dev.State, dev.Error = model.DeviceError, cause.Error()
				err = st.Update(ctx, model.Key(model.KindDevice, d.id), rev, dev)
			}
			cancel()
			if err == nil || errors.Is(err, model.ErrNotFound) {
				return
			}
			time.Sleep(500 * time.Millisecond)
		}
	}()
}

// localError turns a local device error into a retryable answer: the
// client retries once the map no longer routes to the failed device.
// (The device that failed was already taken out where the error arose.)
func (s *Server) localError(d *device, err error) (wire.Response, func()) {
	if errors.Is(err, errNoSpace) {
		return errResp(wire.StatusNoSpace, fmt.Errorf("device %s: %w", d.path, err))
	}
	return errResp(wire.StatusUnavailable, fmt.Errorf("local copy: %w", err))
}

// sdsIDFile in the state directory holds the SDS's object id (layout v1:
// 16 hex digits and a newline), written when it first finds itself by name.
const sdsIDFile = "sds-id"

func (s *Server) publishStats(ctx context.Context) {
	t := time.NewTicker(s.cfg.StatsInterval)
	defer t.Stop()
	var lease clientv3.LeaseID
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		st := model.SDSStats{SDSID: s.id, Time: time.Now().UTC(), Total: s.total.snapshot(), Volumes: map[string]model.IOCounters{}, Devices: map[string]model.DeviceUsage{}}
		s.statsMu.Lock()
		for id, c := range s.vols {
			st.Volumes[fmt.Sprintf("%016x", id)] = c.snapshot()
		}
		s.statsMu.Unlock()
		st.VolumeChunks = map[string]int64{}
		for vol, n := range s.idx.volumeChunks() {
			st.VolumeChunks[fmt.Sprintf("%016x", vol)] = n
		}
		s.mu.RLock()
		for id := range s.devices {
			used, total := s.idx.usage(id)
			state := model.DeviceNormal
			if s.devices[id].failed.Load() {
				state = model.DeviceError
			}
			st.Devices[id] = model.DeviceUsage{Capacity: int64(total) * model.ChunkSize, Used: int64(used) * model.ChunkSize, State: state}
		}
		s.mu.RUnlock()
		st.Started, st.DeviceIO = s.started, map[string]model.IOCounters{}
		s.mu.RLock()
		for id, d := range s.devices {
			st.DeviceIO[id] = d.io.Snapshot()
		}
		s.mu.RUnlock()
		st.Rebuild = model.RebuildStats{PendingBytes: s.heal.pendingBytes.Load(), DoneBytes: s.heal.doneBytes.Load(), ResyncBytes: s.heal.resyncBytes.Load()}
		b, _ := json.Marshal(st)
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		if lease == 0 {
			if g, err := s.cfg.Etcd.Grant(pctx, int64(3*s.cfg.StatsInterval/time.Second)+3); err == nil {
				lease = g.ID
			}
		} else if _, err := s.cfg.Etcd.KeepAliveOnce(pctx, lease); err != nil {
			lease = 0
		}
		if lease != 0 {
			_, _ = s.cfg.Etcd.Put(pctx, model.StatsKey(s.id), string(b), clientv3.WithLease(lease))
		}
		cancel()
	}
}

func (s *Server) counters(vol uint64) *volCounters {
	s.statsMu.RLock()
	c := s.vols[vol]
	s.statsMu.RUnlock()
	if c != nil {
		return c
	}
	s.statsMu.Lock()
	defer s.statsMu.Unlock()
	c = s.vols[vol]
	if c == nil {
		c = &volCounters{}
		s.vols[vol] = c
	}
	return c
}

// flush makes every completed write durable: devices, then the index.
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
	if s.idx != nil {
		if err := s.idx.sync(); err != nil {
			errs = append(errs, fmt.Errorf("flush chunk index: %w", err))
		}
	}
	return errors.Join(errs...)
}

// PrepareDeviceRequest is the JSON payload of OpPrepareDevice.
type PrepareDeviceRequest struct {
	ClusterID string `json:"cluster_id"`
	DeviceID  string `json:"device_id"`
	Path      string `json:"path"`
	Force     bool   `json:"force"`
}

// PrepareDeviceResponse is its answer.
type PrepareDeviceResponse struct {
	Capacity int64 `json:"capacity"`
}

func (s *Server) prepareDevice(p PrepareDeviceRequest) (int64, error) {
	if p.ClusterID == "" || p.DeviceID == "" || len(p.DeviceID) > 32 || len(p.ClusterID) > 32 {
		return 0, errors.New("cluster id and device id are required (at most 32 characters)")
	}
	if err := CheckStablePath(p.Path, p.Force); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, d := range s.devices {
		if d.path == p.Path {
			if d.id == p.DeviceID {
				return int64(d.super.Slots) * model.ChunkSize, nil
			}
			return 0, fmt.Errorf("device %s is already in use by this SDS as device %s", p.Path, d.id)
		}
	}
	if d, ok := s.prepared[p.DeviceID]; ok && d.path == p.Path {
		return int64(d.super.Slots) * model.ChunkSize, nil
	}
	dev, err := openDevice(p.Path, s.cfg.ReadCache)
	if err != nil {
		return 0, err
	}
	sb, raw, err := dev.readSuper()
	switch {
	case err == nil && sb.ClusterID == p.ClusterID && sb.DeviceID == p.DeviceID:
		// Re-adding the same device (a retried request): keep its data.
		dev.id, dev.super = p.DeviceID, sb
		s.prepared[p.DeviceID] = dev
		return int64(sb.Slots) * model.ChunkSize, nil
	case err == nil && !p.Force:
		dev.close()
		if sb.ClusterID != p.ClusterID {
			return 0, fmt.Errorf("device %s holds data of another Cairn cluster (%s): if that data is no longer needed, add it with force", p.Path, sb.ClusterID)
		}
		return 0, fmt.Errorf("device %s already belongs to this cluster as device %s: remove that device first, or add with force to wipe it", p.Path, sb.DeviceID)
	case err != nil && !errors.Is(err, errNoSuperblock) && !p.Force:
		dev.close()
		return 0, fmt.Errorf("device %s: %w; add with force to overwrite it", p.Path, err)
	case err != nil && !p.Force:
		if sig := foreignSignature(raw); sig != "" {
			dev.close()
			return 0, fmt.Errorf("device %s holds %s: wipe it first (wipefs), or add with force to overwrite it", p.Path, sig)
		}
	}
	size, err := dev.size()
	if err != nil {
		dev.close()
		return 0, fmt.Errorf("device %s: size: %w", p.Path, err)
	}
	if size < minDeviceSize {
		dev.close()
		return 0, fmt.Errorf("device %s has %d bytes; a device needs at least %d MiB", p.Path, size, minDeviceSize>>20)
	}
	slots := uint64(size-DataOffset) / model.ChunkSize
	dev.id = p.DeviceID
	dev.super = &superblock{ChunkSize: model.ChunkSize, ClusterID: p.ClusterID, DeviceID: p.DeviceID, SDSID: s.id, DataOffset: DataOffset, Slots: slots, Created: time.Now()}
	// Zero the data area (punching holes where possible) so a fresh slot
	// never shows old contents, then write the superblock last.
	if err := dev.zero(DataOffset, int64(slots)*model.ChunkSize); err != nil {
		dev.close()
		return 0, fmt.Errorf("device %s: clear data area: %w", p.Path, err)
	}
	if _, err := dev.f.WriteAt(dev.super.encode(), 0); err != nil {
		dev.close()
		return 0, fmt.Errorf("device %s: write superblock: %w", p.Path, err)
	}
	if err := dev.f.Sync(); err != nil {
		dev.close()
		return 0, fmt.Errorf("device %s: sync: %w", p.Path, err)
	}
	s.prepared[p.DeviceID] = dev
	s.log.Info("device prepared", "device", p.Path, "id", p.DeviceID, "slots", slots)
	return int64(slots) * model.ChunkSize, nil
}

func ok() (wire.Response, func()) { return wire.Response{}, nil }

func errResp(status uint16, err error) (wire.Response, func()) {
	return wire.Response{Status: status, Payload: []byte(err.Error())}, nil
}

// handle serves one data-path request.
func (s *Server) handle(ctx context.Context, req *wire.Request) (wire.Response, func()) {
	switch req.Op {
	case wire.OpPing:
		return ok()
	case wire.OpFlush:
		if err := s.flush(); err != nil {
			return errResp(wire.StatusIOError, err)
		}
		return ok()
	case wire.OpPrepareDevice:
		var p PrepareDeviceRequest
		if err := json.Unmarshal(req.Payload, &p); err != nil {
			return errResp(wire.StatusInvalid, fmt.Errorf("prepare device: %w", err))
		}
		capacity, err := s.prepareDevice(p)
		if err != nil {
			return errResp(wire.StatusRefused, err)
		}
		b, _ := json.Marshal(PrepareDeviceResponse{Capacity: capacity})
		return wire.Response{Payload: b}, nil
	case wire.OpChunkList:
		if req.Epoch < s.cat.Epoch() {
			return wire.Response{Status: wire.StatusStaleEpoch, Epoch: s.cat.Epoch()}, nil
		}
		return s.chunkList(req)
	case wire.OpRead, wire.OpWrite, wire.OpCompareWrite, wire.OpWriteZeroes, wire.OpWriteSame, wire.OpUnmap, wire.OpCopyFrom, wire.OpExtents, wire.OpChunkPut:
		return s.chunkOp(ctx, req)
	}
	return errResp(wire.StatusUnsupported, fmt.Errorf("opcode %d", req.Op))
}

// inlineOp: small reads are served on the connection's reader, in order,
// with their replies batched (see wire.ServeInline); one local read is
// shorter than a goroutine hand-off and two wake-ups.
func inlineOp(req *wire.Request) bool {
	return req.Op == wire.OpRead && req.Length <= 128<<10
}

// awaitRoute waits up to one second for the catalog to learn a chunk's
// route, then reloads it from etcd once; only the rare unknown-volume answer
// pays for it.
func (s *Server) awaitRoute(ctx context.Context, vol, chunk uint64) (catalog.Route, bool) {
	deadline := time.NewTimer(time.Second)
	defer deadline.Stop()
	for {
		ch := s.cat.Changed()
		if r, ok := s.cat.ChunkRoute(vol, chunk, placement.PG); ok && len(r.Copies) > 0 {
			return r, true
		}
		select {
		case <-ctx.Done():
			return catalog.Route{}, false
		case <-ch:
		case <-deadline.C:
			if err := s.cat.Refresh(ctx); err != nil {
				return catalog.Route{}, false
			}
			return s.cat.ChunkRoute(vol, chunk, placement.PG)
		}
	}
}

// chunkOp validates routing and runs one chunk-level operation.
func (s *Server) chunkOp(ctx context.Context, req *wire.Request) (wire.Response, func()) {
	cur := s.cat.Epoch()
	if req.Epoch < cur {
		return wire.Response{Status: wire.StatusStaleEpoch, Epoch: cur}, nil
	}
	if req.Epoch > cur {
		wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := s.cat.WaitEpoch(wctx, req.Epoch)
		cancel()
		if err != nil {
			return errResp(wire.StatusUnavailable, fmt.Errorf("SDS has not seen epoch %d yet: %w", req.Epoch, err))
		}
	}
	inChunk := int64(req.Offset % model.ChunkSize)
	n := int64(req.Length)
	if n <= 0 || inChunk+n > model.ChunkSize {
		return errResp(wire.StatusInvalid, fmt.Errorf("range %d+%d crosses a chunk boundary", req.Offset, n))
	}
	key := chunkKey{req.Volume, req.Offset / model.ChunkSize}
	route, found := s.cat.ChunkRoute(req.Volume, key.chunk, placement.PG)
	if !found || len(route.Copies) == 0 {
		// A volume created a moment ago can reach the client's catalog before
		// this SDS's (volumes do not move the epoch): wait for it briefly
		// before answering that it does not exist.
		route, found = s.awaitRoute(ctx, req.Volume, key.chunk)
	}
	if !found || len(route.Copies) == 0 {
		return errResp(wire.StatusNotFound, fmt.Errorf("volume %016x has no placement here", req.Volume))
	}
	replica := req.Flags&wire.FlagReplica != 0 || req.Op == wire.OpChunkPut
	role := -1
	for i, c := range route.Copies {
		if c.SDSID == s.id && (role < 0 || (replica && role == 0)) {
			role = i // the primary role wins for client requests, a secondary one for replicas
		}
	}
	switch {
	case !replica && (role != 0 || route.Copies[0].State != model.CopyReady):
		return wire.Response{Status: wire.StatusNotPrimary, Epoch: route.Epoch}, nil
	case replica && (role < 1 || !route.Copies[role].Active()):
		// Not (or no longer) an active copy at this epoch: refuse, so a
		// primary that missed a map change cannot count this copy.
		return wire.Response{Status: wire.StatusNotPrimary, Epoch: route.Epoch}, nil
	}
	s.mu.RLock()
	dev := s.devices[route.Copies[role].DeviceID]
	s.mu.RUnlock()
	if dev == nil || dev.failed.Load() {
		return errResp(wire.StatusUnavailable, fmt.Errorf("device %s of this copy is not in service", route.Copies[role].DeviceID))
	}
	op := &chunkRequest{s: s, req: req, key: key, in: inChunk, n: n, dev: dev, route: route, primary: !replica}
	start := time.Now()
	resp, release := op.run(ctx)
	took := time.Since(start)
	counted := []*iostats.Counters{&dev.io}
	if !replica {
		counted = append(counted, &s.counters(req.Volume).Counters, &s.total.Counters)
	}
	for _, x := range counted {
		if req.Op == wire.OpRead {
			x.Read(n, took)
		} else if req.Op != wire.OpExtents {
			x.Write(n, took)
		}
	}
	return resp, release
}

type chunkRequest struct {
	s       *Server
	req     *wire.Request
	key     chunkKey
	in, n   int64
	dev     *device
	route   catalog.Route
	primary bool
}

func (c *chunkRequest) lockRange() func() {
	const a = 4096 // covers any device alignment: unaligned writes RMW within it
	start := c.in &^ (a - 1)
	end := (c.in + c.n + a - 1) &^ (a - 1)
	return c.s.locks.lock(c.key, start, end)
}

func (c *chunkRequest) run(ctx context.Context) (wire.Response, func()) {
	s := c.s
	switch c.req.Op {
	case wire.OpChunkPut:
		return c.chunkPut()
	case wire.OpRead:
		buf := bufpool.Get(int(c.n))
		unlock := c.lockRange()
		err := c.readLocal(buf)
		unlock()
		if err != nil {
			bufpool.Put(buf)
			return s.localError(c.dev, err)
		}
		return wire.Response{Payload: buf}, func() { bufpool.Put(buf) }
	case wire.OpExtents:
		_, mapped := s.idx.lookup(c.key)
		b := []byte{0}
		if mapped {
			b[0] = 1
		}
		return wire.Response{Payload: b}, nil
	case wire.OpCopyFrom:
		if !c.primary || len(c.req.Payload) != 8 {
			return errResp(wire.StatusInvalid, errors.New("copy: bad request"))
		}
		// Read the source before locking the destination: the source may
		// be this very chunk, whose lock we are about to take.
		src, err := s.cl.OpenID(binary.BigEndian.Uint64(c.req.Payload))
		if err != nil {
			return errResp(wire.StatusNotFound, err)
		}
		buf := bufpool.Get(int(c.n))
		defer bufpool.Put(buf)
		if err := src.ReadAt(ctx, buf, int64(c.req.Aux)); err != nil {
			return errResp(wire.StatusIOError, fmt.Errorf("copy: read source: %w", err))
		}
		fwd := *c.req
		fwd.Op, fwd.Payload, fwd.Aux = wire.OpWrite, buf, 0
		return c.mutate(ctx, &fwd, func() error { return c.writeLocal(buf) })
	case wire.OpWrite:
		return c.mutate(ctx, c.req, func() error { return c.writeLocal(c.req.Payload) })
	case wire.OpWriteSame:
		pat := c.req.Payload
		if len(pat) == 0 || c.n%int64(len(pat)) != 0 {
			return errResp(wire.StatusInvalid, errors.New("write same: pattern does not divide the range"))
		}
		return c.mutate(ctx, c.req, func() error {
			buf := bufpool.Get(int(c.n))
			defer bufpool.Put(buf)
			for o := 0; o < len(buf); o += len(pat) {
				copy(buf[o:], pat)
			}
			return c.writeLocal(buf)
		})
	case wire.OpWriteZeroes, wire.OpUnmap:
		return c.mutate(ctx, c.req, func() error { return c.zeroLocal(c.req.Flags&wire.FlagUnmap != 0 || c.req.Op == wire.OpUnmap) })
	case wire.OpCompareWrite:
		if int64(len(c.req.Payload)) != 2*c.n {
			return errResp(wire.StatusInvalid, errors.New("compare-and-write: payload must hold compare and write data"))
		}
		if !c.primary {
			return errResp(wire.StatusInvalid, errors.New("compare-and-write is executed at the primary only"))
		}
		cmp, data := c.req.Payload[:c.n], c.req.Payload[c.n:]
		unlock := c.lockRange()
		defer unlock()
		cur := bufpool.Get(int(c.n))
		defer bufpool.Put(cur)
		if err := c.readLocal(cur); err != nil {
			return s.localError(c.dev, err)
		}
		if c.req.Flags&wire.FlagRetry != 0 && !bytes.Equal(cur, cmp) && bytes.Equal(cur, data) {
			// A retry after an attempt whose outcome the client did not
			// learn: the block already holds this request's data, so that
			// attempt took effect here. Mirror it again (the copies may
			// have missed it) and report the success it was.
			fwd := *c.req
			fwd.Op, fwd.Payload, fwd.Flags = wire.OpWrite, data, c.req.Flags&^wire.FlagRetry
			return c.mutateLocked(ctx, &fwd, func() error { return nil })
		}
		for i := range cur {
			if cur[i] != cmp[i] {
				// A normal answer (VMFS heartbeats miscompare all the
				// time): no log line.
				return wire.Response{Status: wire.StatusMiscompare, Aux: uint64(i)}, nil
			}
		}
		fwd := *c.req
		fwd.Op, fwd.Payload = wire.OpWrite, data
		return c.mutateLocked(ctx, &fwd, func() error { return c.writeLocal(data) })
	}
	return errResp(wire.StatusUnsupported, fmt.Errorf("opcode %d", c.req.Op))
}

// mutate applies a change locally and, at the primary, on the secondary in
// parallel, holding the range so overlapping changes apply in one order on
// both copies.
func (c *chunkRequest) mutate(ctx context.Context, fwd *wire.Request, local func() error) (wire.Response, func()) {
	unlock := c.lockRange()
	defer unlock()
	return c.mutateLocked(ctx, fwd, local)
}

func (c *chunkRequest) mutateLocked(ctx context.Context, fwd *wire.Request, local func() error) (wire.Response, func()) {
	var targets, away []model.CopyRef
	if c.primary {
		// Re-read the route now that the range is held: the copies to
		// reach are those of the current map, not of the map the request
		// was routed with. A fill takes the same locks, so every write
		// either completes before a chunk is sent to a new copy, or sees
		// the new copy in the map and reaches it itself.
		fresh, ok := c.s.cat.ChunkRoute(c.key.vol, c.key.chunk, placement.PG)
		if !ok || len(fresh.Copies) == 0 || fresh.Copies[0].SDSID != c.s.id || fresh.Copies[0].State != model.CopyReady {
			return wire.Response{Status: wire.StatusStaleEpoch, Epoch: max(fresh.Epoch, c.req.Epoch+1)}, nil
		}
		c.route = fresh
		for _, cp := range c.route.Copies[1:] {
			if cp.Active() {
				targets = append(targets, cp)
			} else {
				away = append(away, cp)
			}
		}
		if len(targets) == 0 && !c.s.leaseValid() {
			// Fencing: a write reaching only this copy is acknowledged
			// only under a current lease, so a partitioned SDS never
			// acknowledges what the other side will not see.
			return errResp(wire.StatusUnavailable, errors.New("single copy and no current MDM lease: write not acknowledged"))
		}
		if len(away) > 0 {
			m, _ := c.s.cat.Map(c.s.volumePool(c.req.Volume))
			if m != nil {
				c.s.heal.track(pgRef{m.PoolID, placement.PG(c.key.vol, c.key.chunk, m.PGCount)}, away, c.key)
			}
		}
	}
	remote := make(chan error, len(targets))
	for _, t := range targets {
		go func() { remote <- c.forward(ctx, fwd, t) }()
	}
	lerr := local()
	if lerr == nil && c.req.Flags&wire.FlagFUA != 0 {
		lerr = c.s.flushDevice(c.dev)
	}
	var rerr error
	for range targets {
		if err := <-remote; err != nil && rerr == nil {
			rerr = err
		}
	}
	switch {
	case lerr != nil:
		return c.s.localError(c.dev, lerr)
	case rerr != nil:
		// Not "stale epoch" even if a copy said so: the local write has
		// happened, so the outcome is not definite (the client treats
		// Unavailable as possibly applied); it retries with a fresh map.
		var se *wire.StatusError
		if errors.As(rerr, &se) && se.Status == wire.StatusStaleEpoch {
			go func() {
				wctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
				defer cancel()
				_ = c.s.cat.WaitEpoch(wctx, se.Epoch)
			}()
		}
		return errResp(wire.StatusUnavailable, fmt.Errorf("mirror copy: %w", rerr))
	}
	return ok()
}

func (c *chunkRequest) forward(ctx context.Context, fwd *wire.Request, to model.CopyRef) error {
	addr, live := c.s.cat.SDSAddress(to.SDSID)
	if !live {
		return fmt.Errorf("SDS %s of a copy is not live", to.SDSID)
	}
	r := *fwd
	r.Flags |= wire.FlagReplica
	r.Epoch = max(c.req.Epoch, c.route.Epoch)
	fctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err := c.s.cl.Peer(addr).Do(fctx, &r, nil)
	return err
}

func (s *Server) volumePool(vol uint64) string {
	v, _ := s.cat.Volume(vol)
	return v.PoolID
}

func (s *Server) flushDevice(d *device) error {
	if err := d.sync(); err != nil {
		return err
	}
	return s.idx.sync()
}

// devErr attributes an I/O error to the device that returned it and takes
// that device out of service.
func (s *Server) devErr(d *device, err error) error {
	if err == nil || errors.Is(err, errNoSpace) {
		return err
	}
	s.deviceFailed(d, err)
	return fmt.Errorf("device %s: %w", d.path, err)
}

func (c *chunkRequest) readLocal(buf []byte) error {
	loc, ok := c.s.idx.lookup(c.key)
	if !ok {
		clear(buf) // never written or unmapped: zeros
		return nil
	}
	if loc.dev.failed.Load() {
		return fmt.Errorf("device %s is out of service", loc.dev.path)
	}
	return c.s.devErr(loc.dev, loc.dev.readCachedAt(buf, loc.dev.slotOffset(loc.slot)+c.in))
}

func (c *chunkRequest) writeLocal(p []byte) error {
	loc, ok := c.s.idx.lookup(c.key)
	if ok && loc.dev.failed.Load() && loc.dev != c.dev {
		// A stale copy on a failed device (this SDS now holds the group's
		// copy on another device): start afresh there.
		if err := c.s.idx.forget(c.key); err != nil {
			return err
		}
		ok = false
	}
	if !ok {
		var err error
		if loc, err = c.s.idx.allocate(c.key, c.dev); err != nil {
			return err
		}
	}
	if loc.dev.failed.Load() {
		return fmt.Errorf("device %s is out of service", loc.dev.path)
	}
	return c.s.devErr(loc.dev, loc.dev.writeAt(p, loc.dev.slotOffset(loc.slot)+c.in))
}

func (c *chunkRequest) zeroLocal(dealloc bool) error {
	loc, ok := c.s.idx.lookup(c.key)
	if !ok {
		return nil // already reads as zeros
	}
	if loc.dev.failed.Load() && loc.dev != c.dev {
		return c.s.idx.forget(c.key)
	}
	base := loc.dev.slotOffset(loc.slot)
	if dealloc && c.in == 0 && c.n == model.ChunkSize {
		if err := loc.dev.zero(base, model.ChunkSize); err != nil {
			return c.s.devErr(loc.dev, err)
		}
		return c.s.idx.free(c.key)
	}
	return c.s.devErr(loc.dev, loc.dev.zero(base+c.in, c.n))
}

// PrepareDevice asks the SDS at addr to take a device (used by the gateway).
func PrepareDevice(ctx context.Context, peer *wire.Client, req PrepareDeviceRequest) (int64, error) {
	b, _ := json.Marshal(req)
	resp, err := peer.Do(ctx, &wire.Request{Op: wire.OpPrepareDevice, Payload: b}, nil)
	if err != nil {
		var se *wire.StatusError
		if errors.As(err, &se) {
			return 0, errors.New(se.Message)
		}
		return 0, fmt.Errorf("SDS at %s: %w", peer.Addr(), err)
	}
	var r PrepareDeviceResponse
	if err := json.Unmarshal(resp.Payload, &r); err != nil {
		return 0, fmt.Errorf("SDS at %s: bad answer: %w", peer.Addr(), err)
	}
	return r.Capacity, nil
}
