package pki

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/cairn-storage/cairn/appliance/internal/buildinfo"
	"github.com/cairn-storage/cairn/appliance/internal/model"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Publish keeps this daemon's certificate Info, with the version it runs, at model.CertKey under a
// lease of its own until ctx ends, rewriting it after every reload (a
// renewed certificate shows its new expiry). Errors are logged and retried:
// a daemon runs without its certificate listed.
func Publish(ctx context.Context, cli *clientv3.Client, id *Identity, log *slog.Logger) {
	publish(ctx, cli, func() Info {
		i := InfoOf(id.Leaf())
		i.Version = buildinfo.Version()
		return i
	}, log)
}

// publish keeps current() published (see Publish and PublishInfo).
func publish(ctx context.Context, cli *clientv3.Client, current func() Info, log *slog.Logger) {
	var lease clientv3.LeaseID
	var serial string
	lost := new(atomic.Bool)
	for ctx.Err() == nil {
		info := current()
		if lost.Swap(false) {
			lease = 0 // the keep-alive ended: the key went with its lease
		}
		if lease == 0 || info.Serial != serial {
			if err := put(ctx, cli, &lease, info, lost); err != nil {
				log.Debug("certificate not published; retrying", "err", err)
				lease = 0
			} else {
				serial = info.Serial
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(5 * time.Second):
		}
	}
	if lease != 0 {
		rctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, _ = cli.Revoke(rctx, lease)
		cancel()
	}
}

func put(ctx context.Context, cli *clientv3.Client, lease *clientv3.LeaseID, info Info, lost *atomic.Bool) error {
	if *lease == 0 {
		l, err := cli.Grant(ctx, 15)
		if err != nil {
			return err
		}
		ka, err := cli.KeepAlive(ctx, l.ID)
		if err != nil {
			return err
		}
		go func() {
			for range ka { // drained until the lease or ctx ends
			}
			lost.Store(true)
		}()
		*lease = l.ID
	}
	b, _ := json.Marshal(info)
	_, err := cli.Put(ctx, model.CertKey(info.Role, info.Name), string(b), clientv3.WithLease(*lease))
	return err
}
