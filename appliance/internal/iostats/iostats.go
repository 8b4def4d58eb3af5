// Package iostats owns Cairn's I/O statistics arithmetic: the cumulative
// counters and latency histograms the data path records (SDSs, frontends),
// and the rates the gateway derives from two snapshots of them, across
// restarts of the process that counts. Pure logic: no I/O.
package iostats

import (
	"math"
	"sync/atomic"
	"time"

	"github.com/cairn-storage/cairn/appliance/internal/model"
)

// Latency histogram, layout v1 (published in model.IOCounters.ReadHist and
// WriteHist, trailing zero buckets trimmed): bucket 0 counts latencies
// below 1 µs; bucket i ≥ 1 counts [2^((i-1)/4), 2^(i/4)) µs: four buckets
// per doubling, so a quantile read from it is at most 19 % above the true
// value. The last bucket also takes everything longer (≈ 2^27 µs, 134 s).
const (
	HistVersion = 1
	Buckets     = 110
)

// BucketOf returns the histogram bucket of a latency.
func BucketOf(d time.Duration) int {
	us := float64(d) / float64(time.Microsecond)
	if us < 1 {
		return 0
	}
	b := int(math.Log2(us)*4) + 1
	return min(b, Buckets-1)
}

// BucketUpper returns the upper bound of bucket b, in microseconds.
func BucketUpper(b int) float64 { return math.Exp2(float64(b) / 4) }

// Quantile returns the upper bound, in µs, of the bucket holding the q-th
// quantile (0 < q ≤ 1) of the latencies counted in h; 0 when h is empty.
func Quantile(h []uint64, q float64) float64 {
	var total uint64
	for _, n := range h {
		total += n
	}
	if total == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(total)))
	var seen uint64
	for b, n := range h {
		seen += n
		if seen >= rank {
			return BucketUpper(b)
		}
	}
	return BucketUpper(len(h) - 1)
}

// Histogram is a concurrent latency histogram (layout v1).
type Histogram [Buckets]atomic.Uint64

// Record counts one latency.
func (h *Histogram) Record(d time.Duration) { h[BucketOf(d)].Add(1) }

// Snapshot returns the counts with trailing empty buckets trimmed.
func (h *Histogram) Snapshot() []uint64 {
	out := make([]uint64, Buckets)
	last := -1
	for i := range h {
		if out[i] = h[i].Load(); out[i] != 0 {
			last = i
		}
	}
	return out[:last+1]
}

// Counters are the cumulative I/O counters of one object (a volume on a
// frontend, an SDS, a device), safe for concurrent use.
type Counters struct {
	readOps, writeOps, readBytes, writeBytes, readNs, writeNs, throttledNs atomic.Uint64
	readHist, writeHist                                                    Histogram
}

// Read counts a read of n bytes that took d.
func (c *Counters) Read(n int64, d time.Duration) {
	c.readOps.Add(1)
	c.readBytes.Add(uint64(n))
	c.readNs.Add(uint64(d))
	c.readHist.Record(d)
}

// Write counts a write of n bytes that took d.
func (c *Counters) Write(n int64, d time.Duration) {
	c.writeOps.Add(1)
	c.writeBytes.Add(uint64(n))
	c.writeNs.Add(uint64(d))
	c.writeHist.Record(d)
}

// Throttled counts time a QoS limit held requests back.
func (c *Counters) Throttled(d time.Duration) { c.throttledNs.Add(uint64(d)) }

// Snapshot returns the counters in their published form.
func (c *Counters) Snapshot() model.IOCounters {
	return model.IOCounters{
		ReadOps: c.readOps.Load(), WriteOps: c.writeOps.Load(),
		ReadBytes: c.readBytes.Load(), WriteBytes: c.writeBytes.Load(),
		ReadLatencyNs: c.readNs.Load(), WriteLatencyNs: c.writeNs.Load(),
		ReadHist: c.readHist.Snapshot(), WriteHist: c.writeHist.Snapshot(),
		ThrottledNs: c.throttledNs.Load(),
	}
}

// Delta returns what happened between two snapshots of the same counters.
// When the counting process restarted (restarted, or any counter went
// down) the counters started again from zero, so everything in cur is new:
// the delta is cur itself and a sum over sources never drops.
func Delta(prev, cur model.IOCounters, restarted bool) model.IOCounters {
	if restarted || wentDown(prev, cur) {
		return cur
	}
	return model.IOCounters{
		ReadOps: cur.ReadOps - prev.ReadOps, WriteOps: cur.WriteOps - prev.WriteOps,
		ReadBytes: cur.ReadBytes - prev.ReadBytes, WriteBytes: cur.WriteBytes - prev.WriteBytes,
		ReadLatencyNs: cur.ReadLatencyNs - prev.ReadLatencyNs, WriteLatencyNs: cur.WriteLatencyNs - prev.WriteLatencyNs,
		ReadHist: histDelta(prev.ReadHist, cur.ReadHist), WriteHist: histDelta(prev.WriteHist, cur.WriteHist),
		ThrottledNs: cur.ThrottledNs - prev.ThrottledNs,
	}
}

func wentDown(p, c model.IOCounters) bool {
	if c.ReadOps < p.ReadOps || c.WriteOps < p.WriteOps || c.ReadBytes < p.ReadBytes || c.WriteBytes < p.WriteBytes ||
		c.ReadLatencyNs < p.ReadLatencyNs || c.WriteLatencyNs < p.WriteLatencyNs || c.ThrottledNs < p.ThrottledNs {
		return true
	}
	return histDown(p.ReadHist, c.ReadHist) || histDown(p.WriteHist, c.WriteHist)
}

func histDown(p, c []uint64) bool {
	for i, n := range p {
		if i >= len(c) || c[i] < n {
			if n != 0 {
				return true
			}
		}
	}
	return false
}

func histDelta(p, c []uint64) []uint64 {
	if len(c) == 0 {
		return nil
	}
	out := make([]uint64, len(c))
	for i := range c {
		out[i] = c[i]
		if i < len(p) {
			out[i] -= p[i]
		}
	}
	return out
}

// Sum accumulates deltas of several sources (and several objects) over
// one interval.
type Sum struct {
	// Per second: each source's delta divided by its own elapsed time.
	ReadIOPS, WriteIOPS, ReadBps, WriteBps float64
	// ThrottledPerSecond: seconds held back per second of the interval.
	ThrottledPerSecond float64

	readOps, writeOps, readNs, writeNs uint64
	readHist, writeHist                []uint64
}

// Add adds one source's delta over elapsed.
func (s *Sum) Add(d model.IOCounters, elapsed time.Duration) {
	if elapsed <= 0 {
		return
	}
	sec := elapsed.Seconds()
	s.ReadIOPS += float64(d.ReadOps) / sec
	s.WriteIOPS += float64(d.WriteOps) / sec
	s.ReadBps += float64(d.ReadBytes) / sec
	s.WriteBps += float64(d.WriteBytes) / sec
	s.ThrottledPerSecond += float64(d.ThrottledNs) / 1e9 / sec
	s.readOps += d.ReadOps
	s.writeOps += d.WriteOps
	s.readNs += d.ReadLatencyNs
	s.writeNs += d.WriteLatencyNs
	s.readHist = SumHist(s.readHist, d.ReadHist)
	s.writeHist = SumHist(s.writeHist, d.WriteHist)
}

// Merge adds another sum (an object made of others: a pool of volumes).
func (s *Sum) Merge(o Sum) {
	s.ReadIOPS += o.ReadIOPS
	s.WriteIOPS += o.WriteIOPS
	s.ReadBps += o.ReadBps
	s.WriteBps += o.WriteBps
	s.ThrottledPerSecond += o.ThrottledPerSecond
	s.readOps += o.readOps
	s.writeOps += o.writeOps
	s.readNs += o.readNs
	s.writeNs += o.writeNs
	s.readHist = SumHist(s.readHist, o.readHist)
	s.writeHist = SumHist(s.writeHist, o.writeHist)
}

// SumHist adds two histograms bucket by bucket into a new slice: neither
// argument is changed, so sums built from shared samples never alias them.
func SumHist(a, b []uint64) []uint64 {
	out := make([]uint64, max(len(a), len(b)))
	copy(out, a)
	for i, n := range b {
		out[i] += n
	}
	return out
}

// AddCounters sums two cumulative counter sets of one source (histograms
// bucket by bucket); neither argument is changed.
func AddCounters(a, b model.IOCounters) model.IOCounters {
	a.ReadOps += b.ReadOps
	a.WriteOps += b.WriteOps
	a.ReadBytes += b.ReadBytes
	a.WriteBytes += b.WriteBytes
	a.ReadLatencyNs += b.ReadLatencyNs
	a.WriteLatencyNs += b.WriteLatencyNs
	a.ThrottledNs += b.ThrottledNs
	a.ReadHist = SumHist(a.ReadHist, b.ReadHist)
	a.WriteHist = SumHist(a.WriteHist, b.WriteHist)
	return a
}

// Rate is one direction's figures over an interval (API shape).
type Rate struct {
	IOPS           float64 `json:"iops"`
	BytesPerSecond float64 `json:"bytes_per_second"`
	LatencyMeanUs  float64 `json:"latency_mean_us"`
	LatencyP99Us   float64 `json:"latency_p99_us"`
}

// Rates returns the read and write figures of the sum.
func (s *Sum) Rates() (read, write Rate) {
	mean := func(ns, ops uint64) float64 {
		if ops == 0 {
			return 0
		}
		return float64(ns) / float64(ops) / 1e3
	}
	read = Rate{IOPS: s.ReadIOPS, BytesPerSecond: s.ReadBps, LatencyMeanUs: mean(s.readNs, s.readOps), LatencyP99Us: Quantile(s.readHist, 0.99)}
	write = Rate{IOPS: s.WriteIOPS, BytesPerSecond: s.WriteBps, LatencyMeanUs: mean(s.writeNs, s.writeOps), LatencyP99Us: Quantile(s.writeHist, 0.99)}
	return read, write
}

// Ops returns the reads and writes counted so far.
func (c *Counters) Ops() uint64 { return c.readOps.Load() + c.writeOps.Load() }
