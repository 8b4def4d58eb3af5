package sds

// lease.go: the liveness lease, and the fencing it grants: a write that
// reached only this copy is acknowledged only under a current lease.

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cairn-storage/cairn/appliance/internal/model"
)

// leaseMargin: the SDS stops acknowledging solo writes this long before
// the earliest moment etcd can expire its lease (sent + TTL). A solo write
// checks the lease before its local I/O and is acknowledged after it, and
// the SDS's clock and etcd's may run at slightly different rates: the
// margin covers both as long as the local I/O takes less than it (it takes
// milliseconds; clock rates differ by parts per million), so the SDS has
// stopped acknowledging before the leader can declare it failed and
// promote another copy.
const leaseMargin = 300 * time.Millisecond

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
				// The etcd client answers an expired lease so itself;
				// kept so that no client version can renew a dead lease.
				err = rpctypes.ErrLeaseNotFound
			}
			if errors.Is(err, rpctypes.ErrLeaseNotFound) {
				lease = 0 // expired: the leader has declared us dead; register again
			}
		}
		cancel()
		if err == nil && lease != 0 {
			s.leaseValidUntil.Store(sent.Add(ttl - leaseMargin).UnixNano())
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
