package mdm

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/cairn-storage/cairn/appliance/internal/model"
	"github.com/cairn-storage/cairn/appliance/internal/placement"
)

// Controller is the leader's control loop.
type Controller struct {
	Etcd *clientv3.Client
	Log  *slog.Logger
}

// Run reconciles placement maps with the model until ctx ends.
func (c *Controller) Run(ctx context.Context) {
	st := model.NewStore(c.Etcd)
	for ctx.Err() == nil {
		wc := c.Etcd.Watch(clientv3.WithRequireLeader(ctx), model.Prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
		if err := c.reconcile(ctx, st); err != nil && ctx.Err() == nil {
			c.Log.Warn("placement reconcile", "err", err)
		}
		// Reconcile again on every model change (coalesced), and every few
		// seconds regardless.
		tick := time.NewTicker(5 * time.Second)
	loop:
		for {
			select {
			case <-ctx.Done():
				tick.Stop()
				return
			case resp, ok := <-wc:
				if !ok || resp.Err() != nil {
					break loop
				}
				relevant := false
				for _, ev := range resp.Events {
					k := string(ev.Kv.Key)
					// Keys no placement decision depends on:
					// statistics, the bootstrap token and login
					// sessions (both written: model/keys.go), the
					// maps and epoch this controller writes itself,
					// the election and its hand-over requests.
					if !hasAnyPrefix(k, model.StatsPrefix, model.TokenPrefix, model.SessionPrefix, model.MapPrefix, model.EpochKey, model.ElectionPrefix, model.LeaderHandoverKey) {
						relevant = true
					}
				}
				if !relevant {
					continue
				}
				time.Sleep(50 * time.Millisecond) // coalesce bursts
			case <-tick.C:
			}
			if err := c.reconcile(ctx, st); err != nil && ctx.Err() == nil {
				c.Log.Warn("placement reconcile", "err", err)
			}
		}
		tick.Stop()
		sleep(ctx, 200*time.Millisecond)
	}
}

func hasAnyPrefix(k string, ps ...string) bool {
	for _, p := range ps {
		if strings.HasPrefix(k, p) {
			return true
		}
	}
	return false
}

// maxMoving bounds how many groups of a pool rebalance at once.
const maxMoving = 8

// reconcile brings every pool's placement map in line with the model:
// initial placement while a pool is empty, then healing (see
// placement.Heal): failed copies dropped and rebuilt, maintenance, resync,
// rebalance.
func (c *Controller) reconcile(ctx context.Context, st *model.Store) error {
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	pools, err := model.List[model.StoragePool](rctx, st, model.KindPool)
	if err != nil {
		return err
	}
	devices, err := model.List[model.Device](rctx, st, model.KindDevice)
	if err != nil {
		return err
	}
	sdss, err := model.List[model.SDS](rctx, st, model.KindSDS)
	if err != nil {
		return err
	}
	volumes, err := model.List[model.Volume](rctx, st, model.KindVolume)
	if err != nil {
		return err
	}
	if err := c.consumeDeviceFailures(rctx, st, devices); err != nil {
		return err
	}
	lr, err := c.Etcd.Get(rctx, model.LivePrefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return err
	}
	live := map[string]bool{}
	for _, kv := range lr.Kvs {
		live[strings.TrimPrefix(string(kv.Key), model.LivePrefix)] = true
	}
	inUse := map[string]bool{}
	for _, v := range volumes {
		inUse[v.PoolID] = true
	}
	view := placement.View{SDS: map[string]placement.SDSView{}, DeviceOK: map[string]bool{}}
	for _, s := range sdss {
		fd := s.FaultSetID
		if fd == "" {
			fd = "sds:" + s.ID
		}
		view.SDS[s.ID] = placement.SDSView{Live: live[s.ID], Mode: modeOf(s.State), FaultDomain: fd}
	}
	view.DeviceLeaving = map[string]bool{}
	for _, d := range devices {
		view.DeviceOK[d.ID] = d.State == model.DeviceNormal || d.State == model.DeviceRemoving
		view.DeviceLeaving[d.ID] = d.State == model.DeviceRemoving
	}
	usable := func(s model.SDS) bool { return live[s.ID] && modeOf(s.State) == placement.ModeNormal }
	for _, p := range pools {
		var cur model.PlacementMap
		_, gerr := st.Get(rctx, model.MapKey(p.ID), &cur)
		exists := gerr == nil
		pgs := p.PGCount
		if pgs <= 0 {
			pgs = model.DefaultPGCount
		}
		if !exists || !inUse[p.ID] {
			// Empty pool: place freely.
			cands := placement.Candidates(p.ID, devices, sdss, usable)
			if placement.FaultDomains(cands) < placement.Copies {
				continue // volume creation refuses such a pool with a clear message
			}
			m, err := placement.Compute(p.ID, pgs, 0, cands)
			if err != nil {
				return err
			}
			if exists && samePGs(m.PGs, cur.PGs) {
				continue
			}
			epoch, err := c.bumpAndPut(rctx, m, nil)
			if err != nil {
				return fmt.Errorf("pool %s: publish map: %w", p.Name, err)
			}
			c.Log.Info("placement map published", "pool", p.Name, "epoch", epoch, "pgs", pgs, "devices", len(cands))
			continue
		}
		if err := c.heal(rctx, p, &cur, view, devices, sdss, usable); err != nil {
			return err
		}
	}
	return c.finishRemovals(rctx, st, devices, sdss)
}

// consumeDeviceFailures applies the SDSs' device failure reports
// (model.DeviceFailedKey): the device's state becomes error, with the I/O
// error, in the transaction that deletes the report; devices (this
// reconcile's list) is updated in place so the placement sees it now. A
// report of a device no longer in the model is dropped.
func (c *Controller) consumeDeviceFailures(ctx context.Context, st *model.Store, devices []model.Device) error {
	r, err := c.Etcd.Get(ctx, model.DeviceFailedPrefix, clientv3.WithPrefix())
	if err != nil {
		return err
	}
	for _, kv := range r.Kvs {
		key := string(kv.Key)
		id := strings.TrimPrefix(key, model.DeviceFailedPrefix)
		cause := string(kv.Value)
		i := slices.IndexFunc(devices, func(d model.Device) bool { return d.ID == id })
		if i < 0 {
			if _, err := c.Etcd.Delete(ctx, key); err != nil {
				return err
			}
			continue
		}
		var d model.Device
		rev, err := st.Get(ctx, model.Key(model.KindDevice, id), &d)
		if err != nil {
			return fmt.Errorf("device %s failure report: %w", id, err)
		}
		d.State, d.Error = model.DeviceError, cause
		// The report is deleted only if the SDS has not rewritten it since.
		del := clientv3.OpTxn([]clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(key), "=", kv.ModRevision)}, []clientv3.Op{clientv3.OpDelete(key)}, nil)
		if err := st.Update(ctx, model.Key(model.KindDevice, id), rev, d, del); err != nil {
			return fmt.Errorf("device %s failure report: %w", id, err)
		}
		devices[i] = d
		c.Log.Warn("device failed: state set to error, its copies are rebuilt elsewhere", "device", d.Name, "id", id, "err", cause)
	}
	return nil
}

// finishRemovals deletes drained objects: a device in state removing (or on
// an SDS in state removing) that no map references any more, then an SDS in
// state removing with no device left.
func (c *Controller) finishRemovals(ctx context.Context, st *model.Store, devices []model.Device, sdss []model.SDS) error {
	removing := map[string]bool{}
	for _, s := range sdss {
		removing[s.ID] = s.State == model.SDSRemoving
	}
	maps, err := model.ListPrefix[model.PlacementMap](ctx, st, model.MapPrefix)
	if err != nil {
		return err
	}
	referenced := map[string]bool{}
	for _, m := range maps {
		for _, pg := range m.PGs {
			for _, cp := range pg {
				referenced[cp.DeviceID] = true
			}
		}
	}
	left := map[string]int{}
	for _, d := range devices {
		if (d.State == model.DeviceRemoving || removing[d.SDSID]) && !referenced[d.ID] {
			rev, err := st.Get(ctx, model.Key(model.KindDevice, d.ID), new(model.Device))
			if err == nil {
				if err := st.Delete(ctx, model.KindDevice, d.ID, d.Name, rev); err == nil {
					c.Log.Info("drained device removed", "device", d.Name)
					continue
				}
			}
		}
		left[d.SDSID]++
	}
	for _, s := range sdss {
		if s.State == model.SDSRemoving && left[s.ID] == 0 {
			rev, err := st.Get(ctx, model.Key(model.KindSDS, s.ID), new(model.SDS))
			if err == nil && st.Delete(ctx, model.KindSDS, s.ID, s.Name, rev) == nil {
				c.Log.Info("drained SDS removed", "sds", s.Name)
			}
		}
	}
	return nil
}

func (c *Controller) heal(ctx context.Context, p model.StoragePool, cur *model.PlacementMap, view placement.View, devices []model.Device, sdss []model.SDS, usable func(model.SDS) bool) error {
	fr, err := c.Etcd.Get(ctx, model.FilledPoolPrefix(p.ID), clientv3.WithPrefix())
	if err != nil {
		return err
	}
	view.Done = map[string]uint64{}
	for _, kv := range fr.Kvs {
		k := strings.TrimPrefix(string(kv.Key), model.FilledPoolPrefix(p.ID))
		e, _ := strconv.ParseUint(string(kv.Value), 10, 64)
		view.Done[k] = e
	}
	view.Cands = placement.Candidates(p.ID, devices, sdss, usable)
	er, err := c.Etcd.Get(ctx, model.EpochKey)
	if err != nil {
		return err
	}
	var epoch uint64
	if len(er.Kvs) > 0 {
		epoch, _ = strconv.ParseUint(string(er.Kvs[0].Value), 10, 64)
	}
	view.Epoch = epoch + 1
	healthy, moving := true, 0
	for _, copies := range cur.PGs {
		for _, cp := range copies {
			if cp.State != model.CopyReady || view.SDS[cp.SDSID].Mode == placement.ModeInstant || view.SDS[cp.SDSID].Mode == placement.ModeProtected {
				healthy = false
			}
		}
		if len(copies) > placement.Copies {
			moving++
		}
	}
	next := &model.PlacementMap{PoolID: p.ID, PGCount: cur.PGCount, PGs: make([][]model.CopyRef, len(cur.PGs))}
	changed := 0
	var consumed []string
	for pg, copies := range cur.PGs {
		view.Rebalance = healthy && moving < maxMoving
		n := placement.Heal(pg, copies, &view)
		if len(n) > placement.Copies && len(copies) <= placement.Copies {
			moving++
		}
		if !sameCopies(n, copies) {
			done := consumedFills(p.ID, pg, copies, n)
			if len(consumed)+len(done) > maxFillsPerMap {
				next.PGs[pg] = copies // next round (fillbatch.go)
				continue
			}
			changed++
			consumed = append(consumed, done...)
		}
		if len(n) == 0 || n[0].State != model.CopyReady {
			c.Log.Error("placement group has no complete copy: its data is unavailable until a failed SDS returns", "pool", p.Name, "pg", pg)
		}
		next.PGs[pg] = n
	}
	if changed == 0 {
		return nil
	}
	e, err := c.bumpAndPut(ctx, next, consumed)
	if err != nil {
		return fmt.Errorf("pool %s: publish map: %w", p.Name, err)
	}
	c.Log.Info("placement map healed", "pool", p.Name, "epoch", e, "groups_changed", changed)
	return nil
}

func modeOf(state string) string {
	switch state {
	case model.SDSMaintenance:
		return placement.ModeInstant
	case model.SDSProtectedMain:
		return placement.ModeProtected
	case model.SDSRemoving:
		return placement.ModeRemoving
	}
	return placement.ModeNormal
}

func sameCopies(a, b []model.CopyRef) bool { return slices.Equal(a, b) }

func samePGs(a, b [][]model.CopyRef) bool {
	return slices.EqualFunc(a, b, sameCopies)
}

// bumpAndPut writes a map with the next epoch, atomically with the epoch key.
// deletes (consumed fill reports) join the same transaction.
func (c *Controller) bumpAndPut(ctx context.Context, m *model.PlacementMap, deletes []string) (uint64, error) {
	for {
		r, err := c.Etcd.Get(ctx, model.EpochKey)
		if err != nil {
			return 0, err
		}
		var cur uint64
		var rev int64
		if len(r.Kvs) > 0 {
			cur, _ = strconv.ParseUint(string(r.Kvs[0].Value), 10, 64)
			rev = r.Kvs[0].ModRevision
		}
		m.Epoch = cur + 1
		b, _ := json.Marshal(m)
		ops := []clientv3.Op{clientv3.OpPut(model.EpochKey, strconv.FormatUint(m.Epoch, 10)), clientv3.OpPut(model.MapKey(m.PoolID), string(b))}
		for _, k := range deletes {
			ops = append(ops, clientv3.OpDelete(k))
		}
		tr, err := c.Etcd.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(model.EpochKey), "=", rev)).Then(ops...).Commit()
		if err != nil {
			return 0, err
		}
		if tr.Succeeded {
			return m.Epoch, nil
		}
	}
}

func quietZap() *zap.Logger { return zap.NewNop() }
