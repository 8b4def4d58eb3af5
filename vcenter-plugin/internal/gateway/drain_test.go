package gateway_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/cairn-storage/cairn/vcenter-plugin/internal/gateway"
)

// TestHTTPClientDrain: RemoveDevice posts to /devices/{ref}/remove and
// reads the device-remove job (202 + Location, the gateway's answer in
// docs/api.md section 4); GetJob reads its progress; a refusal keeps the
// gateway's status and message.
func TestHTTPClientDrain(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/v1/login", func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"token":"tok","expires":"2030-01-01T00:00:00Z","user":"admin","role":"admin"}`))
	})
	mux.HandleFunc("POST /api/v1/devices/{ref}/remove", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tok" {
			w.WriteHeader(401)
			return
		}
		if r.PathValue("ref") == "last" {
			w.WriteHeader(409)
			_, _ = w.Write([]byte(`{"code":"in_use","field":"","message":"pool p1 would hold volumes on one fault domain"}`))
			return
		}
		w.Header().Set("Location", "/api/v1/jobs/j1")
		w.WriteHeader(202)
		_, _ = w.Write([]byte(`{"id":"j1","kind":"device-remove","object":{"kind":"device","id":"d1","name":"sds1-disk2"},"state":"running","percent":0,"eta_seconds":null,"message":"draining: 94 of 94 placement-group copies still on device sds1-disk2","result":null,"error":null}`))
	})
	mux.HandleFunc("GET /api/v1/jobs/{id}", func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"id":"j1","kind":"device-remove","object":{"kind":"device","id":"d1","name":"sds1-disk2"},"state":"running","percent":42.5,"eta_seconds":37,"message":"draining: 54 of 94 placement-group copies still on device sds1-disk2","result":null,"error":null}`))
	})
	ts := httptest.NewTLSServer(mux)
	defer ts.Close()
	c, err := gateway.NewHTTPClient(gateway.Config{URL: ts.URL, Username: "admin", Password: "s3cret-pass", Thumbprint: gateway.Thumbprint(ts.Certificate().Raw)})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	j, err := c.RemoveDevice(ctx, "sds1-disk2")
	if err != nil || j.ID != "j1" || j.State != gateway.JobRunning || j.Object.Name != "sds1-disk2" || j.ETASeconds != nil {
		t.Fatalf("RemoveDevice: %+v %v", j, err)
	}
	j, err = c.GetJob(ctx, "j1")
	if err != nil || j.Percent != 42.5 || j.ETASeconds == nil || *j.ETASeconds != 37 || !strings.Contains(j.Message, "54 of 94") {
		t.Fatalf("GetJob: %+v %v", j, err)
	}
	_, err = c.RemoveDevice(ctx, "last")
	var se *gateway.StatusError
	if !errors.As(err, &se) || se.Status != 409 || !strings.Contains(se.Message, "one fault domain") {
		t.Fatalf("refused drain: %v", err)
	}
}
