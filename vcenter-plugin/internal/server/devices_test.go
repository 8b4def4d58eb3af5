package server_test

import (
	"context"
	"crypto/tls"
	"net/http/cookiejar"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cairn-storage/cairn/vcenter-plugin/internal/gateway"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/gatewayfake"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/maintenance"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/plan"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/progress"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/server"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/vcsimkit"
)

// TestDevicesAndMaintenanceStop: day-2 device add (a free disk is
// attached to the running SVM as an RDM, then added), device remove
// (the gateway's drain followed with its progress), the refusals, and
// stopping a roll, against the simulator kit and the in-memory array.
func TestDevicesAndMaintenanceStop(t *testing.T) {
	ctx := context.Background()
	array := gatewayfake.New()
	array.ResyncTime = 20 * time.Millisecond
	array.DrainTime = 400 * time.Millisecond
	kit, vc := vcsimkit.StartTest(t, vcsimkit.Options{LUNs: array, Guest: array.Hooks(nil)})
	dir := t.TempDir()
	cert, err := server.EnsureCertificate(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewUnstartedServer(nil)
	ts.TLS = &tls.Config{Certificates: []tls.Certificate{cert.TLS}}
	ts.StartTLS()
	defer ts.Close()
	log := progress.NewLog(5000, nil)
	srv, err := server.New(server.Config{VCenter: kit.URL, VCenterThumbprint: kit.Thumbprint, PublicURL: ts.URL, StateDir: dir,
		Certificate: cert, Gateway: func(gateway.Config) (gateway.API, error) { return array, nil }, Log: log,
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
	var e map[string]string
	if code := c.do("POST", "/api/v1/session", map[string]string{"username": kit.Username, "password": kit.Password}, nil); code != 200 {
		t.Fatalf("login %d", code)
	}
	var p plan.Plan
	c.do("POST", "/api/v1/plan/suggest", map[string]string{"datacenter": "DC0", "system": "cairn1", "template": "cairn-svm", "svm_cidr": "10.20.0.0/24", "iscsi_cidr": "10.30.0.0/24"}, &p)
	// esx-01 keeps its last disk out of the deployment: the one to add.
	h0 := &p.Hosts[0]
	spare := h0.Devices[len(h0.Devices)-1].Disk
	h0.Devices = h0.Devices[:len(h0.Devices)-1]
	var j server.Job
	if code := c.do("POST", "/api/v1/deploy", p, &j); code != 202 {
		t.Fatalf("deploy %d", code)
	}
	if j := waitJobLong(c, "deploy:cairn1"); j.State != "succeeded" {
		t.Fatalf("deploy %+v", j)
	}
	sds := "cairn-esx-01"

	// What the SVM could take.
	var dl server.SDSDisks
	if code := c.do("GET", "/api/v1/systems/cairn1/sds/"+sds+"/disks", nil, &dl); code != 200 || dl.Host != "esx-01.cairn.test" || dl.Pool == "" {
		t.Fatalf("disks %d %+v", code, dl)
	}
	byName := map[string]server.CandidateDisk{}
	for _, d := range dl.Disks {
		byName[d.CanonicalName] = d
	}
	if d := byName[spare]; !d.Available || d.Attached || d.Path != "/dev/disk/by-id/wwn-0x"+strings.TrimPrefix(spare, "naa.") {
		t.Fatalf("spare disk %+v", d)
	}
	if d := byName[h0.Devices[0].Disk]; d.Available || !strings.Contains(d.Reason, "already Cairn device") || !d.Attached {
		t.Fatalf("deployed disk %+v", d)
	}
	if d := byName[vcsimkit.NonRDMDisk]; d.Available || !strings.Contains(d.Reason, "raw mapping") {
		t.Fatalf("disk without serial %+v", d)
	}

	// Refusals, each with what to do; nothing changes.
	for _, bad := range []struct {
		body any
		code int
		msg  string
	}{
		{map[string]any{"disk": spare}, 400, "give the SDS"},
		{map[string]any{"sds": sds, "disk": spare, "pci": "0000:01:00.0"}, 400, "one disk"},
		{map[string]any{"sds": "nope", "disk": spare}, 404, "pick one of its SDSs"},
		{map[string]any{"sds": sds, "disk": "naa.0000"}, 409, "has no disk naa.0000"},
		{map[string]any{"sds": sds, "disk": h0.Devices[0].Disk}, 409, "already Cairn device"},
		{map[string]any{"sds": sds, "disk": vcsimkit.NonRDMDisk}, 409, "raw mapping"},
		{map[string]any{"sds": sds, "pci": "0000:99:00.0"}, 409, "powered-off VM"},
	} {
		if code := c.do("POST", "/api/v1/systems/cairn1/devices", bad.body, &e); code != bad.code || !strings.Contains(e["error"], bad.msg) {
			t.Fatalf("add %v: %d %q, want %d %q", bad.body, code, e["error"], bad.code, bad.msg)
		}
	}
	before, _ := array.ListDevices(ctx)

	// Add the spare disk: attached to the running SVM, then a device.
	if code := c.do("POST", "/api/v1/systems/cairn1/devices", map[string]any{"sds": sds, "disk": spare}, &j); code != 202 {
		t.Fatalf("add %d", code)
	}
	addJob := server.DeviceAddJob("cairn1", sds, spare)
	if j := waitJobLong(c, addJob); j.State != "succeeded" {
		t.Fatalf("add job %+v", j)
	}
	after, _ := array.ListDevices(ctx)
	var added *gateway.Device
	for i := range after {
		if after[i].Path == "/dev/disk/by-id/wwn-0x"+strings.TrimPrefix(spare, "naa.") {
			added = &after[i]
		}
	}
	if len(after) != len(before)+1 || added == nil {
		t.Fatalf("devices after add: %+v", after)
	}
	f := find.NewFinder(vc.Client)
	dc, _ := f.Datacenter(ctx, "DC0")
	f.SetDatacenter(dc)
	vm, err := f.VirtualMachine(ctx, p.SVMName("esx-01.cairn.test"))
	if err != nil {
		t.Fatal(err)
	}
	var m mo.VirtualMachine
	if err := vm.Properties(ctx, vm.Reference(), []string{"config.hardware.device", "runtime.powerState"}, &m); err != nil {
		t.Fatal(err)
	}
	mapped := false
	for _, d := range m.Config.Hardware.Device {
		if vd, ok := d.(*types.VirtualDisk); ok {
			if b, ok := vd.Backing.(*types.VirtualDiskRawDiskMappingVer1BackingInfo); ok && b.DeviceName == "/vmfs/devices/disks/"+spare && b.CompatibilityMode == "physicalMode" {
				mapped = true
			}
		}
	}
	if !mapped || m.Runtime.PowerState != types.VirtualMachinePowerStatePoweredOn {
		t.Fatalf("the SVM does not map %s (or is %s)", spare, m.Runtime.PowerState)
	}
	if !planHas(t, dir, spare) {
		t.Fatal("the saved plan does not list the added disk")
	}
	var dl2 server.SDSDisks
	if code := c.do("GET", "/api/v1/systems/cairn1/sds/"+sds+"/disks", nil, &dl2); code != 200 {
		t.Fatalf("disks after add: %d", code)
	}
	for _, d := range dl2.Disks {
		if d.CanonicalName == spare && (d.Available || !d.Attached) {
			t.Fatalf("added disk still offered: %+v", d)
		}
	}

	// Remove it: the gateway's refusal is passed on; then the drain, with
	// progress events.
	array.FailNext("RemoveDevice", &gateway.StatusError{Method: "POST", Path: "/api/v1/devices/x/remove", Status: 409, Message: "the rest of the pool cannot hold the data on two fault domains: add a device first"})
	if code := c.do("POST", "/api/v1/systems/cairn1/devices/"+added.ID+"/remove", nil, &e); code != 409 || !strings.Contains(e["error"], "add a device first") {
		t.Fatalf("refused remove: %d %v", code, e)
	}
	if code := c.do("POST", "/api/v1/systems/cairn1/devices/nope/remove", nil, &e); code != 404 || !strings.Contains(e["error"], "refresh the list") {
		t.Fatalf("remove of an unknown device: %d %v", code, e)
	}
	if code := c.do("POST", "/api/v1/systems/cairn1/devices/"+added.ID+"/remove", nil, &j); code != 202 {
		t.Fatalf("remove %d %v", code, j)
	}
	name := added.Name
	if name == "" {
		name = added.ID
	}
	rmJob := server.DeviceRemoveJob("cairn1", name)
	if code := c.do("POST", "/api/v1/systems/cairn1/devices/"+added.ID+"/remove", nil, &e); code != 409 || !strings.Contains(e["error"], "follow it") {
		t.Fatalf("second remove while draining: %d %v", code, e)
	}
	if j := waitJobLong(c, rmJob); j.State != "succeeded" {
		t.Fatalf("remove job %+v", j)
	}
	var percents []float64
	for _, ev := range log.Since(0, rmJob) {
		if ev.Percent != nil {
			percents = append(percents, *ev.Percent)
		}
	}
	if len(percents) < 3 || percents[len(percents)-1] != 100 {
		t.Fatalf("drain progress %v", percents)
	}
	for i := 1; i < len(percents); i++ {
		if percents[i] < percents[i-1] {
			t.Fatalf("drain progress goes back: %v", percents)
		}
	}
	if now, _ := array.ListDevices(ctx); len(now) != len(before) {
		t.Fatalf("device not deleted: %d devices", len(now))
	}
	if planHas(t, dir, spare) {
		t.Fatal("the saved plan still lists the removed disk")
	}

	// Maintenance stop: refused without a roll; during the operator's
	// patch step of esx-02 it brings esx-02 back and the job ends stopped.
	if code := c.do("POST", "/api/v1/maintenance/cairn1/stop", nil, &e); code != 409 || !strings.Contains(e["error"], "nothing to stop") {
		t.Fatalf("stop without a roll: %d %v", code, e)
	}
	req := map[string]any{"by": "host", "hosts": []string{"esx-01.cairn.test", "esx-02.cairn.test", "esx-03.cairn.test"}}
	if code := c.do("POST", "/api/v1/maintenance/cairn1", req, &j); code != 202 {
		t.Fatalf("roll %d", code)
	}
	waitLog(t, log, "maintenance:cairn1", "patch and reboot esx-01.cairn.test")
	if code := c.do("POST", "/api/v1/maintenance/cairn1/continue", nil, nil); code != 204 {
		t.Fatalf("continue %d", code)
	}
	waitLog(t, log, "maintenance:cairn1", "patch and reboot esx-02.cairn.test")
	var sp maintenance.StopPlan
	if code := c.do("POST", "/api/v1/maintenance/cairn1/stop", nil, &sp); code != 202 || !sp.Unpatched || sp.Hosts[0] != "esx-02.cairn.test" || len(sp.Actions) < 2 {
		t.Fatalf("stop %d %+v", code, sp)
	}
	if j := waitJobLong(c, "maintenance:cairn1"); j.State != "stopped" || !strings.Contains(j.Error, "continues with esx-03.cairn.test") {
		t.Fatalf("stopped roll job %+v", j)
	}
	var systems []server.SystemView
	c.do("GET", "/api/v1/systems", nil, &systems)
	if ms := systems[0].Maintenance; ms == nil || !ms.Stopped || ms.DoneUnits != 2 || len(ms.Unpatched) != 1 {
		t.Fatalf("system maintenance view %+v", ms)
	}
	for _, s := range systems[0].SDSs {
		if s.State != gateway.SDSNormal {
			t.Fatalf("sds %s left %s", s.Name, s.State)
		}
	}
	// Resume: the same request continues with esx-03.
	if code := c.do("POST", "/api/v1/maintenance/cairn1", req, &j); code != 202 {
		t.Fatalf("resume %d", code)
	}
	waitLog(t, log, "maintenance:cairn1", "patch and reboot esx-03.cairn.test")
	if code := c.do("POST", "/api/v1/maintenance/cairn1/continue", nil, nil); code != 204 {
		t.Fatalf("continue %d", code)
	}
	if j := waitJobLong(c, "maintenance:cairn1"); j.State != "succeeded" {
		t.Fatalf("resumed roll %+v", j)
	}
}

func planHas(t *testing.T, dir, disk string) bool {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "plan-cairn1.json"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Contains(string(b), `"`+disk+`"`)
}

func waitLog(t *testing.T, log *progress.Log, job, msg string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		for _, ev := range log.Since(0, job) {
			if strings.Contains(ev.Message, msg) {
				return
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no event %q in %s", msg, job)
}

// waitJobLong is client.waitJob with room for a loaded machine (the
// deploy of four SVMs under -race).
func waitJobLong(c *client, name string) server.Job {
	c.t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
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
