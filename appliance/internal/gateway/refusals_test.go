package gateway

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/cairn-storage/cairn/appliance/internal/model"
	"github.com/cairn-storage/cairn/appliance/internal/refusals"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestRefusalsBecomeEvents: what a daemon's Reporter hands to etcd becomes
// one security event per report, however many gateways observe, and the
// report is gone; a flood is reported as a few listed and a count.
func TestRefusalsBecomeEvents(t *testing.T) {
	e := newEnv(t)
	e.cluster()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	other, err := New(ctx, Config{Etcd: e.etcd, StateDir: t.TempDir(), Logger: e.srv.log})
	if err != nil {
		t.Fatal(err)
	}
	rep := refusals.New("sds", "a", slog.New(slog.DiscardHandler))
	for i := 0; i < 20; i++ {
		rep.Refused("data path", "10.9.9.9:4000", "host/rogue", "peer has role \"host\"")
	}
	go rep.Run(ctx, e.etcd, 50*time.Millisecond)
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := must(e.etcd.Get(ctx, model.RefusedPrefix, clientv3.WithPrefix(), clientv3.WithCountOnly()))
		if r.Count == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no refusal report in etcd after 10 s (%d keys)", r.Count)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for i := 0; i < 2; i++ {
		if err := e.srv.observe(ctx); err != nil {
			t.Fatal(err)
		}
		if err := other.observe(ctx); err != nil {
			t.Fatal(err)
		}
	}
	_, v := e.do("GET", "/api/v1/events?kind=security", e.admin, "")
	l := v.([]any)
	if len(l) != 1 {
		t.Fatalf("%d security events for one report: %v", len(l), l)
	}
	ev := l[0].(map[string]any)
	msg, _ := ev["message"].(string)
	if ev["severity"] != SeverityWarning || !strings.Contains(msg, "sds a refused 10.9.9.9:4000 (certificate of host/rogue) on the data path") ||
		!strings.Contains(msg, "and 19 more refusals") {
		t.Fatalf("event %v", ev)
	}
	if obj, _ := ev["object"].(map[string]any); obj == nil || obj["name"] != "a" {
		t.Errorf("the event names no SDS object: %v", ev)
	}
	if r := must(e.etcd.Get(ctx, model.RefusedPrefix, clientv3.WithPrefix(), clientv3.WithCountOnly())); r.Count != 0 {
		t.Errorf("%d reports left after the event", r.Count)
	}
}
