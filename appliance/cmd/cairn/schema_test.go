package main

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cairn-storage/cairn/appliance/internal/etcdtest"
	"github.com/cairn-storage/cairn/appliance/internal/model"
	"github.com/cairn-storage/cairn/appliance/internal/pki"
	"github.com/cairn-storage/cairn/appliance/internal/pki/pkitest"
)

// TestDaemonRefusesANewerModel: every daemon connects through common.etcd;
// on a model of a schema newer than this binary reads (the system upgraded
// past it) it stops there, saying what to do, instead of misreading it.
func TestDaemonRefusesANewerModel(t *testing.T) {
	kit := pkitest.New(t)
	u := etcdtest.StartTLS(t, kit)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := &common{mdm: u, pkiDir: kit.Identity(pki.RoleSDS, "sds1").Dir()}
	cli, err := c.etcd(ctx)
	if err != nil {
		t.Fatalf("a current model: %v", err)
	}
	cli.Close()
	root := etcdtest.Client(t, u, kit.Identity(pki.RoleGateway, "gw"))
	if _, err := root.Put(ctx, model.SchemaKey, `{"version":99,"written_by":"9.0.0"}`); err != nil {
		t.Fatal(err)
	}
	c = &common{mdm: u, pkiDir: kit.Identity(pki.RoleSDS, "sds2").Dir()}
	if _, err := c.etcd(ctx); !errors.Is(err, model.ErrSchemaTooNew) || !strings.Contains(err.Error(), "upgrade Cairn on this host") {
		t.Fatalf("a newer model: %v", err)
	}
}
