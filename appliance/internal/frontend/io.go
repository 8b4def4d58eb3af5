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
// and counts their I/O. One per process (an NBD server serves one host;
// an iSCSI target every host that reaches the volume through that SVM).
// A volume's own limits hold for the volume as a whole: while several
// frontends serve it, each admits its fair share of them (share.go); a
// mapping's limits are the host's, enforced by the host's NBD server.
type IO struct {
	cat      *catalog.Catalog
	kind     string // model.HostNBD or model.HostISCSI
	host     string // host name (NBD), "" for the iSCSI target
	instance string
	started  time.Time

	mu   sync.Mutex
	vols map[uint64]*volumeIO
	// peers: every frontend's last published counters, this one's
	// included (share.go); used by Run's goroutine only.
	peers map[string]*peer
}

// volumeIO is the shared state of one volume in this process.
type volumeIO struct {
	lim *qos.Limiter
	io  iostats.Counters
	// shareIOPS and shareBytes: the part of the volume's own limits this
	// frontend admits while others serve the volume too (share.go); 1
	// alone.
	shareIOPS, shareBytes float64
}

// NewIO returns the QoS and statistics state of a frontend; host is the
// host object's name an NBD server serves ("" for an iSCSI target).
func NewIO(cat *catalog.Catalog, kind, host string) *IO {
	return &IO{cat: cat, kind: kind, host: host, instance: model.NewID(), started: time.Now().UTC(), vols: map[uint64]*volumeIO{}, peers: map[string]*peer{}}
}

// limits returns what the catalog says a volume's limits are here: the
// volume's effective limits times this frontend's share of them (s may be
// nil: a new volume, the whole limits until the next rebalance), tightened
// by the host's mapping's.
func (f *IO) limits(id uint64, s *volumeIO) qos.Limits {
	v, ok := f.cat.Volume(id)
	if !ok {
		return qos.Limits{}
	}
	p, _ := f.cat.Pool(v.PoolID)
	e := model.EffectiveQoS(v, p)
	l := qos.Limits{IOPS: e.IOPSLimit, BytesPerSecond: e.BandwidthLimit}
	if s != nil {
		l = qos.Limits{IOPS: scaled(l.IOPS, s.shareIOPS), BytesPerSecond: scaled(l.BytesPerSecond, s.shareBytes)}
	}
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
		s = &volumeIO{lim: qos.NewLimiter(f.limits(id, nil), time.Now()), shareIOPS: 1, shareBytes: 1}
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
		s.lim.Set(f.limits(id, s), now)
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
			if err := f.rebalance(ctx, cli, time.Now(), 3*interval+time.Second); err != nil {
				log.Debug("volume limits not shared out this interval; retrying at the next", "err", err)
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

// Volume is a volume as a frontend serves it: every read, write and
// offloaded command (see the cost model below) first passes the volume's
// QoS limiter, and is counted. It keeps the client volume's goroutine-free
// paths (it is a blockdev.AsyncVolume).
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
// small bursts (at 2,000 IOPS about 20 requests every 10 ms) that the
// frontend sends and answers together, instead of one request per
// wake-up, which cost each throttled I/O a send and a reply of its own.
// Each wake-up costs the whole process a round of the Go scheduler: with
// 2 ms, a volume held at 2,000 IOPS took 13 % of a core in its NBD server
// (4x the CPU per I/O of an unlimited one); with 10 ms, 9 %. That CPU is
// the reason for 10 ms. The neighbour losses measured with it in 2026-11
// (an unlimited volume beside it lost 15-23 % of what the limited one
// left it with 2 ms, 6-7 % with 10 ms) came from single runs alone and
// beside on a drifting machine: tests/qos's alternated runs (2026-12-03)
// found no loss even without carrying debt, though a busy-waiting
// throttle still cost the neighbour a fifth. 10 ms is still far below the
// one second over which a limit is stated.
const admitWait = 10 * time.Millisecond

// admit passes one command costing ios I/Os and n bytes through the
// limiter, waiting if it must; it returns when the wait began (for the
// latency).
func (v *Volume) admit(ctx context.Context, ios, n int64) time.Time {
	start := time.Now()
	v.wait(ctx, v.st.take(ios, n, start))
	return start
}

// take charges one command to the volume's limiter at now and returns the
// wait; a wait that will be slept counts as throttled.
func (s *volumeIO) take(ios, n int64, now time.Time) time.Duration {
	w := s.lim.AdmitOps(ios, n, now)
	if w >= admitWait {
		s.io.Throttled(w)
	}
	return w
}

// wait holds the caller for w, unless w is short enough to carry as debt
// (admitWait) or ctx ends first.
func (v *Volume) wait(ctx context.Context, w time.Duration) {
	if w < admitWait {
		return
	}
	v.Volume.FlushHeld() // nothing may sit in a send buffer while we wait
	t := time.NewTimer(w)
	select {
	case <-t.C:
	case <-ctx.Done():
		t.Stop()
	}
}

func (v *Volume) ReadAt(ctx context.Context, p []byte, off int64) error {
	start := v.admit(ctx, 1, int64(len(p)))
	err := v.Volume.ReadAt(ctx, p, off)
	if err == nil {
		v.st.io.Read(int64(len(p)), time.Since(start))
	}
	return err
}

func (v *Volume) WriteAt(ctx context.Context, p []byte, off int64, flags blockdev.WriteFlags) error {
	start := v.admit(ctx, 1, int64(len(p)))
	err := v.Volume.WriteAt(ctx, p, off, flags)
	if err == nil {
		v.st.io.Write(int64(len(p)), time.Since(start))
	}
	return err
}

func (v *Volume) ReadAtAsync(ctx context.Context, p []byte, off int64, hold bool, done func(error)) {
	start := v.admit(ctx, 1, int64(len(p)))
	v.Volume.ReadAtAsync(ctx, p, off, hold, func(err error) {
		if err == nil {
			v.st.io.Read(int64(len(p)), time.Since(start))
		}
		done(err)
	})
}

func (v *Volume) WriteAtAsync(ctx context.Context, p []byte, off int64, flags blockdev.WriteFlags, hold bool, done func(error)) {
	start := v.admit(ctx, 1, int64(len(p)))
	v.Volume.WriteAtAsync(ctx, p, off, flags, hold, func(err error) {
		if err == nil {
			v.st.io.Write(int64(len(p)), time.Since(start))
		}
		done(err)
	})
}

func (v *Volume) CompareAndWrite(ctx context.Context, cmp, data []byte, off int64, flags blockdev.WriteFlags) error {
	start := v.admit(ctx, 1, int64(len(data)))
	err := v.Volume.CompareAndWrite(ctx, cmp, data, off, flags)
	if err == nil {
		v.st.io.Write(int64(len(data)), time.Since(start))
	}
	return err
}

// Cost model of the offloaded commands (WRITE SAME, UNMAP, EXTENDED COPY
// and NBD's TRIM and WRITE_ZEROES). An ordinary read or write costs one
// I/O and its payload bytes. An offloaded command is charged what the
// cluster does for it, measured in the same currency, so that it is no
// way around a volume's limits:
//
//   - Data it writes (WriteSame with a non-zero pattern, CopyFrom): one
//     I/O per started transferUnit and the full length in bytes. That is
//     what the host would pay to do it itself with the largest ordinary
//     WRITE a LUN accepts (MAXIMUM TRANSFER LENGTH, one 1 MiB chunk), and
//     what the data servers do: one chunk request per MiB, writing the
//     whole length to both copies. So a 4 MiB EXTENDED COPY segment is
//     4 I/Os and 4 MiB; the largest WRITE SAME (16 MiB) 16 I/Os.
//   - CopyFrom also reads the source: when the source is a frontend
//     volume too, its limiter is charged the same as a read (one I/O per
//     MiB, the length in bytes), as a host copying it would be. Otherwise
//     an EXTENDED COPY from a limited volume to an unlimited one would
//     read the limited one at any rate. The command waits for the longer
//     of the two waits; a copy within one volume pays both on its limiter,
//     like a host's read and write.
//   - Zeroing and deallocation (Unmap, WriteZeroes, WriteSame of zeros):
//     no bytes, since no data crosses the network or reaches a data block
//     (each allocated chunk gets a hole punched or is freed, the others
//     are untouched; only a device that can neither punch holes nor zero
//     a range makes the data server write zeros itself), and one I/O per
//     started deallocUnit. Charged per MiB, reclaiming a whole 2 TiB
//     volume (mkfs's discard, ESXi's reclaim after a Storage vMotion)
//     would be 2M I/Os: 17 minutes at 2,000 IOPS, hours at a small
//     limit, and one NBD TRIM of 4 GiB would be held 41 s at 100 IOPS,
//     longer than hosts wait for a request. Charged per deallocUnit,
//     every UNMAP descriptor and every zeroing WRITE SAME (at most
//     16 MiB) an iSCSI host can send is one I/O, an NBD host pays the
//     same per range, and the 2 TiB volume is 4,096 I/Os (2 s at 2,000
//     IOPS). The price: one such I/O may be up to 512 metadata-only chunk
//     requests on the cluster.
//
// Flush and Extents are not charged: neither moves data, a flush makes
// durable writes that were charged when they were made, and Extents
// serves GET LBA STATUS, at most 64 chunks a command. The statistics count
// what moved: WriteSame and CopyFrom as one write of their length (and
// the source's read), zeroing and deallocation not at all (they write no
// data, and their latency is not a write's).
const (
	// transferUnit is the data-moving offload's unit of I/O: a chunk,
	// the LUN's MAXIMUM TRANSFER LENGTH (scsi.defaultMaxTransfer).
	transferUnit = model.ChunkSize
	// deallocUnit is the deallocating command's unit of I/O: the largest
	// range one UNMAP may name, MAXIMUM UNMAP LBA COUNT (scsi.maxUnmapBlocks,
	// 2^20 blocks of 512 bytes), which also bounds ESXi's UNMAPs.
	deallocUnit = 512 << 20
)

// commandIOs is the I/Os a command of length bytes costs at one I/O per
// started unit; a command of no length still costs one.
func commandIOs(length, unit int64) int64 {
	return max(1, (length+unit-1)/unit)
}

func (v *Volume) WriteZeroes(ctx context.Context, off, length int64, unmap bool) error {
	v.admit(ctx, commandIOs(length, deallocUnit), 0)
	return v.Volume.WriteZeroes(ctx, off, length, unmap)
}

func (v *Volume) Unmap(ctx context.Context, off, length int64) error {
	v.admit(ctx, commandIOs(length, deallocUnit), 0)
	return v.Volume.Unmap(ctx, off, length)
}

func (v *Volume) WriteSame(ctx context.Context, pattern []byte, off, length int64) error {
	if blockdev.AllZero(pattern) {
		// The client zeroes instead (client.Volume.WriteSame).
		v.admit(ctx, commandIOs(length, deallocUnit), 0)
		return v.Volume.WriteSame(ctx, pattern, off, length)
	}
	start := v.admit(ctx, commandIOs(length, transferUnit), length)
	err := v.Volume.WriteSame(ctx, pattern, off, length)
	if err == nil {
		v.st.io.Write(length, time.Since(start))
	}
	return err
}

// CopyFrom copies server side; the source is the client volume inside a
// frontend volume. The data does not pass the frontend, but both volumes
// are charged for it (see the cost model above).
func (v *Volume) CopyFrom(ctx context.Context, src blockdev.Volume, srcOff, dstOff, length int64) error {
	ios := commandIOs(length, transferUnit)
	start := time.Now()
	w := v.st.take(ios, length, start)
	fsrc, ok := src.(*Volume)
	if ok {
		w = max(w, fsrc.st.take(ios, length, start))
		src = fsrc.Volume
	}
	v.wait(ctx, w)
	err := v.Volume.CopyFrom(ctx, src, srcOff, dstOff, length)
	if err == nil {
		d := time.Since(start)
		v.st.io.Write(length, d)
		if ok {
			fsrc.st.io.Read(length, d)
		}
	}
	return err
}
