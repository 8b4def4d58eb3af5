package gateway

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/cairn-storage/cairn/appliance/internal/model"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestConcurrentEventsAllStored: events written at once by many requests
// of two gateways (a lockout's among a burst of audits and refusals) are
// all stored, each under its own sequence number: none is lost to the
// race on the sequence key.
func TestConcurrentEventsAllStored(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	other, err := New(ctx, Config{Etcd: e.etcd, StateDir: t.TempDir(), Logger: e.srv.log})
	if err != nil {
		t.Fatal(err)
	}
	before := must(e.etcd.Get(ctx, model.EventPrefix, clientv3.WithPrefix(), clientv3.WithCountOnly())).Count
	const per = 40
	var wg sync.WaitGroup
	for g, s := range []*Server{e.srv, other} {
		for i := 0; i < per; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s.emit(ctx, Event{Severity: SeverityInfo, Kind: EventAudit, Message: fmt.Sprintf("gateway %d event %d", g, i)})
			}()
		}
	}
	wg.Wait()
	r := must(e.etcd.Get(ctx, model.EventPrefix, clientv3.WithPrefix()))
	if got := r.Count - before; got != 2*per {
		t.Fatalf("%d of %d events stored", got, 2*per)
	}
	seq := must(e.etcd.Get(ctx, model.EventSeqKey))
	if string(seq.Kvs[0].Value) != fmt.Sprint(r.Count) {
		t.Fatalf("sequence %s after %d events", seq.Kvs[0].Value, r.Count)
	}
}
