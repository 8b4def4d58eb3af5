package sds

// stats.go: I/O counters and the statistics the SDS publishes to etcd.

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cairn-storage/cairn/appliance/internal/iostats"
	"github.com/cairn-storage/cairn/appliance/internal/model"
)

type volCounters struct{ iostats.Counters }

func (c *volCounters) snapshot() model.IOCounters { return c.Snapshot() }

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
