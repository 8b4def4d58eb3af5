package model_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/cairn-storage/cairn/appliance/internal/buildinfo"
	"github.com/cairn-storage/cairn/appliance/internal/etcdtest"
	"github.com/cairn-storage/cairn/appliance/internal/model"
)

// TestSchema: a new model gets the schema this binary writes, once; a model
// from before the key reads as schema 1; a newer schema than this binary
// reads is refused with what to do, and never overwritten.
func TestSchema(t *testing.T) {
	cli := etcdtest.Start(t)
	ctx := context.Background()
	if s, found, err := model.ReadSchema(ctx, cli); err != nil || found || s.Version != 1 {
		t.Fatalf("no key: %+v %v %v; want schema 1, not found", s, found, err)
	}
	if err := model.CheckSchema(ctx, cli); err != nil {
		t.Fatalf("a model from before the key: %v", err)
	}
	s, err := model.EnsureSchema(ctx, cli)
	if err != nil || s.Version != model.SchemaVersion || s.WrittenBy != buildinfo.Version() {
		t.Fatalf("EnsureSchema: %+v %v", s, err)
	}
	r, _ := cli.Get(ctx, model.SchemaKey)
	rev := r.Kvs[0].ModRevision
	if _, err := model.EnsureSchema(ctx, cli); err != nil {
		t.Fatal(err)
	}
	if r, _ := cli.Get(ctx, model.SchemaKey); r.Kvs[0].ModRevision != rev {
		t.Fatal("EnsureSchema rewrote a schema that was there")
	}

	// The system moved on to a schema this binary does not read.
	newer := `{"version":` + strconv.Itoa(model.SchemaVersion+1) + `,"written_by":"9.0.0"}`
	if _, err := cli.Put(ctx, model.SchemaKey, newer); err != nil {
		t.Fatal(err)
	}
	for name, f := range map[string]func() error{
		"CheckSchema":  func() error { return model.CheckSchema(ctx, cli) },
		"EnsureSchema": func() error { _, err := model.EnsureSchema(ctx, cli); return err },
	} {
		err := f()
		if !errors.Is(err, model.ErrSchemaTooNew) || !strings.Contains(err.Error(), "written by Cairn 9.0.0") ||
			!strings.Contains(err.Error(), "upgrade Cairn on this host") {
			t.Errorf("%s on a newer model: %v", name, err)
		}
	}
	if r, _ := cli.Get(ctx, model.SchemaKey); string(r.Kvs[0].Value) != newer {
		t.Fatalf("the newer schema was overwritten: %s", r.Kvs[0].Value)
	}
	if _, err := cli.Put(ctx, model.SchemaKey, `{"version":0}`); err != nil {
		t.Fatal(err)
	}
	if err := model.CheckSchema(ctx, cli); err == nil || errors.Is(err, model.ErrSchemaTooNew) || !strings.Contains(err.Error(), "malformed") {
		t.Fatalf("a malformed schema: %v", err)
	}
}
