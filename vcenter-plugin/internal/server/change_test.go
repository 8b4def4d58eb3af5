package server_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http/cookiejar"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cairn-storage/cairn/vcenter-plugin/internal/deploy"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/gateway"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/gatewayfake"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/plan"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/server"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/vcsimkit"
)

// Expanding a deployed system from 3 to 5 hosts, removing one and
// replacing a failed one, through the plugin server's API.
func TestServerExpandAndRemoveHost(t *testing.T) {
	ctx := context.Background()
	array := gatewayfake.New()
	kit, vc := vcsimkit.StartTest(t, vcsimkit.Options{Hosts: 5, LUNs: array, Guest: array.Hooks(nil)})
	dir := t.TempDir()
	cert, err := server.EnsureCertificate(dir, nil)
	if err != nil {
		t.Fatal(err)
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
	// The extension registers its privileges (the kit's administrator has them all).
	if err := server.RegisterExtension(context.Background(), vc.Client, server.Extension(ts.URL, cert)); err != nil {
		t.Fatal(err)
	}
	jar, _ := cookiejar.New(nil)
	hc := ts.Client()
	hc.Jar = jar
	c := &client{t: t, base: ts.URL, http: hc}
	if code := c.do("POST", "/api/v1/session", map[string]string{"username": kit.Username, "password": kit.Password}, nil); code != 200 {
		t.Fatalf("login %d", code)
	}
	resp, err := hc.Get(ts.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, route := range []string{"/api/v1/systems/{system}/expand", "/api/v1/systems/{system}/hosts/{host}/remove", "/api/v1/systems/{system}/hosts/{host}/replace", "/api/v1/systems/{system}/upgrade",
		"/api/v1/systems/{system}/upgrade/bundles", "/api/v1/systems/{system}/upgrade/svms"} {
		if !strings.Contains(string(page), route) {
			t.Fatalf("the API page does not list %s", route)
		}
	}

	var full plan.Plan
	if code := c.do("POST", "/api/v1/plan/suggest", map[string]string{"datacenter": "DC0", "system": "cairn1", "template": "cairn-svm", "svm_cidr": "10.20.0.0/24", "iscsi_cidr": "10.30.0.0/24"}, &full); code != 200 || len(full.Hosts) != 5 {
		t.Fatalf("suggest %d: %d hosts", code, len(full.Hosts))
	}
	deployed := full
	deployed.Hosts = slices.Clone(full.Hosts[:3])
	var j server.Job
	if code := c.do("POST", "/api/v1/deploy", deployed, &j); code != 202 {
		t.Fatalf("deploy %d", code)
	}
	if j := c.waitJob("deploy:cairn1"); j.State != "succeeded" {
		t.Fatalf("deploy job %+v", j)
	}
	if _, err := array.CreateVolume(ctx, gateway.VolumeSpec{Name: "vol1", Pool: "pool1", Size: 50 << 30}); err != nil {
		t.Fatal(err)
	}

	var e struct {
		Error    string         `json:"error"`
		Problems []plan.Problem `json:"problems"`
	}
	// Growing through the deploy endpoint would overwrite the deployed plan.
	if code := c.do("POST", "/api/v1/deploy", full, &e); code != 409 || !strings.Contains(e.Error, "/api/v1/systems/cairn1/expand") {
		t.Fatalf("deploy of a grown plan: %d %+v", code, e)
	}
	changed := full
	changed.StoragePool.SparePercent = 25
	if code := c.do("POST", "/api/v1/systems/cairn1/expand", changed, &e); code != 400 || len(e.Problems) != 1 || e.Problems[0].Field != "storage_pool" {
		t.Fatalf("expansion with a changed pool: %d %+v", code, e)
	}
	if code := c.do("POST", "/api/v1/systems/other/expand", full, &e); code != 400 || !strings.Contains(e.Error, `for system "cairn1"`) {
		t.Fatalf("expansion of another system: %d %+v", code, e)
	}
	if code := c.do("POST", "/api/v1/systems/cairn1/expand", full, &j); code != 202 || j.Name != "expand:cairn1" {
		t.Fatalf("expand %d %+v", code, j)
	}
	if j := c.waitJob("expand:cairn1"); j.State != "succeeded" {
		t.Fatalf("expand job %+v", j)
	}
	var systems []server.SystemView
	c.do("GET", "/api/v1/systems", nil, &systems)
	if len(systems) != 1 || len(systems[0].Hosts) != 5 || len(systems[0].SDSs) != 5 || systems[0].Unavailable != "" {
		t.Fatalf("systems after the expansion: %+v", systems)
	}

	if code := c.do("POST", "/api/v1/systems/cairn1/hosts/esx-01.cairn.test/remove", nil, &e); code != 409 || !strings.Contains(e.Error, "MDM member") {
		t.Fatalf("removing an MDM host: %d %+v", code, e)
	}
	if code := c.do("POST", "/api/v1/systems/cairn1/hosts/esx-09.cairn.test/remove", nil, &e); code != 404 {
		t.Fatalf("removing an unknown host: %d %+v", code, e)
	}
	if code := c.do("POST", "/api/v1/systems/cairn1/hosts/esx-05.cairn.test/remove", nil, &j); code != 202 || j.Name != "shrink:cairn1:esx-05.cairn.test" {
		t.Fatalf("remove %d %+v", code, j)
	}
	if j := c.waitJob("shrink:cairn1:esx-05.cairn.test"); j.State != "succeeded" {
		t.Fatalf("remove job %+v", j)
	}
	c.do("GET", "/api/v1/systems", nil, &systems)
	if len(systems) != 1 || len(systems[0].Hosts) != 4 || len(systems[0].SDSs) != 4 || slices.Contains(systems[0].Hosts, "esx-05.cairn.test") {
		t.Fatalf("systems after the removal: %+v", systems)
	}
	// The saved plan is the one the system has now: a re-deploy of it is a no-op.
	now := full
	now.Hosts = nil
	for _, h := range full.Hosts[:4] {
		h.TargetPortID = map[string]int{"esx-01.cairn.test": 1, "esx-02.cairn.test": 2, "esx-03.cairn.test": 3, "esx-04.cairn.test": 4}[h.Name]
		now.Hosts = append(now.Hosts, h)
	}
	if code := c.do("POST", "/api/v1/deploy", now, &j); code != 202 {
		t.Fatalf("re-deploy of the current plan: %d", code)
	}
	if j := c.waitJob("deploy:cairn1"); j.State != "succeeded" {
		t.Fatalf("re-deploy job %+v", j)
	}

	// esx-04 fails (its host stops responding, its SDS is down); its SVM is
	// replaced by one on the freed esx-05.
	spare := full.Hosts[4]
	if code := c.do("POST", "/api/v1/systems/cairn1/hosts/esx-01.cairn.test/replace", spare, &e); code != 409 || !strings.Contains(e.Error, "MDM member") {
		t.Fatalf("replacing an MDM host: %d %+v", code, e)
	}
	if code := c.do("POST", "/api/v1/systems/cairn1/hosts/esx-04.cairn.test/replace", plan.Host{Name: "esx-03.cairn.test"}, &e); code != 409 || !strings.Contains(e.Error, "already part of system") {
		t.Fatalf("replacing onto a host of the system: %d %+v", code, e)
	}
	if err := kit.FailHost("esx-04.cairn.test"); err != nil {
		t.Fatal(err)
	}
	svm := vcsimkit.SVM{Name: "cairn-cairn1-esx-04", Host: "esx-04.cairn.test", Properties: map[string]string{"cairn.mgmt.address": full.Hosts[3].SVMIP + "/24"}}
	if err := array.Hooks(nil).PoweredOff(ctx, svm); err != nil {
		t.Fatal(err)
	}
	if code := c.do("POST", "/api/v1/systems/cairn1/hosts/esx-04.cairn.test/replace", spare, &j); code != 202 || j.Name != "replace:cairn1:esx-04.cairn.test" {
		t.Fatalf("replace %d %+v", code, j)
	}
	if j := c.waitJob("replace:cairn1:esx-04.cairn.test"); j.State != "succeeded" {
		t.Fatalf("replace job %+v", j)
	}
	c.do("GET", "/api/v1/systems", nil, &systems)
	if len(systems) != 1 || len(systems[0].Hosts) != 4 || len(systems[0].SDSs) != 4 || !slices.Contains(systems[0].Hosts, "esx-05.cairn.test") || slices.Contains(systems[0].Hosts, "esx-04.cairn.test") {
		t.Fatalf("systems after the replacement: %+v", systems)
	}

	// The system rolled to a new version; refused first without one, for
	// a host not in it, and (in the job) without the bundle stored.
	if code := c.do("POST", "/api/v1/systems/cairn1/upgrade", map[string]string{}, &e); code != 400 || !strings.Contains(e.Error, "no version") {
		t.Fatalf("upgrade without a version: %d %+v", code, e)
	}
	if code := c.do("POST", "/api/v1/systems/cairn1/upgrade", deploy.UpgradeRequest{Version: "0.2.0", Hosts: []string{"esx-09.cairn.test"}}, &e); code != 400 || !strings.Contains(e.Error, "not part of system") {
		t.Fatalf("upgrade of a host not in the system: %d %+v", code, e)
	}
	if code := c.do("POST", "/api/v1/systems/cairn1/upgrade", deploy.UpgradeRequest{Version: "0.2.0"}, &j); code != 202 || j.Name != "upgrade:cairn1" {
		t.Fatalf("upgrade %d %+v", code, j)
	}
	if j := c.waitJob("upgrade:cairn1"); j.State != "failed" || !strings.Contains(j.Error, "no bundle of version 0.2.0") {
		t.Fatalf("upgrade job without the bundle %+v", j)
	}
	// The stop switch (deploy: TestUpgradeStopSwitch) with no roll running.
	if code := c.do("POST", "/api/v1/systems/cairn1/upgrade/stop", nil, &e); code != 409 || !strings.Contains(e.Error, "no upgrade is running on system cairn1") {
		t.Fatalf("stop with no upgrade running: %d %+v", code, e)
	}
	array.StoreBundle("0.2.0", false)
	if code := c.do("POST", "/api/v1/systems/cairn1/upgrade", deploy.UpgradeRequest{Version: "0.2.0"}, &j); code != 202 {
		t.Fatalf("upgrade %d %+v", code, j)
	}
	if j := c.waitJob("upgrade:cairn1"); j.State != "succeeded" {
		t.Fatalf("upgrade job %+v", j)
	}
	for _, h := range systems[0].Hosts {
		if v := array.Running()[plan.SVMHostname(h)]; v != "0.2.0" {
			t.Fatalf("SVM of %s runs %q after the upgrade: %v", h, v, array.Running())
		}
	}
	// The upgrade page's reads: the stored bundle, and every SVM's
	// updater done on the version, as the gateway reports them.
	var bundles server.UpgradeBundles
	if code := c.do("GET", "/api/v1/systems/cairn1/upgrade/bundles", nil, &bundles); code != 200 || bundles.System != "cairn1" ||
		len(bundles.Bundles) != 1 || bundles.Bundles[0].Version != "0.2.0" || len(bundles.Bundles[0].SHA256) != 64 || bundles.Bundles[0].Size <= 0 {
		t.Fatalf("upgrade bundles: %d %+v", code, bundles)
	}
	var svms server.UpgradeSVMs
	if code := c.do("GET", "/api/v1/systems/cairn1/upgrade/svms", nil, &svms); code != 200 || len(svms.SVMs) < len(systems[0].Hosts) {
		t.Fatalf("upgrade svms: %d %+v", code, svms)
	}
	for _, h := range systems[0].Hosts {
		i := slices.IndexFunc(svms.SVMs, func(s server.UpgradeSVM) bool { return s.Name == plan.SVMHostname(h) })
		if i < 0 || svms.SVMs[i].Running != "0.2.0" || svms.SVMs[i].Ordered != "0.2.0" || svms.SVMs[i].State != gateway.UpgradeDone {
			t.Fatalf("updater of %s: %+v", h, svms.SVMs)
		}
		// The host it runs on: what an upgrade request's hosts name.
		if svms.SVMs[i].Host != h {
			t.Fatalf("updater %s: host %q, want %q", svms.SVMs[i].Name, svms.SVMs[i].Host, h)
		}
	}
	for _, path := range []string{"/api/v1/systems/other/upgrade/bundles", "/api/v1/systems/other/upgrade/svms"} {
		e.Error = ""
		if code := c.do("GET", path, nil, &e); code != 404 || !strings.Contains(e.Error, "deploy it first") {
			t.Fatalf("GET %s: %d %+v", path, code, e)
		}
	}

	// A bundle uploaded through the plugin lands on the gateway, listed
	// with its own size and digest; what the gateway refuses comes back
	// with its reason, and nothing is stored.
	const upload = "/api/v1/systems/cairn1/upgrade/bundles"
	bundle := testBundle(t, "0.4.0")
	var up server.UploadedBundle
	sum := sha256.Sum256(bundle)
	if code := c.raw("POST", upload, "application/gzip", bytes.NewReader(bundle), &up); code != 201 || up.System != "cairn1" ||
		up.Bundle.Version != "0.4.0" || up.Bundle.Size != int64(len(bundle)) || up.Bundle.SHA256 != hex.EncodeToString(sum[:]) {
		t.Fatalf("upload: %d %+v", code, up)
	}
	bundles = server.UpgradeBundles{}
	if code := c.do("GET", "/api/v1/systems/cairn1/upgrade/bundles", nil, &bundles); code != 200 || len(bundles.Bundles) != 2 ||
		bundles.Bundles[1] != up.Bundle {
		t.Fatalf("bundles after the upload: %d %+v", code, bundles)
	}
	for _, bad := range []struct {
		ctype string
		body  io.Reader
		code  int
		says  string
	}{
		{"application/json", bytes.NewReader(bundle), 415, "sent as Content-Type application/gzip"},
		{"application/gzip", strings.NewReader(""), 400, "no bundle: send the file"},
		{"application/gzip", strings.NewReader("not a bundle"), 400, "invalid update bundle: not gzip"},
		{"application/gzip", bytes.NewReader(testBundle(t, "4.0")), 400, `version "4.0" is not a release number`},
		// Streamed (no length announced), one byte over the bound.
		{"application/gzip", io.LimitReader(zeros{}, gateway.MaxBundleSize+1), 413, "larger than the gateway's 256 MiB"},
	} {
		e.Error = ""
		if code := c.raw("POST", upload, bad.ctype, bad.body, &e); code != bad.code || !strings.Contains(e.Error, bad.says) {
			t.Fatalf("upload (%s): %d %q, want %d saying %q", bad.says, code, e.Error, bad.code, bad.says)
		}
	}
	e.Error = ""
	if code := c.raw("POST", "/api/v1/systems/other/upgrade/bundles", "application/gzip", bytes.NewReader(bundle), &e); code != 404 || !strings.Contains(e.Error, "deploy it first") {
		t.Fatalf("upload to an unknown system: %d %+v", code, e)
	}
	bundles = server.UpgradeBundles{}
	if c.do("GET", "/api/v1/systems/cairn1/upgrade/bundles", nil, &bundles); len(bundles.Bundles) != 2 {
		t.Fatalf("refused uploads stored something: %+v", bundles)
	}
}

// zeros reads as endless zero bytes.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// testBundle is an update bundle of version as `cairn bundle` lays it out:
// gzip, tar, manifest.json first, then the two binaries.
func testBundle(t *testing.T, version string) []byte {
	t.Helper()
	bins := map[string][]byte{"cairn": []byte("#!/bin/sh\necho " + version + "\n"), "cairnctl": []byte("#!/bin/sh\n")}
	files := map[string]string{}
	for n, b := range bins {
		s := sha256.Sum256(b)
		files[n] = hex.EncodeToString(s[:])
	}
	m, _ := json.Marshal(map[string]any{"format": 1, "version": version, "files": files})
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, f := range []struct {
		name string
		data []byte
	}{{"manifest.json", m}, {"cairn", bins["cairn"]}, {"cairnctl", bins["cairnctl"]}} {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: f.name, Mode: 0o755, Size: int64(len(f.data))}); err != nil {
			t.Fatal(err)
		}
		tw.Write(f.data)
	}
	tw.Close()
	zw.Close()
	return buf.Bytes()
}
