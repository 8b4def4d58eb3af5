package server_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cairn-storage/cairn/vcenter-plugin/internal/deploy"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/gateway"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/gatewayfake"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/plan"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/server"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/vcsimkit"
)

// TestRights: vSphere users act on a system with the plugin's privileges
// as vCenter grants them on the system's cluster (roles, groups,
// inheritance, a child's permission overriding its parent's), and the
// gateway sees each request as the service user of the matching role,
// naming the vSphere user (the fake gateway enforces roles and keeps the
// audit trail as the real one does).
func TestRights(t *testing.T) {
	ctx := context.Background()
	array := gatewayfake.New()
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
	srv, err := server.New(server.Config{VCenter: kit.URL, VCenterThumbprint: kit.Thumbprint, PublicURL: ts.URL, StateDir: dir,
		Certificate: cert, Gateway: array.Connect, ReadyTimeout: 3 * time.Second, PollInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ts.Config.Handler = srv

	// The extension registers the privileges; a vCenter administrator
	// makes roles of them and gives them out.
	if err := server.RegisterExtension(ctx, vc.Client, server.Extension(ts.URL, cert)); err != nil {
		t.Fatal(err)
	}
	am := object.NewAuthorizationManager(vc.Client)
	monRole, err := am.AddRole(ctx, "Cairn monitor", []string{server.PrivMonitor})
	if err != nil {
		t.Fatal(err)
	}
	opRole, err := am.AddRole(ctx, "Cairn operator", []string{server.PrivMonitor, server.PrivOperate})
	if err != nil {
		t.Fatal(err)
	}
	f := find.NewFinder(vc.Client)
	dc, err := f.Datacenter(ctx, vcsimkit.Datacenter)
	if err != nil {
		t.Fatal(err)
	}
	f.SetDatacenter(dc)
	cl, err := f.ClusterComputeResource(ctx, vcsimkit.ClusterName)
	if err != nil {
		t.Fatal(err)
	}
	kit.AddUser("mon@vsphere.local", "pw-mon-1234")
	kit.AddUser("op@vsphere.local", "pw-op-12345", "storage-ops")
	kit.AddUser("fenced@vsphere.local", "pw-fenced-12", "storage-ops")
	kit.AddUser("nobody@vsphere.local", "pw-nobody-12")
	set := func(e object.Reference, ps ...types.Permission) {
		t.Helper()
		if err := am.SetEntityPermissions(ctx, e.Reference(), ps); err != nil {
			t.Fatal(err)
		}
	}
	// mon: the monitor role on the cluster itself; the operators' group:
	// the operator role on the datacenter, inherited by the cluster;
	// fenced, one of them, is read-only on the cluster (a child's
	// permission overrides the parent's); nobody: read-only everywhere.
	set(cl, types.Permission{Principal: "mon@vsphere.local", RoleId: monRole, Propagate: true})
	set(dc, types.Permission{Principal: "storage-ops", Group: true, RoleId: opRole, Propagate: true})
	set(cl, types.Permission{Principal: "fenced@vsphere.local", RoleId: -2, Propagate: true})
	root := vc.Client.ServiceContent.RootFolder
	set(object.NewFolder(vc.Client, root), types.Permission{Principal: "nobody@vsphere.local", RoleId: -2, Propagate: true})

	// The kit's own user (Admin on the root folder) deploys.
	admin := signIn(t, ts, kit.Username, kit.Password)
	var p plan.Plan
	if code := admin.do("POST", "/api/v1/plan/suggest", map[string]string{"datacenter": "DC0", "system": "cairn1", "template": "cairn-svm", "svm_cidr": "10.20.0.0/24", "iscsi_cidr": "10.30.0.0/24"}, &p); code != 200 {
		t.Fatalf("suggest %d", code)
	}
	op := tokenClient(t, ts, kit, "op@vsphere.local", "pw-op-12345")
	var e map[string]string
	if code := op.do("POST", "/api/v1/deploy", p, &e); code != 403 || e["privilege"] != server.PrivAdminister || e["object"] != "cluster "+vcsimkit.ClusterName {
		t.Fatalf("operator deploys: %d %v", code, e)
	}
	var j server.Job
	if code := admin.do("POST", "/api/v1/deploy", p, &e); code != 202 {
		t.Fatalf("deploy %d %v", code, e)
	}
	if j := admin.waitJob("deploy:cairn1"); j.State != "succeeded" {
		t.Fatalf("deploy job %+v", j)
	}
	if got := strings.Join(array.Users(), ","); got != "admin,vcenter-admin,vcenter-monitor,vcenter-operator" {
		t.Fatalf("gateway users after deploy: %s", got)
	}

	// A monitor reads, and is refused every change with what it needs.
	mon := signIn(t, ts, "mon@vsphere.local", "pw-mon-1234")
	var systems []server.SystemView
	if code := mon.do("GET", "/api/v1/systems", nil, &systems); code != 200 || len(systems) != 1 || systems[0].Health == nil || systems[0].NeedsPrivilege != nil {
		t.Fatalf("monitor reads systems: %d %+v", code, systems)
	}
	refused := func(c *client, method, path string, body any, priv string) {
		t.Helper()
		var e map[string]string
		if code := c.do(method, path, body, &e); code != 403 || e["privilege"] != priv || e["object"] != "cluster "+vcsimkit.ClusterName ||
			!strings.Contains(e["error"], "needs the privilege "+priv) {
			t.Fatalf("%s %s: %d %v, want 403 for %s", method, path, code, e, priv)
		}
	}
	refused(mon, "POST", "/api/v1/volumes", map[string]any{"system": "cairn1", "volume": "m1", "size_gib": 8}, server.PrivOperate)
	refused(mon, "PATCH", "/api/v1/systems/cairn1/volumes/m1", map[string]any{"iops_limit": 100}, server.PrivOperate)
	refused(mon, "POST", "/api/v1/systems/cairn1/volumes/m1/grow", map[string]any{"size_gib": 16}, server.PrivOperate)
	refused(mon, "POST", "/api/v1/maintenance/cairn1", map[string]any{"by": "host"}, server.PrivOperate)
	refused(mon, "POST", "/api/v1/maintenance/cairn1/continue", nil, server.PrivOperate)
	// The upgrade page: a monitor reads the bundles and updaters, and
	// is refused the roll and its stop (Administer, as deploying).
	var ups server.UpgradeSVMs
	if code := mon.do("GET", "/api/v1/systems/cairn1/upgrade/svms", nil, &ups); code != 200 || len(ups.SVMs) == 0 {
		t.Fatalf("monitor reads the updaters: %d %+v", code, ups)
	}
	var bundles server.UpgradeBundles
	if code := mon.do("GET", "/api/v1/systems/cairn1/upgrade/bundles", nil, &bundles); code != 200 || bundles.Bundles == nil {
		t.Fatalf("monitor reads the bundles: %d %+v", code, bundles)
	}
	refused(mon, "POST", "/api/v1/systems/cairn1/upgrade", map[string]any{"version": "0.2.0"}, server.PrivAdminister)
	refused(mon, "POST", "/api/v1/systems/cairn1/upgrade/stop", nil, server.PrivAdminister)
	refused(mon, "POST", "/api/v1/systems/cairn1/upgrade/bundles", nil, server.PrivAdminister)

	// An operator (through its group, inherited from the datacenter)
	// creates a volume and changes its QoS: the gateway sees the
	// operator service user acting for the vSphere user.
	if code := op.do("POST", "/api/v1/volumes", map[string]any{"system": "cairn1", "volume": "ds1", "size_gib": 8}, &j); code != 202 {
		t.Fatalf("operator volume: %d", code)
	}
	if j := op.waitJob("volume:ds1"); j.State != "succeeded" {
		t.Fatalf("volume job %+v", j)
	}
	var vol gateway.Volume
	if code := op.do("PATCH", "/api/v1/systems/cairn1/volumes/ds1", map[string]any{"iops_limit": 2000}, &vol); code != 200 || vol.IOPSLimit != 2000 {
		t.Fatalf("operator QoS: %d %+v", code, vol)
	}
	// ... but administers nothing on the gateway (its service user is an operator).
	st := loadState(t, dir, &p)
	opAPI, _ := array.Connect(gateway.Config{Username: deploy.ServiceUser("operator"), Password: st.Secrets.ServiceUsers["operator"], OnBehalfOf: "op@vsphere.local"})
	if _, err := opAPI.(gateway.Users).CreateUser(ctx, gateway.UserSpec{Name: "x", Role: "admin", Password: "password-x"}); err == nil || !strings.Contains(err.Error(), "needs role admin") {
		t.Fatalf("operator service user creates users: %v", err)
	}
	// fenced is in the operators' group, but read-only on the cluster.
	fenced := tokenClient(t, ts, kit, "fenced@vsphere.local", "pw-fenced-12")
	refused(fenced, "POST", "/api/v1/volumes", map[string]any{"system": "cairn1", "volume": "f1", "size_gib": 8}, server.PrivOperate)
	refused(fenced, "PATCH", "/api/v1/systems/cairn1/volumes/ds1", map[string]any{"iops_limit": 1}, server.PrivOperate)
	// nobody sees the system's name but not its state, and is told why.
	nobody := signIn(t, ts, "nobody@vsphere.local", "pw-nobody-12")
	systems = nil
	if code := nobody.do("GET", "/api/v1/systems", nil, &systems); code != 200 || len(systems) != 1 || systems[0].Health != nil ||
		systems[0].NeedsPrivilege == nil || systems[0].NeedsPrivilege.Privilege != server.PrivMonitor || !strings.Contains(systems[0].Unavailable, "Cairn.Monitor") {
		t.Fatalf("nobody reads systems: %d %+v", code, systems)
	}
	refused(nobody, "GET", "/api/v1/systems/cairn1/upgrade/svms", nil, server.PrivMonitor)
	refused(nobody, "GET", "/api/v1/systems/cairn1/upgrade/bundles", nil, server.PrivMonitor)

	// The audit trail names the vSphere users.
	var audit []string
	for _, ev := range array.Audit() {
		if ev.User != "admin" {
			audit = append(audit, ev.User+"|"+ev.OnBehalfOf+"|"+strings.Fields(ev.Call)[0])
		}
	}
	joined := strings.Join(audit, "\n")
	for _, want := range []string{"vcenter-operator|op@vsphere.local|CreateVolume", "vcenter-operator|op@vsphere.local|MapVolume", "vcenter-operator|op@vsphere.local|UpdateVolume",
		"vcenter-operator|op@vsphere.local|CreateUser"} {
		if !strings.Contains(joined, want) {
			t.Errorf("audit lacks %s:\n%s", want, joined)
		}
	}
	if strings.Contains(joined, "mon@") || strings.Contains(joined, "fenced@") || strings.Contains(joined, "nobody@") {
		t.Errorf("refused users reached the gateway:\n%s", joined)
	}

	// A system deployed before service users existed gets them on first
	// need, with the admin credential, and keeps their passwords (0600).
	st.Secrets.ServiceUsers = nil
	if err := st.Save(dir); err != nil {
		t.Fatal(err)
	}
	systems = nil
	if code := mon.do("GET", "/api/v1/systems", nil, &systems); code != 200 || systems[0].Health == nil {
		t.Fatalf("monitor after state without service users: %d %+v", code, systems)
	}
	st2 := loadState(t, dir, &p)
	if st2.Secrets.ServiceUsers["monitor"] == "" || st2.Secrets.ServiceUsers["monitor"] == st.Secrets.ServiceUsers["monitor"] {
		t.Fatalf("monitor service user not re-created: %+v", st2.Secrets.ServiceUsers)
	}
	if fi, err := os.Stat(deploy.StatePath(dir, "cairn1")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("state file mode: %v %v", fi, err)
	}
	data, _ := os.ReadFile(filepath.Join(dir, "deploy-cairn1.json"))
	var raw map[string]any
	_ = json.Unmarshal(data, &raw)
	if raw["secrets"].(map[string]any)["service_users"] == nil {
		t.Fatalf("state file has no service users: %s", data)
	}
}

func loadState(t *testing.T, dir string, p *plan.Plan) *deploy.State {
	t.Helper()
	st, err := deploy.LoadState(dir, p)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// signIn is a standalone sign-in (cookie).
func signIn(t *testing.T, ts *httptest.Server, user, pw string) *client {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	hc := *ts.Client() // a client of its own: the jar is the session
	hc.Jar = jar
	c := &client{t: t, base: ts.URL, http: &hc}
	var who map[string]string
	if code := c.do("POST", "/api/v1/session", map[string]string{"username": user, "password": pw}, &who); code != 200 {
		t.Fatalf("sign in as %s: %d %v", user, code, who)
	}
	return c
}

// tokenClient calls as the vSphere Client does: the user's session token
// in the token header.
func tokenClient(t *testing.T, ts *httptest.Server, kit *vcsimkit.Kit, user, pw string) *client {
	t.Helper()
	tok, err := kit.SessionTokenFor(context.Background(), user, pw)
	if err != nil {
		t.Fatal(err)
	}
	hc := *ts.Client()
	hc.Transport = &tokenTransport{next: hc.Transport, token: tok}
	return &client{t: t, base: ts.URL, http: &hc}
}

type tokenTransport struct {
	next  http.RoundTripper
	token string
}

func (tt *tokenTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(server.TokenHeader, tt.token)
	return tt.next.RoundTrip(r)
}
