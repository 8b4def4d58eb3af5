package gateway

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairn-storage/cairn/appliance/internal/model"
	"github.com/cairn-storage/cairn/appliance/internal/testlog"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// holdSlowDevices makes e.prober hold "slow" paths until release.
func (e *env) holdSlowDevices() (release func()) {
	hold := make(chan struct{})
	e.prober.mu.Lock()
	e.prober.hold = hold
	e.prober.mu.Unlock()
	var once sync.Once
	return func() { once.Do(func() { close(hold) }) }
}

// idsFor returns the device ids the prober was asked to prepare for
// paths containing sub.
func (p *fakeProber) idsFor(sub string) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for i, c := range p.calls {
		if strings.Contains(c, sub) {
			out = append(out, p.ids[i])
		}
	}
	return out
}

// TestDeviceAddJob: a device add answers 202 with its job at once while the
// SDS prepares; a repeat meanwhile answers the same job (no second
// preparation); the device is not recorded until the SDS is done, then the
// job succeeds with the device as its result and its end is an event.
func TestDeviceAddJob(t *testing.T) {
	e := newEnv(t)
	e.cluster()
	a := e.admin
	release := e.holdSlowDevices()
	defer release()
	body := `{"name":"b-slow","sds":"b","pool":"p","path":"/dev/disk/by-id/slow-1"}`

	start := time.Now()
	st, v, h := e.doH("POST", "/api/v1/devices", a, body, nil)
	j, _ := v.(map[string]any)
	if st != 202 || j["kind"] != JobDeviceAdd || j["state"] != JobRunning || h.Get("Location") != "/api/v1/jobs/"+fmt.Sprint(j["id"]) {
		t.Fatalf("POST: %d %v %v", st, v, h)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Errorf("the answer waited for the preparation: %v", el)
	}
	if obj, _ := j["object"].(map[string]any); obj["kind"] != model.KindDevice || obj["name"] != "b-slow" || obj["id"] == "" {
		t.Errorf("job object %v", j["object"])
	}
	id := j["id"].(string)
	// A repeat (same path on the same SDS, even without the name) while it
	// runs: the same job, and the SDS is asked once.
	for _, again := range []string{body, `{"sds":"b","pool":"p","path":"/dev/disk/by-id/slow-1"}`} {
		st, v, h = e.doH("POST", "/api/v1/devices", a, again, nil)
		if j2, _ := v.(map[string]any); st != 202 || j2["id"] != id || h.Get("Location") != "/api/v1/jobs/"+id {
			t.Errorf("repeat while running: %d %v", st, v)
		}
	}
	_, l := e.do("GET", "/api/v1/jobs?kind=device-add&state=running", a, "")
	if n := len(l.([]any)); n != 1 {
		t.Errorf("%d running device-add jobs, want 1: %v", n, l)
	}
	if st, _ := e.do("GET", "/api/v1/devices/b-slow", a, ""); st != 404 {
		t.Errorf("device recorded before its SDS prepared it: GET %d", st)
	}
	release()
	done := e.waitJob(a, id)
	res, _ := done["result"].(map[string]any)
	if done["state"] != JobSucceeded || done["percent"] != 100.0 || res["name"] != "b-slow" || res["capacity"] != float64(100*GiB) || res["state"] != model.DeviceNormal {
		t.Errorf("finished job %v", done)
	}
	if ids := e.prober.idsFor("slow-1"); len(ids) != 1 || ids[0] != done["object"].(map[string]any)["id"] {
		t.Errorf("SDS asked to prepare %v, want once with the job's device id", ids)
	}
	d := e.ok(200, "GET", "/api/v1/devices/b-slow", a, "")
	if d["id"] != done["object"].(map[string]any)["id"] {
		t.Errorf("device %v is not the job's", d)
	}
	// After the job: a repeat answers the device.
	if got := e.ok(200, "POST", "/api/v1/devices", a, body); got["id"] != d["id"] {
		t.Errorf("repeat after the job: %v", got)
	}
	_, evs := e.do("GET", "/api/v1/events?object=b-slow", a, "")
	if !strings.Contains(fmt.Sprint(evs), "job "+id+" (device-add): device b-slow added") {
		t.Errorf("no event for the job's end: %v", evs)
	}
}

// TestDeviceAddTakeover: a gateway that stops while the SDS prepares a
// device leaves its job running; another gateway (here: a restart on the
// same etcd) takes it over, prepares the same device id again and records
// it.
func TestDeviceAddTakeover(t *testing.T) {
	e := newEnv(t)
	e.cluster()
	a := e.admin
	release := e.holdSlowDevices()
	defer release()
	j := e.ok(202, "POST", "/api/v1/devices", a, `{"name":"c-slow","sds":"c","pool":"p","path":"/dev/disk/by-id/slow-2"}`)
	id := j["id"].(string)
	devID := j["object"].(map[string]any)["id"].(string)
	waitFor(t, 10*time.Second, "the first gateway asks the SDS", func() bool { return len(e.prober.idsFor("slow-2")) == 1 })
	e.stop() // the first gateway stops mid-preparation
	waitFor(t, 10*time.Second, "its claim is dropped", func() bool {
		r, err := e.etcd.Get(context.Background(), model.JobClaimPrefix+id)
		return err == nil && len(r.Kvs) == 0
	})
	if got := e.ok(200, "GET", "/api/v1/jobs/"+id, a, ""); got["state"] != JobRunning {
		t.Fatalf("job after its gateway stopped: %v", got)
	}

	// The restarted gateway: its own prober, which prepares at once.
	second := &fakeProber{}
	restarted := &env{t: t, etcd: e.etcd, dir: e.dir, logs: &testlog.Buffer{}, prober: second}
	restarted.serve(Config{Etcd: e.etcd, StateDir: e.dir, Devices: second, ObserveInterval: 100 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(restarted.logs, nil))})
	go restarted.srv.Run(restarted.ctx)
	done := restarted.waitJob(restarted.admin, id)
	if done["state"] != JobSucceeded {
		t.Fatalf("job after the takeover: %v", done)
	}
	if ids := second.idsFor("slow-2"); !slices.Equal(ids, []string{devID}) {
		t.Errorf("the new gateway prepared %v, want the job's device id %s once", ids, devID)
	}
	if d := restarted.ok(200, "GET", "/api/v1/devices/c-slow", restarted.admin, ""); d["id"] != devID || d["capacity"] != float64(100*GiB) {
		t.Errorf("device after the takeover: %v", d)
	}
	if !strings.Contains(restarted.logs.String(), "taking it over") {
		t.Error("the takeover is not logged")
	}
	if r, _ := e.etcd.Get(context.Background(), model.JobIndexPrefix, clientv3.WithPrefix()); len(r.Kvs) != 0 {
		t.Errorf("job index left behind: %v", r.Kvs)
	}
}

// TestDeviceAddRefusedAtOnce: what the gateway can check itself is refused
// in the request, before any job.
func TestDeviceAddRefusedAtOnce(t *testing.T) {
	e := newEnv(t)
	e.cluster()
	a := e.admin
	e.failsWith(404, CodeNotFound, "sds", `SDS "zz" not found`, "POST", "/api/v1/devices", a, `{"sds":"zz","pool":"p","path":"/dev/disk/by-id/x"}`)
	e.failsWith(404, CodeNotFound, "pool", `not found`, "POST", "/api/v1/devices", a, `{"sds":"a","pool":"nope","path":"/dev/disk/by-id/x"}`)
	e.failsWith(409, CodeAlreadyExists, "", `device "a1" already exists`, "POST", "/api/v1/devices", a, `{"name":"a1","sds":"b","pool":"p","path":"/dev/disk/by-id/x"}`)
	e.failsWith(400, CodeInvalid, "path", "", "POST", "/api/v1/devices", a, `{"sds":"a","pool":"p","path":7}`)
	_, l := e.do("GET", "/api/v1/jobs?kind=device-add", a, "")
	if n := len(l.([]any)); n != 1 { // cluster()'s a1
		t.Errorf("%d device-add jobs after refusals, want 1: %v", n, l)
	}
}
