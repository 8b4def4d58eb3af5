package gateway

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/cairn-storage/cairn/appliance/internal/model"
	"github.com/cairn-storage/cairn/appliance/internal/testcluster"
	"github.com/cairn-storage/cairn/appliance/internal/testlog"
)

// TestDrainRemoveJobs: drain-and-remove of an SDS and of a device over a
// real cluster, as jobs with progress; the SDS job is carried on by a new
// gateway after the first one is gone (jobs live in etcd); the data reads
// back intact after each removal.
func TestDrainRemoveJobs(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{SDSs: 4, DevicesPerSDS: 2, PGCount: 32})
	e := newClusterEnv(t, c)
	ctx := context.Background()
	vol := c.CreateVolume("v1", 32*MiB, true)
	data := make([]byte, 32*MiB)
	rand.New(rand.NewSource(7)).Read(data)
	if err := vol.WriteAt(ctx, data, 0, 0); err != nil {
		t.Fatal(err)
	}
	verify := func(when string) {
		t.Helper()
		got := make([]byte, len(data))
		if err := vol.ReadAt(ctx, got, 0); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("data %s differs (err %v)", when, err)
		}
	}
	waitJob := func(e *env, id string) map[string]any {
		t.Helper()
		var j map[string]any
		waitFor(t, 90*time.Second, "job "+id+" ends", func() bool {
			j = e.ok(200, "GET", "/api/v1/jobs/"+id, e.admin, "")
			return j["state"] == JobSucceeded || j["state"] == JobFailed
		})
		return j
	}

	// Refusals change nothing.
	e.failsWith(404, CodeNotFound, "ref", "not found", "POST", "/api/v1/sds/nope/remove", e.admin, "")
	e.failsWith(400, CodeInvalid, "x", "unknown field", "POST", "/api/v1/sds/sds4/remove", e.admin, `{"x":1}`)
	e.failsWith(404, CodeNotFound, "id", "not found", "GET", "/api/v1/jobs/0000000000000000", e.admin, "")

	// SDS sds4: 202, a job, and a repeat answers the same job.
	st, v, h := e.doH("POST", "/api/v1/sds/sds4/remove", e.admin, "", nil)
	job, _ := v.(map[string]any)
	id, _ := job["id"].(string)
	if st != 202 || h.Get("Location") != "/api/v1/jobs/"+id || job["kind"] != JobSDSRemove || job["state"] != JobRunning {
		t.Fatalf("remove sds4: %d %v", st, v)
	}
	if o := job["object"].(map[string]any); o["name"] != "sds4" || o["kind"] != "sds" {
		t.Errorf("job object %v", o)
	}
	if st, v, _ := e.doH("POST", "/api/v1/sds/sds4/remove", e.admin, "{}", nil); st != 202 || v.(map[string]any)["id"] != id {
		t.Errorf("repeat: %d %v", st, v)
	}
	if x := e.ok(200, "GET", "/api/v1/sds/sds4", e.admin, ""); x["state"] != model.SDSRemoving {
		t.Errorf("sds4 state %v", x["state"])
	}
	// Maintenance of an SDS being removed is refused; the drain may also
	// have ended (sds4 holds little) in between, and the SDS is gone.
	if st, v := e.do("POST", "/api/v1/sds/sds4/maintenance", e.admin, `{"mode":"instant"}`); st == 404 {
		if j := e.ok(200, "GET", "/api/v1/jobs/"+id, e.admin, ""); j["state"] != JobSucceeded {
			t.Fatalf("maintenance of sds4: 404 %v while its removal is %v", v, j["state"])
		}
	} else if m, _ := v.(map[string]any); st != 400 || !strings.Contains(fmt.Sprint(m["message"]), "not normal") {
		t.Errorf("maintenance of sds4 while it is removed: %d %v; want 400 saying not normal", st, v)
	}

	// The first gateway goes away; a new one (another SVM's) carries on,
	// with its observer running and its own session.
	restarted := &env{t: t, etcd: c.Etcd, dir: t.TempDir(), logs: &testlog.Buffer{}}
	srv, err := New(ctx, Config{Etcd: c.Etcd, StateDir: restarted.dir, ObserveInterval: 200 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	bctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); srv.Run(bctx) }()
	t.Cleanup(func() { stop(); <-done })
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	restarted.srv, restarted.url, restarted.admin = srv, hs.URL, e.admin // tokens live in etcd
	e = restarted

	j := waitJob(e, id)
	if j["state"] != JobSucceeded || j["percent"] != 100.0 {
		t.Fatalf("sds4 job: %v", j)
	}
	// (The cluster is rebalancing on its own now: refused checks status and
	// message only.)
	e.refused(404, `SDS "sds4" not found`, "GET", "/api/v1/sds/sds4", e.admin, "")
	if _, l := e.do("GET", "/api/v1/devices?sds=sds1", e.admin, ""); len(l.([]any)) != 2 {
		t.Errorf("sds1's devices: %v", l)
	}
	verify("after removing sds4")
	_, evs := e.do("GET", "/api/v1/events?kind=state&object=sds4", e.admin, "")
	if l := evs.([]any); len(l) == 0 || l[len(l)-1].(map[string]any)["message"] != "job "+id+" (sds-remove): sds sds4 drained and removed" {
		t.Errorf("no end event for the job: %v", evs)
	}

	// Device sds1-d1: the other devices take its copies.
	st, v, _ = e.doH("POST", "/api/v1/devices/sds1-d1/remove", e.admin, "", nil)
	if st != 202 {
		t.Fatalf("remove sds1-d1: %d %v", st, v)
	}
	j = waitJob(e, v.(map[string]any)["id"].(string))
	if j["state"] != JobSucceeded || j["kind"] != JobDeviceRemove {
		t.Fatalf("device job: %v", j)
	}
	e.refused(404, "not found", "GET", "/api/v1/devices/sds1-d1", e.admin, "")
	verify("after removing sds1-d1")
	_, jobs := e.do("GET", "/api/v1/jobs?state=succeeded", e.admin, "")
	if l := jobs.([]any); len(l) != 2 || l[0].(map[string]any)["kind"] != JobDeviceRemove {
		t.Errorf("jobs newest first: %v", jobs)
	}
}

// TestDrainProgress: percent counts the copies moved off since the job
// started, the ETA follows the rate so far, and the end states.
func TestDrainProgress(t *testing.T) {
	pg := func(sds string) []model.CopyRef {
		return []model.CopyRef{{SDSID: sds, DeviceID: sds + "-d"}, {SDSID: "other", DeviceID: "o"}}
	}
	w := &world{sdss: map[string]model.SDS{"x": {ID: "x", Name: "x", State: model.SDSRemoving}},
		maps: map[string]model.PlacementMap{"p": {PGs: [][]model.CopyRef{pg("x"), pg("x"), pg("x"), pg("x"), pg("y")}}}}
	start := time.Now().Add(-10 * time.Second)
	rec := jobRecord{Job: Job{Kind: JobSDSRemove, Object: objectRef{Kind: "sds", ID: "x", Name: "x"}, State: JobRunning, Created: start}, TotalCopies: 10}
	got := w.progress(rec, start.Add(10*time.Second))
	if got.Percent != 60 || got.ETASeconds == nil || *got.ETASeconds != 7 || got.State != JobRunning {
		t.Errorf("6 of 10 moved in 10 s: %+v eta %v", got.Job, got.ETASeconds)
	}
	w.sdss["x"] = model.SDS{ID: "x", Name: "x", State: model.SDSNormal}
	if got := w.progress(rec, time.Now()); got.State != JobFailed || got.Error == nil || got.Error.Code != CodeConflict {
		t.Errorf("removal stopped: %+v", got.Job)
	}
	delete(w.sdss, "x")
	if got := w.progress(rec, time.Now()); got.State != JobSucceeded || got.Percent != 100 {
		t.Errorf("removed: %+v", got.Job)
	}
}

// TestRenamedSDSRestarts: an SDS renamed through the API still finds its
// object when its daemon (started with the old --name) restarts.
func TestRenamedSDSRestarts(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{SDSs: 3, DevicesPerSDS: 1, PGCount: 8})
	e := newClusterEnv(t, c)
	e.ok(200, "PATCH", "/api/v1/sds/sds1", e.admin, `{"name":"alpha"}`)
	c.StopSDS(0)
	c.StartSDS(0) // fails the test unless sds1's daemon publishes its liveness again
	waitFor(t, 10*time.Second, "alpha up", func() bool { return e.ok(200, "GET", "/api/v1/sds/alpha", e.admin, "")["up"] == true })
}
