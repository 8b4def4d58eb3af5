package mdm

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"reflect"
	"strconv"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/cairn-storage/cairn/appliance/internal/catalog"
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
					if !hasAnyPrefix(k, "stats/", "token/", "map/", "epoch", "election/", "live/") {
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
		if len(k) >= len(model.Prefix)+len(p) && k[len(model.Prefix):len(model.Prefix)+len(p)] == p {
			return true
		}
	}
	return false
}

// reconcile computes the placement map of every pool that needs one.
//
// In this release a pool's map is (re)computed freely while the pool holds
// no volume; once data may exist, copies move only through rebuild and
// rebalance, which copy data before the map changes.
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
	inUse := map[string]bool{}
	for _, v := range volumes {
		inUse[v.PoolID] = true
	}
	for _, p := range pools {
		var cur model.PlacementMap
		_, gerr := st.Get(rctx, model.MapKey(p.ID), &cur)
		exists := gerr == nil
		if exists && inUse[p.ID] {
			continue
		}
		cands := placement.Candidates(p.ID, devices, sdss, nil)
		if placement.FaultDomains(cands) < placement.Copies {
			continue // volume creation refuses such a pool with a clear message
		}
		pgs := p.PGCount
		if pgs <= 0 {
			pgs = model.DefaultPGCount
		}
		m, err := placement.Compute(p.ID, pgs, 0, cands)
		if err != nil {
			return err
		}
		if exists && reflect.DeepEqual(m.PGs, cur.PGs) {
			continue
		}
		epoch, err := c.bumpAndPut(rctx, m)
		if err != nil {
			return fmt.Errorf("pool %s: publish map: %w", p.Name, err)
		}
		c.Log.Info("placement map published", "pool", p.Name, "epoch", epoch, "pgs", pgs, "devices", len(cands))
	}
	return nil
}

// bumpAndPut writes a map with the next epoch, atomically with the epoch key.
func (c *Controller) bumpAndPut(ctx context.Context, m *model.PlacementMap) (uint64, error) {
	for {
		r, err := c.Etcd.Get(ctx, catalog.EpochKey)
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
		tr, err := c.Etcd.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(catalog.EpochKey), "=", rev)).
			Then(clientv3.OpPut(catalog.EpochKey, strconv.FormatUint(m.Epoch, 10)), clientv3.OpPut(model.MapKey(m.PoolID), string(b))).Commit()
		if err != nil {
			return 0, err
		}
		if tr.Succeeded {
			return m.Epoch, nil
		}
	}
}

func quietZap() *zap.Logger { return zap.NewNop() }
