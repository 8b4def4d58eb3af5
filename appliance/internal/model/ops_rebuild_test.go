package model_test

import (
	"testing"

	"github.com/cairn-storage/cairn/appliance/internal/model"
)

func ptr[T any](v T) *T { return &v }

func TestPoolRebuildPolicy(t *testing.T) {
	f := newFixture(t)
	f.topology()
	p := must(f.s.GetPool(f.ctx, "p"))
	if p.Policy() != model.RebuildUnlimited || p.RebuildMaxIO != 0 {
		t.Fatalf("new pool: policy %q max %d, want unlimited", p.Policy(), p.RebuildMaxIO)
	}
	upd := func(up model.PoolUpdate) func() error {
		return func() error { _, err := f.s.UpdatePool(f.ctx, "p", up); return err }
	}
	f.refused("nothing to change", model.ErrNoChange, "give at least one of name, spare_percent, rebuild_policy", upd(model.PoolUpdate{}))
	f.refused("unknown policy", model.ErrInvalid, `rebuild_policy "fast": use one of unlimited, limit-concurrent-io, favor-app-io`,
		upd(model.PoolUpdate{RebuildPolicy: ptr("fast")}))
	f.refused("limit without a number", model.ErrInvalid, "needs rebuild_max_io",
		upd(model.PoolUpdate{RebuildPolicy: ptr(model.RebuildLimitIO)}))
	f.refused("zero", model.ErrInvalid, "rebuild_max_io 0 must be between 1 and 64",
		upd(model.PoolUpdate{RebuildPolicy: ptr(model.RebuildLimitIO), RebuildMaxIO: ptr(0)}))
	f.refused("too many", model.ErrInvalid, "rebuild_max_io 65 must be between 1 and 64",
		upd(model.PoolUpdate{RebuildPolicy: ptr(model.RebuildLimitIO), RebuildMaxIO: ptr(65)}))
	f.refused("number without the policy", model.ErrInvalid, "applies only to the policy limit-concurrent-io",
		upd(model.PoolUpdate{RebuildMaxIO: ptr(2)}))
	f.refused("no such pool", model.ErrNotFound, `pool "nope" not found`, func() error {
		_, err := f.s.UpdatePool(f.ctx, "nope", model.PoolUpdate{RebuildPolicy: ptr(model.RebuildUnlimited)})
		return err
	})

	p = must(f.s.UpdatePool(f.ctx, "p", model.PoolUpdate{RebuildPolicy: ptr(model.RebuildLimitIO), RebuildMaxIO: ptr(2)}))
	if p.RebuildPolicy != model.RebuildLimitIO || p.RebuildMaxIO != 2 {
		t.Fatalf("after update: %+v", p)
	}
	// The number alone, the policy kept.
	must(f.s.UpdatePool(f.ctx, "p", model.PoolUpdate{RebuildMaxIO: ptr(5)}))
	if got := must(f.s.GetPool(f.ctx, p.ID)); got.RebuildPolicy != model.RebuildLimitIO || got.RebuildMaxIO != 5 || got.SparePercent != p.SparePercent {
		t.Fatalf("stored: %+v", got)
	}
	// Another policy drops the number.
	must(f.s.UpdatePool(f.ctx, "p", model.PoolUpdate{RebuildPolicy: ptr(model.RebuildFavorAppIO)}))
	if got := must(f.s.GetPool(f.ctx, "p")); got.RebuildPolicy != model.RebuildFavorAppIO || got.RebuildMaxIO != 0 {
		t.Fatalf("stored: %+v", got)
	}
}

func TestSDSRebuildCap(t *testing.T) {
	f := newFixture(t)
	f.topology()
	upd := func(v *int) func() error {
		return func() error { _, err := f.s.UpdateSDS(f.ctx, "a", model.SDSUpdate{RebuildMBps: v}); return err }
	}
	f.refused("nothing to change", model.ErrNoChange, "give at least one of name, rebuild_mbps", upd(nil))
	f.refused("negative", model.ErrInvalid, "rebuild_mbps -1 must be between 0 (no cap) and 100000", upd(ptr(-1)))
	f.refused("huge", model.ErrInvalid, "rebuild_mbps 100001 must be between", upd(ptr(100001)))

	x := must(f.s.UpdateSDS(f.ctx, "a", model.SDSUpdate{RebuildMBps: ptr(50)}))
	if x.RebuildMBps != 50 {
		t.Fatalf("after update: %+v", x)
	}
	got := must(f.s.GetSDS(f.ctx, "a"))
	if got.RebuildMBps != 50 || got.State != model.SDSNormal || got.Address != "127.0.0.1:7001" || got.FaultSetID == "" {
		t.Fatalf("stored: %+v", got)
	}
	must(f.s.UpdateSDS(f.ctx, "a", model.SDSUpdate{RebuildMBps: ptr(0)}))
	if got := must(f.s.GetSDS(f.ctx, "a")); got.RebuildMBps != 0 {
		t.Fatalf("cap not removed: %+v", got)
	}
	if got := must(f.s.GetSDS(f.ctx, "b")); got.RebuildMBps != 0 {
		t.Fatalf("another SDS changed: %+v", got)
	}
}
