package mdm

// Leadership hand-over: POST /mdm/leader writes model.LeaderHandoverKey
// naming the member that should run the control loop. The leader yields
// (resigns, then campaigns again at the back of the queue) only while the
// named member campaigns, so the next leader is a member that is up: each
// candidate ahead of the named one yields in turn when it wins, and the
// named one wins and withdraws the request. A request naming a member that
// does not campaign is left to expire; nobody resigns for it, so a hand-over
// never leaves the cluster without a control loop for longer than a
// resign and an election.

import (
	"context"
	"log/slog"
	"slices"
	"time"

	"github.com/cairn-storage/cairn/appliance/internal/model"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// awaitHandover runs while this member leads. It returns the member to hand
// the leadership to as soon as a request names another member that
// campaigns, or "" when ctx ends. A request naming this member is done: it
// deletes it (unless a newer request replaced it meanwhile).
func awaitHandover(ctx context.Context, cli *clientv3.Client, self string, log *slog.Logger) string {
	st := model.NewStore(cli)
	var ignored int64 // mod revision of the request last logged as not applicable
	for ctx.Err() == nil {
		r, err := cli.Get(ctx, model.LeaderHandoverKey)
		if err != nil {
			sleep(ctx, time.Second)
			continue
		}
		if len(r.Kvs) == 1 {
			kv := r.Kvs[0]
			to := string(kv.Value)
			if to == self {
				_, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.Value(model.LeaderHandoverKey), "=", self)).
					Then(clientv3.OpDelete(model.LeaderHandoverKey)).Commit()
				if err == nil {
					log.Info("MDM leadership handed over to this member as requested")
				}
			} else {
				cands, err := st.ElectionCandidates(ctx)
				if err != nil {
					sleep(ctx, time.Second)
					continue
				}
				if slices.Contains(cands, to) {
					return to
				}
				if kv.ModRevision != ignored {
					ignored = kv.ModRevision
					log.Warn("MDM leadership hand-over requested to a member that does not campaign (down, a tie-breaker or not a member); keeping the leadership until it campaigns or the request expires", "to", to)
				}
			}
		}
		// Wait for a change of the request or of the candidates (a
		// member starting or stopping), from the revision just read.
		wctx, wcancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		rev := clientv3.WithRev(r.Header.Revision + 1)
		hw := cli.Watch(wctx, model.LeaderHandoverKey, rev)
		ew := cli.Watch(wctx, model.ElectionPrefix, clientv3.WithPrefix(), rev)
		var resp clientv3.WatchResponse
		ok := true
		select {
		case <-ctx.Done():
		case resp, ok = <-hw:
		case resp, ok = <-ew:
		}
		wcancel()
		if !ok || resp.Err() != nil {
			sleep(ctx, 200*time.Millisecond) // no etcd leader, compacted: read again, not at once
		}
	}
	return ""
}
