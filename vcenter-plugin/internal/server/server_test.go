package server_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/vmware/govmomi/property"
	"github.com/vmware/govmomi/session"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cairn-storage/cairn/vcenter-plugin/internal/gateway"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/gatewayfake"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/inventory"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/plan"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/progress"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/server"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/vcsimkit"
)

type client struct {
	t    *testing.T
	base string
	http *http.Client
}

func (c *client) do(method, path string, body any, out any) int {
	c.t.Helper()
	var r io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		r = bytes.NewReader(b)
	}
	return c.raw(method, path, "", r, out)
}

// raw sends body as it is, with Content-Type ctype (none if empty).
func (c *client) raw(method, path, ctype string, body io.Reader, out any) int {
	c.t.Helper()
	req, _ := http.NewRequest(method, c.base+path, body)
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if out != nil && len(data) > 0 {
		if err := json.Unmarshal(data, out); err != nil {
			c.t.Fatalf("%s %s: %v: %s", method, path, err, data)
		}
	}
	return resp.StatusCode
}

func (c *client) waitJob(name string) server.Job {
	c.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var jobs []server.Job
		c.do("GET", "/api/v1/jobs", nil, &jobs)
		for _, j := range jobs {
			if j.Name == name && j.State != "running" {
				return j
			}
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("job %s still running: %+v", name, jobs)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestServer(t *testing.T) {
	ctx := context.Background()
	array := gatewayfake.New()
	array.ResyncTime = 20 * time.Millisecond
	kit, vc := vcsimkit.StartTest(t, vcsimkit.Options{LUNs: array, Guest: array.Hooks(nil)})
	dir := t.TempDir()
	cert, err := server.EnsureCertificate(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	again, err := server.EnsureCertificate(dir, nil)
	if err != nil || again.SHA256 != cert.SHA256 {
		t.Fatal("certificate not reused on restart")
	}
	ts := httptest.NewUnstartedServer(nil)
	ts.TLS = &tls.Config{Certificates: []tls.Certificate{cert.TLS}}
	ts.StartTLS()
	defer ts.Close()
	srv, err := server.New(server.Config{VCenter: kit.URL, VCenterThumbprint: kit.Thumbprint, PublicURL: ts.URL, StateDir: dir,
		Certificate: cert, Gateway: func(gateway.Config) (gateway.API, error) { return array, nil },
		ReadyTimeout: 3 * time.Second, PollInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ts.Config.Handler = srv
	jar, _ := cookiejar.New(nil)
	hc := ts.Client()
	hc.Jar = jar
	c := &client{t: t, base: ts.URL, http: hc}

	// The API page, manifest and extension descriptor need no session.
	resp, err := hc.Get(ts.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(page), "/api/v1/maintenance/{system}/continue") {
		t.Fatalf("index page: %s", page)
	}
	// The page is HTML: what the route table says is escaped.
	if !strings.Contains(string(page), "<code>/api/v1/events?after=SEQ&amp;job=NAME</code>") || strings.Contains(string(page), `{"username"`) {
		t.Fatalf("index page does not escape the route table: %s", page)
	}
	var manifest map[string]any
	c.do("GET", "/ui/plugin.json", nil, &manifest)
	if manifest["manifestVersion"] != "1.1.0" || manifest["objects"].(map[string]any)["HostSystem"] == nil || manifest["global"] == nil {
		t.Fatalf("manifest %v", manifest)
	}
	var ext server.Descriptor
	c.do("GET", "/api/v1/extension", nil, &ext)
	if ext.Key != server.ExtensionKey || ext.ServerThumbprint != cert.SHA1 || ext.ClientURL != ts.URL+"/ui/plugin.json" || ext.ClientType != "vsphere-client-remote" || len(ext.TaskTypes) != 3 {
		t.Fatalf("extension %+v", ext)
	}
	// The server entry is the manifest server: plugin.json's full URL, the
	// SHA-256 thumbprint and the PEM that matches it.
	if ext.ServerType != "MANIFEST_SERVER" || ext.ServerURL != ts.URL+"/ui/plugin.json" || ext.ServerSHA256 != cert.SHA256 {
		t.Fatalf("extension server %+v", ext)
	}
	blk, _ := pem.Decode([]byte(ext.ServerCertificate))
	if blk == nil || blk.Type != "CERTIFICATE" {
		t.Fatalf("server certificate is not PEM: %q", ext.ServerCertificate)
	}
	if sum := sha256.Sum256(blk.Bytes); !strings.EqualFold(strings.ReplaceAll(ext.ServerSHA256, ":", ""), hex.EncodeToString(sum[:])) {
		t.Fatal("server_thumbprint_sha256 is not the SHA-256 of server_certificate")
	}
	if x := server.Extension(ts.URL, cert).Server[0]; x.ServerThumbprint != cert.SHA256 || x.ServerCertificate != ext.ServerCertificate {
		t.Fatalf("registered server entry %+v", x)
	}
	if err := server.RegisterExtension(ctx, vc.Client, server.Extension(ts.URL, cert)); err != nil {
		t.Fatal(err)
	}
	if err := server.RegisterExtension(ctx, vc.Client, server.Extension(ts.URL, cert)); err != nil {
		t.Fatalf("re-register: %v", err)
	}

	// Sessions: nothing without one; a wrong password is refused; the
	// standalone login works.
	var e map[string]string
	if code := c.do("GET", "/api/v1/inventory", nil, &e); code != 401 || !strings.Contains(e["error"], "POST /api/v1/session") {
		t.Fatalf("no session: %d %v", code, e)
	}
	if code := c.do("POST", "/api/v1/session", map[string]string{"username": kit.Username, "password": "wrong"}, &e); code != 401 {
		t.Fatalf("wrong password: %d %v", code, e)
	}
	var who map[string]string
	if code := c.do("POST", "/api/v1/session", map[string]string{"username": kit.Username, "password": kit.Password}, &who); code != 200 || who["user"] != kit.Username {
		t.Fatalf("login: %d %v", code, who)
	}
	_ = session.NewManager(vc.Client)

	var inv inventory.Inventory
	if code := c.do("GET", "/api/v1/inventory", nil, &inv); code != 200 || len(inv.Datacenters[0].Hosts) != 4 {
		t.Fatalf("inventory %d %+v", code, inv)
	}
	var p plan.Plan
	if code := c.do("POST", "/api/v1/plan/suggest", map[string]string{"datacenter": "DC0", "system": "cairn1", "template": "cairn-svm", "svm_cidr": "10.20.0.0/24", "iscsi_cidr": "10.30.0.0/24"}, &p); code != 200 {
		t.Fatalf("suggest %d", code)
	}
	var val struct {
		Valid    bool           `json:"valid"`
		Problems []plan.Problem `json:"problems"`
	}
	c.do("POST", "/api/v1/plan/validate", p, &val)
	if !val.Valid {
		t.Fatalf("suggested plan invalid: %+v", val.Problems)
	}
	bad := p
	bad.Hosts = append([]plan.Host(nil), p.Hosts...)
	bad.Hosts[1].SVMIP = bad.Hosts[0].SVMIP
	c.do("POST", "/api/v1/plan/validate", bad, &val)
	if val.Valid || len(val.Problems) == 0 || val.Problems[0].Field != "hosts[1].svm_ip" {
		t.Fatalf("duplicate address validated: %+v", val)
	}

	// Deploy while watching the event stream.
	streamCtx, stopStream := context.WithCancel(ctx)
	defer stopStream()
	req, _ := http.NewRequestWithContext(streamCtx, "GET", ts.URL+"/api/v1/events?job=deploy:cairn1", nil)
	sresp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer sresp.Body.Close()
	if ct := sresp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("events content type %s", ct)
	}
	got := make(chan progress.Event, 1000)
	go func() {
		sc := bufio.NewScanner(sresp.Body)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				var ev progress.Event
				if json.Unmarshal([]byte(data), &ev) == nil {
					got <- ev
				}
			}
		}
		close(got)
	}()
	var j server.Job
	if code := c.do("POST", "/api/v1/deploy", p, &j); code != 202 || j.Name != "deploy:cairn1" {
		t.Fatalf("deploy %d %+v", code, j)
	}
	if j := c.waitJob("deploy:cairn1"); j.State != "succeeded" {
		t.Fatalf("deploy job %+v", j)
	}
	sawDone, lastSeq := false, int64(0)
	timeout := time.After(10 * time.Second)
	for !sawDone {
		select {
		case ev := <-got:
			if ev.Job != "deploy:cairn1" || ev.Seq <= lastSeq {
				t.Fatalf("event out of filter or order: %+v after %d", ev, lastSeq)
			}
			lastSeq = ev.Seq
			sawDone = strings.Contains(ev.Message, "system cairn1 deployed")
		case <-timeout:
			t.Fatal("no 'deployed' event on the stream")
		}
	}
	stopStream()

	// The deployment shows as a vCenter task of the plugin's extension.
	var tm mo.TaskManager
	if err := property.DefaultCollector(vc.Client).RetrieveOne(ctx, *vc.Client.ServiceContent.TaskManager, []string{"recentTask"}, &tm); err != nil {
		t.Fatal(err)
	}
	var tasks []mo.Task
	if err := property.DefaultCollector(vc.Client).Retrieve(ctx, tm.RecentTask, []string{"info"}, &tasks); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, tk := range tasks {
		found = found || (tk.Info.DescriptionId == progress.TaskDeploy && tk.Info.State == types.TaskInfoStateSuccess)
	}
	if !found {
		t.Fatal("no successful Cairn deploy task in vCenter")
	}

	// The read side: the deployed system with its gateway's view.
	var systems []server.SystemView
	if code := c.do("GET", "/api/v1/systems", nil, &systems); code != 200 || len(systems) != 1 {
		t.Fatalf("systems %d %+v", code, systems)
	}
	if sv := systems[0]; sv.Name != "cairn1" || !sv.Deploy.Completed || sv.Health == nil || sv.Health.Health.Status != gateway.HealthOK ||
		len(sv.SDSs) != 4 || len(sv.Devices) == 0 || sv.Unavailable != "" {
		t.Fatalf("system view %+v", sv)
	}

	// Volume to datastore.
	if code := c.do("POST", "/api/v1/volumes", map[string]any{"system": "cairn1", "volume": "ds1", "size_gib": 8}, &j); code != 202 {
		t.Fatalf("volumes %d", code)
	}
	if j := c.waitJob("volume:ds1"); j.State != "succeeded" {
		t.Fatalf("volume job %+v", j)
	}
	c.do("GET", "/api/v1/inventory", nil, &inv)
	for _, h := range inv.Datacenters[0].Hosts {
		mounted := false
		for _, ds := range h.Datastores {
			mounted = mounted || ds.Name == "ds1"
		}
		if !mounted {
			t.Fatalf("host %s lacks datastore ds1", h.Name)
		}
	}

	// QoS limits of the volume, live, with the gateway's reasons passed on.
	var vol gateway.Volume
	if code := c.do("PATCH", "/api/v1/systems/cairn1/volumes/ds1", map[string]any{"iops_limit": 2000, "bandwidth_limit": 100 << 20}, &vol); code != 200 ||
		vol.IOPSLimit != 2000 || vol.BandwidthLimit != 100<<20 || vol.EffectiveIOPSLimit != 2000 {
		t.Fatalf("set QoS: %d %+v", code, vol)
	}
	if code := c.do("PATCH", "/api/v1/systems/cairn1/volumes/ds1", map[string]any{"bandwidth_limit": 1000}, &e); code != 400 ||
		!strings.Contains(e["error"], "bandwidth_limit 1000 must be 0 (unlimited) or 65536") {
		t.Fatalf("bandwidth below the minimum: %d %+v", code, e)
	}
	if code := c.do("PATCH", "/api/v1/systems/cairn1/volumes/ds1", map[string]any{"iops_limit": 0}, &vol); code != 200 ||
		vol.IOPSLimit != 0 || vol.BandwidthLimit != 100<<20 {
		t.Fatalf("remove the IOPS limit (the refused change left the bandwidth alone): %d %+v", code, vol)
	}
	for _, bad := range []struct {
		path string
		body any
		code int
		msg  string
	}{
		{"/api/v1/systems/cairn1/volumes/nope", map[string]any{"iops_limit": 5}, 404, "nope"},
		{"/api/v1/systems/cairn1/volumes/ds1", map[string]any{}, 400, "nothing to change"},
		{"/api/v1/systems/cairn1/volumes/ds1", map[string]any{"iops": 5}, 400, "unknown field"},
		{"/api/v1/systems/other/volumes/ds1", map[string]any{"iops_limit": 5}, 409, "deploy it first"},
	} {
		if code := c.do("PATCH", bad.path, bad.body, &e); code != bad.code || !strings.Contains(e["error"], bad.msg) {
			t.Fatalf("PATCH %s %v: %d %q, want %d %q", bad.path, bad.body, code, e["error"], bad.code, bad.msg)
		}
	}

	// Grow the volume and its datastore (a job); a shrink is refused at once.
	if code := c.do("POST", "/api/v1/systems/cairn1/volumes/ds1/grow", map[string]any{"size_gib": 4}, &e); code != 400 || !strings.Contains(e["error"], "only grows") {
		t.Fatalf("shrink: %d %v", code, e)
	}
	if code := c.do("POST", "/api/v1/systems/cairn1/volumes/ds1/grow", map[string]any{"size_gib": 24}, &j); code != 202 {
		t.Fatalf("grow: %d", code)
	}
	if j := c.waitJob("grow:ds1"); j.State != "succeeded" {
		t.Fatalf("grow job %+v", j)
	}
	c.do("GET", "/api/v1/inventory", nil, &inv)
	for _, h := range inv.Datacenters[0].Hosts {
		for _, ds := range h.Datastores {
			if ds.Name == "ds1" && ds.Capacity != 24<<30-1<<20 {
				t.Fatalf("host %s sees ds1 at %d bytes after the grow", h.Name, ds.Capacity)
			}
		}
	}

	// Rolling maintenance driven by the operator's Continue; hooks cannot
	// be set through the API.
	if code := c.do("POST", "/api/v1/maintenance/cairn1", map[string]any{"by": "host", "hook": []string{"rm", "-rf", "/"}}, &e); code != 400 {
		t.Fatalf("hook through API: %d", code)
	}
	if code := c.do("POST", "/api/v1/maintenance/cairn1", map[string]any{"by": "faultset"}, &j); code != 202 {
		t.Fatalf("maintenance %d", code)
	}
	if code := c.do("POST", "/api/v1/maintenance/cairn1", map[string]any{"by": "faultset"}, &e); code != 409 {
		t.Fatalf("second roll while one runs: %d", code)
	}
	continues := 0
	deadline := time.Now().Add(30 * time.Second)
	for {
		var jobs []server.Job
		c.do("GET", "/api/v1/jobs", nil, &jobs)
		state := ""
		for _, jb := range jobs {
			if jb.Name == "maintenance:cairn1" {
				state = jb.State + jb.Error
			}
		}
		if state == "succeeded" {
			break
		}
		if state != "running" || time.Now().After(deadline) {
			t.Fatalf("maintenance job: %s", state)
		}
		if c.do("POST", "/api/v1/maintenance/cairn1/continue", nil, nil) == 204 {
			continues++
		}
		time.Sleep(10 * time.Millisecond)
	}
	if continues != 4 {
		t.Fatalf("%d operator confirmations for 4 fault sets", continues)
	}

	checkStatistics(t, c, srv, array) // statistics_test.go

	// Cross-origin writes are refused.
	req, _ = http.NewRequest("POST", ts.URL+"/api/v1/plan/validate", strings.NewReader("{}"))
	req.Header.Set("Origin", "https://evil.example")
	if r, _ := hc.Do(req); r.StatusCode != 403 {
		t.Fatalf("cross-origin: %d", r.StatusCode)
	}

	checkMapUnmapDelete(t, c, inv.Datacenters[0].Hosts[len(inv.Datacenters[0].Hosts)-1].Name)
}

// checkMapUnmapDelete: unmap ds1 from one host, map it back, delete it;
// bad requests answer at once with what to fix.
func checkMapUnmapDelete(t *testing.T, c *client, host string) {
	t.Helper()
	var e map[string]string
	var j server.Job
	base := "/api/v1/systems/cairn1/volumes/"
	for _, bad := range []struct {
		path string
		body any
		code int
		msg  string
	}{
		{base + "ds1/map", map[string]any{"hosts": []string{}}, 400, "at least one host"},
		{base + "ds1/map", map[string]any{"hosts": []string{host}, "access": "rw"}, 400, "read_write"},
		{base + "ds1/map", map[string]any{"hosts": []string{"esx-99"}}, 400, "not a host of system cairn1"},
		{base + "ds1/unmap", map[string]any{"host": host}, 400, "unknown field"},
		{base + "nope/unmap", map[string]any{"hosts": []string{host}}, 404, "does not exist"},
		{base + "ds1/delete", map[string]any{"confirm": "ds"}, 400, "type the volume's name"},
		{base + "nope/delete", map[string]any{"confirm": "nope"}, 404, "does not exist"},
		{"/api/v1/systems/other/volumes/ds1/map", map[string]any{"hosts": []string{host}}, 409, "deploy it first"},
	} {
		if code := c.do("POST", bad.path, bad.body, &e); code != bad.code || !strings.Contains(e["error"], bad.msg) {
			t.Fatalf("POST %s %v: %d %q, want %d %q", bad.path, bad.body, code, e["error"], bad.code, bad.msg)
		}
	}
	mountedOn := func() map[string]bool {
		var inv inventory.Inventory
		c.do("GET", "/api/v1/inventory", nil, &inv)
		out := map[string]bool{}
		for _, h := range inv.Datacenters[0].Hosts {
			for _, ds := range h.Datastores {
				if ds.Name == "ds1" {
					out[h.Name] = true
				}
			}
		}
		return out
	}
	if code := c.do("POST", base+"ds1/unmap", map[string]any{"hosts": []string{host}}, &j); code != 202 || j.Name != "unmap:ds1" {
		t.Fatalf("unmap: %d %+v", code, j)
	}
	if j := c.waitJob("unmap:ds1"); j.State != "succeeded" {
		t.Fatalf("unmap job %+v", j)
	}
	if m := mountedOn(); m[host] || len(m) == 0 {
		t.Fatalf("after unmap from %s, ds1 is mounted on %v", host, m)
	}
	if code := c.do("POST", base+"ds1/map", map[string]any{"hosts": []string{host}, "access": "read_write"}, &j); code != 202 {
		t.Fatalf("map: %d", code)
	}
	if j := c.waitJob("map:ds1"); j.State != "succeeded" {
		t.Fatalf("map job %+v", j)
	}
	if m := mountedOn(); !m[host] {
		t.Fatalf("after map to %s, ds1 is mounted on %v", host, m)
	}
	if code := c.do("POST", base+"ds1/delete", map[string]any{"confirm": "ds1"}, &j); code != 202 || j.Name != "delete:ds1" {
		t.Fatalf("delete: %d %+v", code, j)
	}
	if j := c.waitJob("delete:ds1"); j.State != "succeeded" {
		t.Fatalf("delete job %+v", j)
	}
	if m := mountedOn(); len(m) != 0 {
		t.Fatalf("after delete, ds1 is mounted on %v", m)
	}
	if code := c.do("POST", base+"ds1/delete", map[string]any{"confirm": "ds1"}, &e); code != 404 {
		t.Fatalf("delete of a deleted volume: %d %v", code, e)
	}
}
