package gateway

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"

	"github.com/cairn-storage/cairn/appliance/internal/model"
)

// GET /metrics serves the Prometheus text exposition format (version 0.0.4)
// without authentication: Prometheus scrapes with long-lived credentials,
// while gateway tokens expire after hours, and the page holds names and
// rates, never data or secrets. Restrict it by network (firewall) where
// that matters.
//
// Counters come from the SDSs' published statistics (model.SDSStats). They
// are cumulative since each SDS started; a volume's counters are the sum
// over the SDSs that served it as primary, so a restarting SDS shows as a
// counter reset, which rate() handles.

func (s *Server) metrics(c *call) (int, any, error) {
	w, err := c.world()
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, rawBody{contentType: "text/plain; version=0.0.4; charset=utf-8", data: w.metricsText()}, nil
}

type metricWriter struct {
	b bytes.Buffer
}

type sample struct {
	labels []string // name, value pairs
	value  float64
}

func (m *metricWriter) family(name, typ, help string, samples []sample) {
	fmt.Fprintf(&m.b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, typ)
	for _, s := range samples {
		m.b.WriteString(name)
		if len(s.labels) > 0 {
			m.b.WriteByte('{')
			for i := 0; i+1 < len(s.labels); i += 2 {
				if i > 0 {
					m.b.WriteByte(',')
				}
				fmt.Fprintf(&m.b, "%s=\"%s\"", s.labels[i], escapeLabel(s.labels[i+1]))
			}
			m.b.WriteByte('}')
		}
		fmt.Fprintf(&m.b, " %s\n", formatFloat(s.value))
	}
}

func formatFloat(v float64) string {
	if v == float64(int64(v)) && v < 1e15 && v > -1e15 {
		return fmt.Sprintf("%d", int64(v))
	}
	return fmt.Sprintf("%g", v)
}

var labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)

func escapeLabel(v string) string { return labelEscaper.Replace(v) }

// ioFamilies writes the six I/O counter families of one object kind.
func (m *metricWriter) ioFamilies(prefix, what string, rows []ioRow) {
	type f struct {
		suffix, help string
		get          func(model.IOCounters) float64
	}
	for _, fam := range []f{
		{"read_ops_total", "read requests served", func(c model.IOCounters) float64 { return float64(c.ReadOps) }},
		{"write_ops_total", "write requests served", func(c model.IOCounters) float64 { return float64(c.WriteOps) }},
		{"read_bytes_total", "bytes read", func(c model.IOCounters) float64 { return float64(c.ReadBytes) }},
		{"write_bytes_total", "bytes written", func(c model.IOCounters) float64 { return float64(c.WriteBytes) }},
		{"read_latency_seconds_total", "sum of read latencies (divide by read_ops for the mean)", func(c model.IOCounters) float64 { return float64(c.ReadLatencyNs) / 1e9 }},
		{"write_latency_seconds_total", "sum of write latencies (divide by write_ops for the mean)", func(c model.IOCounters) float64 { return float64(c.WriteLatencyNs) / 1e9 }},
	} {
		samples := make([]sample, 0, len(rows))
		for _, r := range rows {
			samples = append(samples, sample{r.labels, fam.get(r.io)})
		}
		m.family(prefix+fam.suffix, "counter", "Cairn "+what+": "+fam.help+".", samples)
	}
}

type ioRow struct {
	labels []string
	io     model.IOCounters
}

func (w *world) metricsText() []byte {
	var m metricWriter
	b2f := func(b bool) float64 {
		if b {
			return 1
		}
		return 0
	}

	sdss := sortedByName(w.sdss, func(x model.SDS) string { return x.Name })
	var up, sdsCap, sdsUsed []sample
	var sdsIO []ioRow
	for _, x := range sdss {
		v := w.sdsView(x)
		l := []string{"sds_id", x.ID, "sds", x.Name}
		up = append(up, sample{l, b2f(v.Up)})
		sdsCap = append(sdsCap, sample{l, float64(v.Capacity)})
		sdsUsed = append(sdsUsed, sample{l, float64(v.RawAllocated)})
		sdsIO = append(sdsIO, ioRow{l, v.IO})
	}
	m.family("cairn_sds_up", "gauge", "Cairn SDS holds its liveness lease (1) or not (0).", up)
	var maint, resync, pending, done []sample
	for _, x := range sdss {
		l := []string{"sds_id", x.ID, "sds", x.Name}
		if mode := model.MaintenanceMode(x.State); mode != "" {
			maint = append(maint, sample{append(l, "mode", mode), 1})
		}
		rb := w.stats[x.ID].Rebuild
		resync = append(resync, sample{l, float64(rb.ResyncBytes)})
		pending = append(pending, sample{l, float64(rb.PendingBytes)})
		done = append(done, sample{l, float64(rb.DoneBytes)})
	}
	m.family("cairn_sds_maintenance", "gauge", "Cairn SDS is in maintenance (1, by mode); absent when not.", maint)
	m.family("cairn_sds_rebuild_pending_bytes", "gauge", "Cairn SDS: bytes still to copy in its running fills (rebuild, rebalance, resync).", pending)
	m.family("cairn_sds_rebuild_done_bytes_total", "counter", "Cairn SDS: bytes copied by its fills since it started.", done)
	m.family("cairn_sds_resync_bytes_total", "counter", "Cairn SDS: delta-resync bytes sent after maintenance since it started.", resync)
	var rb rebuildView
	w.groupCounts(&rb)
	m.family("cairn_placement_groups", "gauge", "Cairn placement groups by condition (degraded: fewer than 2 ready copies).", []sample{
		{[]string{"condition", "degraded"}, float64(rb.DegradedGroups)},
		{[]string{"condition", "rebuilding"}, float64(rb.RebuildingGroups)},
		{[]string{"condition", "resyncing"}, float64(rb.ResyncingGroups)},
		{[]string{"condition", "rebalancing"}, float64(rb.RebalancingGroups)},
	})
	m.family("cairn_sds_capacity_bytes", "gauge", "Cairn SDS: capacity of its devices in state normal.", sdsCap)
	m.family("cairn_sds_used_bytes", "gauge", "Cairn SDS: bytes in allocated chunks, as last reported.", sdsUsed)
	m.ioFamilies("cairn_sds_", "SDS (as primary, since the SDS started)", sdsIO)

	devs := sortedByName(w.devices, func(d model.Device) string { return d.Name })
	var dCap, dUsed, dErr []sample
	for _, d := range devs {
		v := w.deviceView(d)
		l := []string{"device_id", d.ID, "device", d.Name, "sds", v.SDSName, "pool", v.PoolName}
		dCap = append(dCap, sample{l, float64(d.Capacity)})
		dUsed = append(dUsed, sample{l, float64(v.RawAllocated)})
		dErr = append(dErr, sample{l, b2f(d.State == model.DeviceError || v.ReportedState == model.DeviceError)})
	}
	m.family("cairn_device_capacity_bytes", "gauge", "Cairn device: capacity usable for chunks.", dCap)
	m.family("cairn_device_used_bytes", "gauge", "Cairn device: bytes in allocated chunks, as last reported.", dUsed)
	m.family("cairn_device_error", "gauge", "Cairn device is in error (1) or not (0).", dErr)

	pools := sortedByName(w.pools, func(p model.StoragePool) string { return p.Name })
	var pRaw, pUsable, pUsed, pThick []sample
	for _, p := range pools {
		v := w.poolView(p)
		l := []string{"pool_id", p.ID, "pool", p.Name}
		pRaw = append(pRaw, sample{l, float64(v.Capacity.Raw)})
		pUsable = append(pUsable, sample{l, float64(v.Capacity.Usable)})
		pUsed = append(pUsed, sample{l, float64(v.Capacity.RawAllocated)})
		pThick = append(pThick, sample{l, float64(v.Capacity.ThickReserved)})
	}
	m.family("cairn_pool_capacity_bytes", "gauge", "Cairn pool: raw capacity of its devices in state normal (total).", pRaw)
	m.family("cairn_pool_usable_bytes", "gauge", "Cairn pool: capacity for data after spare and two copies.", pUsable)
	m.family("cairn_pool_used_bytes", "gauge", "Cairn pool: raw bytes allocated on its devices (both copies).", pUsed)
	m.family("cairn_pool_thick_reserved_bytes", "gauge", "Cairn pool: sizes of its thick volumes.", pThick)

	vols := sortedByName(w.volumes, func(v model.Volume) string { return v.Name })
	var vSize []sample
	var vIO []ioRow
	for _, v := range vols {
		l := []string{"volume_id", v.ID, "volume", v.Name, "pool", w.pools[v.PoolID].Name}
		vSize = append(vSize, sample{l, float64(v.Size)})
		vIO = append(vIO, ioRow{l, w.volumeIO(v.ID)})
	}
	m.family("cairn_volume_size_bytes", "gauge", "Cairn volume: provisioned size.", vSize)
	m.ioFamilies("cairn_volume_", "volume (summed over SDSs)", vIO)
	return m.b.Bytes()
}
