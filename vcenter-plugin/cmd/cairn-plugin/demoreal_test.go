package main

import (
	"context"
	"log/slog"
	"testing"

	"github.com/cairn-storage/cairn/vcenter-plugin/internal/gateway"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/gatewayfake"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/vcsimkit"
)

func TestFailFirstBootFailsOnceOnItsHostOnly(t *testing.T) {
	f := &failFirstBoot{host: "esx-03.cairn.test", next: vcsimkit.ReadyGuest{}, log: slog.New(slog.DiscardHandler)}
	ctx := context.Background()
	if _, err := f.PoweredOn(ctx, vcsimkit.SVM{Host: "esx-01.cairn.test"}); err != nil {
		t.Fatalf("another host: %v", err)
	}
	if _, err := f.PoweredOn(ctx, vcsimkit.SVM{Host: "esx-03.cairn.test"}); err == nil {
		t.Fatal("the first boot on esx-03 did not fail")
	}
	r, err := f.PoweredOn(ctx, vcsimkit.SVM{Host: "esx-03.cairn.test"})
	if err != nil || r.GuestInfo[vcsimkit.ReadyKey] != "ready" {
		t.Fatalf("the second boot on esx-03: %v %v", r, err)
	}
}

func TestDemoGatewayFactoryRoutesByPinnedCertificate(t *testing.T) {
	array := gatewayfake.New()
	a := &demoAdopted{url: "https://127.0.0.1:40001", thumbprint: "ab01"}
	gw := demoGatewayFactory(a, array)
	api, err := gw(gateway.Config{URL: "https://127.0.0.1:8443", Thumbprint: "AB:01", Username: "admin", Password: "x"})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := api.(*gateway.HTTPClient); !ok {
		t.Fatalf("the adopted cluster's certificate got %T, want the HTTP client", api)
	}
	// Every other gateway is the in-memory array, as the user it logs in as.
	isArray := func(api gateway.API) bool {
		s, ok := api.(*gatewayfake.Session)
		return ok && s.Array == array
	}
	api, err = gw(gateway.Config{URL: "https://10.20.0.14:8443", Thumbprint: vcsimkit.SimThumbprint})
	if err != nil || !isArray(api) {
		t.Fatalf("a simulated SVM's gateway got %T (%v), want the in-memory array", api, err)
	}
	if api, _ := demoGatewayFactory(nil, array)(gateway.Config{Thumbprint: "ab01"}); !isArray(api) {
		t.Fatal("without -demo-gateway every gateway must be the array")
	}
}
