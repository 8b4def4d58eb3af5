package gateway_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/cairn-storage/cairn/vcenter-plugin/internal/gateway"
)

// The calls an expansion and a host removal make, as the gateway answers
// them (openapi.json: SDS remove 202 job, jobs, host delete 204, system's
// rebuild view).
func TestHTTPClientDrainAndRebalance(t *testing.T) {
	ctx := context.Background()
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/v1/login", func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"token":"tok"}`))
	})
	mux.HandleFunc("POST /api/v1/sds/{ref}/remove", func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("ref") == "sds-last" {
			w.WriteHeader(409)
			_, _ = w.Write([]byte(`{"code":"in_use","field":"","message":"removing SDS sds-last would leave pool \"p\" (which holds volumes) on 1 fault domain"}`))
			return
		}
		w.Header().Set("Location", "/api/v1/jobs/j1")
		w.WriteHeader(202)
		_, _ = w.Write([]byte(`{"id":"j1","kind":"sds-remove","object":{"kind":"sds","id":"s4","name":"sds4"},"state":"running","percent":0,"eta_seconds":null,"message":"draining"}`))
	})
	mux.HandleFunc("GET /api/v1/jobs/{id}", func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"id":"j1","kind":"sds-remove","state":"running","percent":42.5,"eta_seconds":37,"message":"draining: 54 of 94 placement-group copies still on sds sds4"}`))
	})
	mux.HandleFunc("DELETE /api/v1/hosts/{ref}", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) })
	var putBody string
	mux.HandleFunc("PUT /api/v1/svms/{name}", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		putBody = r.PathValue("name") + " " + string(b)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(b)
	})
	mux.HandleFunc("DELETE /api/v1/svms/{name}", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) })
	mux.HandleFunc("GET /api/v1/system", func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"bootstrapped":true,"rebuild":{"degraded_groups":0,"rebuilding_groups":0,"resyncing_groups":0,"rebalancing_groups":6,"pending_bytes":1048576,"done_bytes":5,"resync_bytes":0,"rate_bytes_per_second":1.5,"percent":40,"eta_seconds":12}}`))
	})
	ts := httptest.NewTLSServer(mux)
	defer ts.Close()
	c, err := gateway.NewHTTPClient(gateway.Config{URL: ts.URL, Username: "admin", Password: "x", Thumbprint: gateway.Thumbprint(ts.Certificate().Raw)})
	if err != nil {
		t.Fatal(err)
	}
	j, err := c.RemoveSDS(ctx, "sds4")
	if err != nil || j.ID != "j1" || j.State != gateway.JobRunning || j.Done() {
		t.Fatalf("RemoveSDS: %+v %v", j, err)
	}
	_, err = c.RemoveSDS(ctx, "sds-last")
	var se *gateway.StatusError
	if !errors.As(err, &se) || se.Status != 409 || !strings.Contains(se.Message, "1 fault domain") {
		t.Fatalf("refused drain: %v", err)
	}
	j, err = c.GetJob(ctx, "j1")
	if err != nil || j.Percent != 42.5 || j.ETASeconds == nil || *j.ETASeconds != 37 {
		t.Fatalf("GetJob: %+v %v", j, err)
	}
	if err := c.DeleteHost(ctx, "esx-05"); err != nil {
		t.Fatal(err)
	}
	if err := c.PutSVM(ctx, gateway.SVMRecord{Name: "cairn-esx-05", Addresses: []string{"10.20.0.15", "10.30.0.15"}, Roles: []string{"sds", "target"}, TargetPort: 5}); err != nil ||
		putBody != `cairn-esx-05 {"name":"cairn-esx-05","addresses":["10.20.0.15","10.30.0.15"],"roles":["sds","target"],"target_port":5}` {
		t.Fatalf("PutSVM: %v; the gateway got %s", err, putBody)
	}
	if err := c.DeleteSVM(ctx, "cairn-esx-05"); err != nil {
		t.Fatalf("DeleteSVM: %v", err)
	}
	sys, err := c.System(ctx)
	if err != nil || sys.Rebuild.RebalancingGroups != 6 || sys.Rebuild.PendingBytes != 1<<20 || sys.Rebuild.Percent != 40 || *sys.Rebuild.ETASeconds != 12 {
		t.Fatalf("System rebuild: %+v %v", sys.Rebuild, err)
	}
}
