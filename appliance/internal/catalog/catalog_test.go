package catalog_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cairn-storage/cairn/appliance/internal/catalog"
	"github.com/cairn-storage/cairn/appliance/internal/etcdtest"
	"github.com/cairn-storage/cairn/appliance/internal/model"
)

// A reload whose read of etcd is older than what the watch applied
// meanwhile (a reload after a stale-epoch answer, racing the watch) leaves
// the snapshot as it is: installed, it took the snapshot back in time, and
// an SDS detached a device added a moment before ("no longer in the
// model"), failing the writes placed on it.
func TestReloadNeverGoesBack(t *testing.T) {
	cli := etcdtest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	put := func(d model.Device) int64 {
		t.Helper()
		b, _ := json.Marshal(d)
		r, err := cli.Put(ctx, model.Key(model.KindDevice, d.ID), string(b))
		if err != nil {
			t.Fatal(err)
		}
		return r.Header.Revision
	}
	before := put(model.Device{ID: "d1", SDSID: "s1", State: "normal"})
	cat, err := catalog.Open(ctx, cli, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	waitDevices := func(what string, want int) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); len(cat.Devices("s1")) != want; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: the catalog holds %d devices of s1, want %d", what, len(cat.Devices("s1")), want)
			}
		}
	}
	put(model.Device{ID: "d2", SDSID: "s1", State: "normal"})
	waitDevices("the watch delivered d2", 2)

	// The slow read: etcd as it was before d2 was added.
	old, err := cli.Get(ctx, model.Prefix, clientv3.WithPrefix(), clientv3.WithRev(before))
	if err != nil {
		t.Fatal(err)
	}
	old.Header.Revision = before // as served then (a historical read carries today's)
	cat.Install(old)
	if n := len(cat.Devices("s1")); n != 2 {
		t.Fatalf("an older read of etcd took the snapshot back: %d devices of s1, want 2", n)
	}

	// A read newer than the snapshot is installed, and the watch goes on
	// from there: what it delivers again up to that read is not applied
	// twice, what comes after is.
	put(model.Device{ID: "d3", SDSID: "s1", State: "normal"})
	waitDevices("the watch delivered d3", 3)
	if err := cat.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Delete(ctx, model.Key(model.KindDevice, "d1")); err != nil {
		t.Fatal(err)
	}
	waitDevices("the watch delivered d1's deletion", 2)
}
