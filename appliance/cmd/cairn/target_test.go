package main

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/cairn-storage/cairn/appliance/internal/catalog"
	"github.com/cairn-storage/cairn/appliance/internal/etcdtest"
	"github.com/cairn-storage/cairn/appliance/internal/lio"
	"github.com/cairn-storage/cairn/appliance/internal/model"
	"github.com/cairn-storage/cairn/appliance/internal/pki"
	"github.com/cairn-storage/cairn/appliance/internal/pki/pkitest"
)

// The target, with its own certificate's etcd rights, configures each
// mapped iSCSI host with its CHAP credentials: the flag from the model
// (its catalog), the secret from outside the model; it follows a change of
// secret, and refuses to serve a CHAP host whose secret is missing.
func TestTargetMappingsCarryCHAP(t *testing.T) {
	kit := pkitest.New(t)
	u := etcdtest.StartTLS(t, kit)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	gw := model.NewStore(etcdtest.Client(t, u, kit.Identity(pki.RoleGateway, "gw")))
	h1 := must(gw.CreateHost(ctx, model.HostSpec{Name: "esx1", Type: model.HostISCSI, IQN: "iqn.1998-01.com.vmware:esx1", CHAPUser: "u1", CHAPSecret: "secret-one-0001"}))
	h2 := must(gw.CreateHost(ctx, model.HostSpec{Name: "esx2", Type: model.HostISCSI, IQN: "iqn.1998-01.com.vmware:esx2"}))
	vol := model.Volume{ID: "00000000000000b1", Name: "v1", Size: 1 << 30, Mappings: []model.Mapping{{HostID: h1.ID, LUN: 1}, {HostID: h2.ID, LUN: 1}}}
	if err := gw.Create(ctx, model.KindVolume, vol.ID, vol.Name, vol, nil); err != nil {
		t.Fatal(err)
	}

	tc := etcdtest.Client(t, u, kit.Identity(pki.RoleTarget, "tgt1"))
	cat, err := catalog.Open(ctx, tc, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	st := model.NewStore(tc)
	creds := func() map[string]lio.Credentials {
		t.Helper()
		ms, err := iscsiMappings(ctx, cat, st)
		if err != nil || len(ms) != 1 || ms[0].VolumeID != vol.ID {
			t.Fatalf("mappings %+v, %v", ms, err)
		}
		out := map[string]lio.Credentials{}
		for _, h := range ms[0].Hosts {
			out[h.IQN] = h.CHAP
		}
		return out
	}
	want := map[string]lio.Credentials{h1.IQN: {User: "u1", Secret: "secret-one-0001"}, h2.IQN: {}}
	if got := creds(); len(got) != 2 || got[h1.IQN] != want[h1.IQN] || got[h2.IQN] != want[h2.IQN] {
		t.Fatalf("credentials %+v, want %+v", got, want)
	}

	// A new secret wakes the catalog (the host's key is written with it).
	changed := cat.Changed()
	if _, err := gw.UpdateHost(ctx, "esx1", model.HostUpdate{CHAPSecret: ptrTo("secret-two-0002")}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
	case <-ctx.Done():
		t.Fatal("a change of CHAP secret did not change the target's catalog")
	}
	if got := creds(); got[h1.IQN].Secret != "secret-two-0002" {
		t.Fatalf("after the change: %+v", got)
	}

	// A CHAP host without its secret is an error, never a host without CHAP.
	if _, err := gw.C.Delete(ctx, model.CHAPSecretKey(h1.ID)); err != nil {
		t.Fatal(err)
	}
	if _, err := iscsiMappings(ctx, cat, st); err == nil || !strings.Contains(err.Error(), "secret is missing") {
		t.Fatalf("missing secret: %v", err)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func ptrTo[T any](v T) *T { return &v }
