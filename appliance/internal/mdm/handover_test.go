package mdm_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairn-storage/cairn/appliance/internal/mdm"
	"github.com/cairn-storage/cairn/appliance/internal/model"
	"github.com/cairn-storage/cairn/appliance/internal/porttest"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// A hand-over request naming the last candidate in the election's queue:
// the leader yields, the candidate after it wins while the request is
// pending and yields at once, and the named member wins and withdraws the
// request; each that yielded waits behind it in the order it yielded. A
// request naming the leader itself moves nothing.
func TestLeaderHandoverQueue(t *testing.T) {
	names := []string{"mdm1", "mdm2", "mdm3"}
	peers, clients := map[string]string{}, map[string]string{}
	var initial, endpoints []string
	for _, n := range names {
		peers[n], clients[n] = "http://"+porttest.Addr(t), "http://"+porttest.Addr(t)
		initial = append(initial, n+"="+peers[n])
		endpoints = append(endpoints, clients[n])
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	// Cleanups run last first: the data directories are made before the
	// members' stop is registered, so they are removed after the members
	// stopped (etcd's file purge, still running, dies on a vanished one).
	base := t.TempDir()
	t.Cleanup(func() { cancel(); wg.Wait() })
	for _, n := range names {
		cfg := mdm.Config{Name: n, DataDir: filepath.Join(base, n), PeerURL: peers[n], ClientURL: clients[n],
			InitialCluster: strings.Join(initial, ","), Logger: slog.New(slog.DiscardHandler)}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := mdm.Run(ctx, cfg); err != nil {
				t.Errorf("mdm %s: %v", cfg.Name, err)
			}
		}()
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	st := model.NewStore(cli)
	waitUntil := func(within time.Duration, what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(within); !cond(); time.Sleep(100 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not reached in %s", what, within)
			}
		}
	}
	var queue []string
	waitUntil(60*time.Second, "three candidates", func() bool {
		rctx, rcancel := context.WithTimeout(ctx, 2*time.Second)
		defer rcancel()
		queue, err = st.ElectionCandidates(rctx)
		return err == nil && len(queue) == 3
	})
	target := queue[2]
	l, err := cli.Grant(ctx, 30)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(ctx, model.LeaderHandoverKey, target, clientv3.WithLease(l.ID)); err != nil {
		t.Fatal(err)
	}
	want := []string{target, queue[0], queue[1]}
	var now []string
	waitUntil(10*time.Second, "the leadership handed to "+target, func() bool {
		now, err = st.ElectionCandidates(ctx)
		return err == nil && slices.Equal(now, want)
	})
	waitUntil(5*time.Second, "the request withdrawn by "+target, func() bool {
		r, err := cli.Get(ctx, model.LeaderHandoverKey)
		return err == nil && len(r.Kvs) == 0
	})

	// The leader named: it withdraws the request and keeps its term.
	term, err := cli.Get(ctx, model.ElectionPrefix, clientv3.WithFirstCreate()...)
	if err != nil || len(term.Kvs) != 1 {
		t.Fatalf("election: %v %v", term, err)
	}
	if _, err := cli.Put(ctx, model.LeaderHandoverKey, target); err != nil {
		t.Fatal(err)
	}
	waitUntil(5*time.Second, "the request withdrawn by the leader it names", func() bool {
		r, err := cli.Get(ctx, model.LeaderHandoverKey)
		return err == nil && len(r.Kvs) == 0
	})
	after, err := cli.Get(ctx, model.ElectionPrefix, clientv3.WithFirstCreate()...)
	if err != nil || len(after.Kvs) != 1 || after.Kvs[0].CreateRevision != term.Kvs[0].CreateRevision {
		t.Errorf("the leader's term changed: %v, was %v (%v)", after, term, err)
	}
}
