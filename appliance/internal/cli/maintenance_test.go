package cli

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cairn-storage/cairn/appliance/internal/gateway"
	"github.com/cairn-storage/cairn/appliance/internal/testcluster"
)

// newClusterHarness serves a plain-HTTP gateway on a running test cluster
// and logs cairnctl in as admin.
func newClusterHarness(t *testing.T, c *testcluster.Cluster) *harness {
	t.Helper()
	h := &harness{t: t, state: t.TempDir(), cfgPath: filepath.Join(t.TempDir(), "cairnctl.json")}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h.url = "http://" + ln.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- gateway.Serve(ctx, gateway.Config{Etcd: c.Etcd, StateDir: h.state, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, ln)
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("gateway: %v", err)
		}
	})
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get(h.url + "/api/v1/openapi.json")
		if err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("gateway did not come up: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	h.ok("login", "--url", h.url, "--user", "admin", "--password-file", filepath.Join(h.state, gateway.AdminPasswordFile))
	return h
}

func TestMaintenanceCommands(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{SDSs: 4, DevicesPerSDS: 1, PGCount: 16})
	vol := c.CreateVolume("v1", 16<<20, true)
	if err := vol.WriteAt(context.Background(), make([]byte, 16<<20), 0, 0); err != nil {
		t.Fatal(err)
	}
	h := newClusterHarness(t, c)

	h.fails(2, "give --mode instant or --mode protected", "sds", "maintenance", "enter", "sds1")
	h.fails(2, "expected enter|exit", "sds", "maintenance", "sds1")
	h.fails(2, "takes no --mode", "faultset", "maintenance", "exit", "fs1", "--mode", "instant")
	h.fails(1, "not in maintenance", "sds", "maintenance", "exit", "sds1")

	code, out, errs := h.run("", "sds", "maintenance", "enter", "sds1", "--mode", "instant", "--wait")
	if code != 0 || !strings.Contains(out, "sds sds1 is in maintenance: safe to shut down") || !strings.Contains(errs, "sds1: ") {
		t.Fatalf("enter --wait: exit %d\nstdout %s\nstderr %s", code, out, errs)
	}
	t.Logf("enter progress:\n%s", errs)
	h.fails(1, "already in maintenance", "sds", "maintenance", "enter", "sds1", "--mode", "protected")
	info := h.ok("system", "info")
	if !strings.Contains(info, "rebuild:   groups: ") || !strings.Contains(info, "degraded") || !strings.Contains(info, "leader:") {
		t.Errorf("system info during maintenance:\n%s", info)
	}
	if ls := h.ok("sds", "ls"); !strings.Contains(ls, "in-maintenance") {
		t.Errorf("sds ls does not show the maintenance state:\n%s", ls)
	}
	code, out, errs = h.run("", "sds", "maintenance", "exit", "sds1", "--wait")
	if code != 0 || !strings.Contains(out, "resynced") {
		t.Fatalf("exit --wait: exit %d\nstdout %s\nstderr %s", code, out, errs)
	}
	t.Logf("exit progress:\n%s", errs)
	if info := h.ok("system", "info"); !strings.Contains(info, "rebuild:   idle") {
		t.Errorf("system info after resync:\n%s", info)
	}

	// A wait that times out says what to do, and the request stays.
	h.fails(1, "do NOT shut it down", "sds", "maintenance", "enter", "sds2", "--mode", "protected", "--wait", "--timeout", "1ms")
	// (Asking for the same mode again is a repeat and succeeds; another
	// mode is refused because the first request is still in effect.)
	code, out, errs = h.run("", "sds", "maintenance", "enter", "sds2", "--mode", "instant", "--wait")
	if code != 1 || !strings.Contains(errs, "already in maintenance") {
		t.Fatalf("protected maintenance did not stay in effect: %d %s %s", code, out, errs)
	}
	code, out, errs = h.run("", "sds", "maintenance", "exit", "sds2", "--wait")
	if code != 0 {
		t.Fatalf("exit protected: %d %s %s", code, out, errs)
	}
}
