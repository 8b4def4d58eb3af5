package frontend

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cairn-storage/cairn/appliance/internal/blockdev"
	"github.com/cairn-storage/cairn/appliance/internal/catalog"
	"github.com/cairn-storage/cairn/appliance/internal/client"
	"github.com/cairn-storage/cairn/appliance/internal/iostats"
	"github.com/cairn-storage/cairn/appliance/internal/model"
	"github.com/cairn-storage/cairn/appliance/internal/qos"
)

// StatsInterval is how often a frontend publishes its counters.
const StatsInterval = 2 * time.Second

// IO enforces the QoS limits of the volumes one frontend process serves
// and counts their I/O. One per process: the limits of a volume are
// enforced per frontend process (an NBD server serves one host; an iSCSI
// target every host that reaches the volume through that SVM), like
// ScaleIO's per-SDC limits.
type IO struct {
	cat      *catalog.Catalog
	kind     string // model.HostNBD or model.HostISCSI
	host     string // host name (NBD), "" for the iSCSI target
	instance string
	started  time.Time

	mu   sync.Mutex
	vols map[uint64]*volumeIO
}

// volumeIO is the shared state of one volume in this process.
type volumeIO struct {
	lim *qos.Limiter
	io  iostats.Counters
}

// NewIO returns the QoS and statistics state of a frontend; host is the
// host object's name an NBD server serves ("" for an iSCSI target).
func NewIO(cat *catalog.Catalog, kind, host string) *IO {
	return &IO{cat: cat, kind: kind, host: host, instance: model.NewID(), started: time.Now().UTC(), vols: map[uint64]*volumeIO{}}
}

// limits returns what the catalog says a volume's limits are here: the
// volume's effective limits, tightened by the host's mapping's.
func (f *IO) limits(id uint64) qos.Limits {
	v, ok := f.cat.Volume(id)
	if !ok {
		return qos.Limits{}
	}
	p, _ := f.cat.Pool(v.PoolID)
	e := model.EffectiveQoS(v, p)
	l := qos.Limits{IOPS: e.IOPSLimit, BytesPerSecond: e.BandwidthLimit}
	if f.host == "" {
		return l
	}
	h, ok := f.cat.HostByName(f.host)
	if !ok {
		return l
	}
	for _, m := range v.Mappings {
		if m.HostID == h.ID {
			l = qos.Min(l, qos.Limits{IOPS: m.IOPSLimit, BytesPerSecond: m.BandwidthLimit})
		}
	}
	return l
}

func (f *IO) volume(id uint64) *volumeIO {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.vols[id]
	if s == nil {
		s = &volumeIO{lim: qos.NewLimiter(f.limits(id), time.Now())}
		f.vols[id] = s
	}
	return s
}

// Wrap returns v with this process's QoS and counters for its volume.
func (f *IO) Wrap(v *client.Volume) *Volume {
	return &Volume{Volume: v, st: f.volume(v.ID())}
}

// refresh applies the catalog's current limits to every volume.
func (f *IO) refresh() {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := time.Now()
	for id, s := range f.vols {
		s.lim.Set(f.limits(id), now)
	}
}

// Run keeps the limits in step with the catalog (a change applies as soon
// as the catalog's watch delivers it) and publishes the counters to etcd
// every interval under a lease, until ctx ends.
func (f *IO) Run(ctx context.Context, cli *clientv3.Client, interval time.Duration, log *slog.Logger) {
	t := time.NewTicker(interval)
	defer t.Stop()
	var lease clientv3.LeaseID
	for {
		changed := f.cat.Changed()
		f.refresh()
		select {
		case <-ctx.Done():
			if lease != 0 {
				rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
				_, _ = cli.Revoke(rctx, lease)
				cancel()
			}
			return
		case <-changed:
		case <-t.C:
			var err error
			if lease, err = f.publish(ctx, cli, lease, interval); err != nil {
				log.Debug("frontend statistics not published; retrying at the next interval", "err", err)
			}
		}
	}
}

// Stats returns the counters in their published form.
func (f *IO) Stats() model.FrontendStats {
	st := model.FrontendStats{Instance: f.instance, Kind: f.kind, Started: f.started, Time: time.Now().UTC(), Volumes: map[string]model.IOCounters{}}
	if f.host != "" {
		if h, ok := f.cat.HostByName(f.host); ok {
			st.HostID = h.ID
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for id, s := range f.vols {
		st.Volumes[fmt.Sprintf("%016x", id)] = s.io.Snapshot()
	}
	return st
}

func (f *IO) publish(ctx context.Context, cli *clientv3.Client, lease clientv3.LeaseID, interval time.Duration) (clientv3.LeaseID, error) {
	b, err := json.Marshal(f.Stats())
	if err != nil {
		return lease, err
	}
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if lease != 0 {
		if _, err := cli.KeepAliveOnce(pctx, lease); err != nil {
			lease = 0
		}
	}
	if lease == 0 {
		g, err := cli.Grant(pctx, int64(3*interval/time.Second)+3)
		if err != nil {
			return 0, fmt.Errorf("grant statistics lease: %w", err)
		}
		lease = g.ID
	}
	_, err = cli.Put(pctx, model.FrontendStatsKey(f.instance), string(b), clientv3.WithLease(lease))
	return lease, err
}

// Volume is a volume as a frontend serves it: every read and write first
// passes the volume's QoS limiter, and is counted. It keeps the client
// volume's goroutine-free paths (it is a blockdev.AsyncVolume).
//
// Throttling waits in the caller: the frontend's request loop (the NBD
// reader, the TCMU ring loop) or the worker running a synchronous request.
// A frontend thus stops reading new requests while a volume is over its
// limit — backpressure on the host's queue, no goroutine or timer per
// request — and sends what it had held back before it waits.
type Volume struct {
	*client.Volume
	st *volumeIO
}

var _ blockdev.AsyncVolume = (*Volume)(nil)

// admitWait: waits shorter than this are not slept but carried as bucket
// debt into a later request's wait. A limited volume is thus admitted in
// small bursts (at 2,000 IOPS about 4 requests every 2 ms) that the
// frontend sends and answers together, instead of one request per
// wake-up, which cost each throttled I/O a send and a reply of its own.
const admitWait = 2 * time.Millisecond

// admit passes one request of n bytes through the limiter, waiting if it
// must; it returns when the wait began (for the latency).
func (v *Volume) admit(ctx context.Context, n int64) time.Time {
	start := time.Now()
	w := v.st.lim.Admit(n, start)
	if w < admitWait {
		return start
	}
	v.st.io.Throttled(w)
	v.Volume.FlushHeld() // nothing may sit in a send buffer while we wait
	t := time.NewTimer(w)
	select {
	case <-t.C:
	case <-ctx.Done():
		t.Stop()
	}
	return start
}

func (v *Volume) ReadAt(ctx context.Context, p []byte, off int64) error {
	start := v.admit(ctx, int64(len(p)))
	err := v.Volume.ReadAt(ctx, p, off)
	if err == nil {
		v.st.io.Read(int64(len(p)), time.Since(start))
	}
	return err
}

func (v *Volume) WriteAt(ctx context.Context, p []byte, off int64, flags blockdev.WriteFlags) error {
	start := v.admit(ctx, int64(len(p)))
	err := v.Volume.WriteAt(ctx, p, off, flags)
	if err == nil {
		v.st.io.Write(int64(len(p)), time.Since(start))
	}
	return err
}

func (v *Volume) ReadAtAsync(ctx context.Context, p []byte, off int64, hold bool, done func(error)) {
	start := v.admit(ctx, int64(len(p)))
	v.Volume.ReadAtAsync(ctx, p, off, hold, func(err error) {
		if err == nil {
			v.st.io.Read(int64(len(p)), time.Since(start))
		}
		done(err)
	})
}

func (v *Volume) WriteAtAsync(ctx context.Context, p []byte, off int64, flags blockdev.WriteFlags, hold bool, done func(error)) {
	start := v.admit(ctx, int64(len(p)))
	v.Volume.WriteAtAsync(ctx, p, off, flags, hold, func(err error) {
		if err == nil {
			v.st.io.Write(int64(len(p)), time.Since(start))
		}
		done(err)
	})
}

func (v *Volume) CompareAndWrite(ctx context.Context, cmp, data []byte, off int64, flags blockdev.WriteFlags) error {
	start := v.admit(ctx, int64(len(data)))
	err := v.Volume.CompareAndWrite(ctx, cmp, data, off, flags)
	if err == nil {
		v.st.io.Write(int64(len(data)), time.Since(start))
	}
	return err
}

// CopyFrom copies server side; the source is the client volume inside a
// frontend volume. (The data does not pass the frontend: not throttled.)
func (v *Volume) CopyFrom(ctx context.Context, src blockdev.Volume, srcOff, dstOff, length int64) error {
	if fv, ok := src.(*Volume); ok {
		src = fv.Volume
	}
	return v.Volume.CopyFrom(ctx, src, srcOff, dstOff, length)
}
