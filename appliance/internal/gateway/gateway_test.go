package gateway

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairn-storage/cairn/appliance/internal/etcdtest"
	"github.com/cairn-storage/cairn/appliance/internal/model"
	clientv3 "go.etcd.io/etcd/client/v3"
	"golang.org/x/crypto/bcrypt"
)

func init() { model.BcryptCost = bcrypt.MinCost }

const GiB = int64(model.AllocationUnit)

// fakeProber plays the SDSs: paths containing "busy" are in use, others
// hold 100 GiB.
type fakeProber struct {
	mu    sync.Mutex
	calls []string
}

func (p *fakeProber) PrepareDevice(ctx context.Context, addr, clusterID, deviceID, path string, force bool) (int64, error) {
	p.mu.Lock()
	p.calls = append(p.calls, addr+" "+path)
	p.mu.Unlock()
	if strings.Contains(path, "busy") {
		return 0, fmt.Errorf("%s is in use by the ext4 filesystem mounted on /srv: %w", path, model.ErrInUse)
	}
	if strings.Contains(path, "offline") {
		return 0, fmt.Errorf("SDS at %s does not answer: %w", addr, model.ErrUnavailable)
	}
	return 100 * GiB, nil
}

// syncBuffer is a log sink safe for concurrent handlers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type env struct {
	t      *testing.T
	etcd   *clientv3.Client
	srv    *Server
	url    string
	dir    string
	logs   *syncBuffer
	prober *fakeProber
	admin  string            // token
	hdr    map[string]string // extra request headers of do
}

func newEnv(t *testing.T, mod ...func(*Config)) *env {
	t.Helper()
	e := &env{t: t, etcd: etcdtest.Start(t), dir: t.TempDir(), logs: &syncBuffer{}, prober: &fakeProber{}}
	cfg := Config{Etcd: e.etcd, StateDir: e.dir, Devices: e.prober,
		Logger: slog.New(slog.NewTextHandler(e.logs, nil))}
	for _, f := range mod {
		f(&cfg)
	}
	srv, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.srv = srv
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	e.url = hs.URL
	pw, err := os.ReadFile(filepath.Join(e.dir, AdminPasswordFile))
	if err != nil {
		t.Fatalf("first start wrote no admin password: %v", err)
	}
	e.admin = e.login("admin", strings.TrimSpace(string(pw)))
	return e
}

// do sends a request and decodes the JSON answer (if any) into a map or list.
func (e *env) do(method, path, token, body string) (int, any) {
	e.t.Helper()
	st, v, _ := e.doH(method, path, token, body, e.hdr)
	return st, v
}

// doH is do with request headers, returning the response headers too.
func (e *env) doH(method, path, token, body string, hdr map[string]string) (int, any, http.Header) {
	e.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, e.url+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var v any
	if len(b) > 0 && strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		if err := json.Unmarshal(b, &v); err != nil {
			e.t.Fatalf("%s %s: response is not JSON: %s", method, path, b)
		}
	} else if len(b) > 0 {
		v = string(b)
	}
	return resp.StatusCode, v, resp.Header
}

// ok asserts a status and returns the body as a map.
func (e *env) ok(want int, method, path, token, body string) map[string]any {
	e.t.Helper()
	st, v := e.do(method, path, token, body)
	if st != want {
		e.t.Fatalf("%s %s %s: status %d, want %d: %v", method, path, body, st, want, v)
	}
	m, _ := v.(map[string]any)
	return m
}

// fails asserts an error status, an error body {"code","message","field"}
// whose code fits the status and whose message contains want, and that
// nothing but the audit log changed in etcd.
func (e *env) fails(want int, msg, method, path, token, body string) map[string]any {
	e.t.Helper()
	before := e.state()
	st, v := e.do(method, path, token, body)
	m, _ := v.(map[string]any)
	text, _ := m["message"].(string)
	if st != want || !strings.Contains(text, msg) {
		e.t.Errorf("%s %s %s: got %d %v; want %d with message containing %q", method, path, body, st, v, want, msg)
	}
	_, hasField := m["field"].(string)
	if len(m) != 3 || !hasField || !validCode(st, m["code"]) {
		e.t.Errorf("%s %s: error body %v is not {\"code\", \"message\", \"field\"} with a code for status %d", method, path, v, st)
	}
	if method != "POST" || !strings.HasSuffix(path, "/login") {
		if after := e.state(); !maps.Equal(before, after) {
			e.t.Errorf("%s %s: a refused request changed etcd:\n%v", method, path, diffKeys(before, after))
		}
	}
	return m
}

// failsWith is fails that also checks the code and the field.
func (e *env) failsWith(want int, code, field, msg, method, path, token, body string) {
	e.t.Helper()
	m := e.fails(want, msg, method, path, token, body)
	if m["code"] != code || m["field"] != field {
		e.t.Errorf("%s %s %s: code %v field %v; want code %q field %q", method, path, body, m["code"], m["field"], code, field)
	}
}

// validCode: the codes each status may carry (docs/api.md section 2).
func validCode(status int, code any) bool {
	ok := map[int][]string{400: {CodeInvalid, CodeNoChange}, 401: {CodeUnauthorized}, 403: {CodeForbidden}, 404: {CodeNotFound},
		405: {CodeInvalid}, 409: {CodeAlreadyExists, CodeInUse, CodeConflict}, 412: {CodeConflict}, 503: {CodeUnavailable}, 500: {CodeInternal}}
	c, _ := code.(string)
	return slices.Contains(ok[status], c)
}

// state returns every key's mod revision, except the event log's (every
// mutating request, a refused one too, is an audit event) and what running
// SDSs publish on their own (statistics, liveness, fill markers), which the
// gateway never writes.
func (e *env) state() map[string]int64 {
	r, err := e.etcd.Get(context.Background(), "/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[string]int64{}
	for _, kv := range r.Kvs {
		k := string(kv.Key)
		if strings.HasPrefix(k, eventPrefix) || k == eventSeqKey || strings.HasPrefix(k, model.Prefix+"stats/") || strings.HasPrefix(k, model.Prefix+"live/") ||
			strings.HasPrefix(k, model.Prefix+"filled/") {
			continue
		}
		out[k] = kv.ModRevision
	}
	return out
}

func diffKeys(a, b map[string]int64) string {
	var d []string
	for k, v := range a {
		if b[k] != v {
			d = append(d, k)
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			d = append(d, k)
		}
	}
	return strings.Join(d, "\n")
}

func (e *env) rev() int64 {
	r, err := e.etcd.Get(context.Background(), "/", clientv3.WithCountOnly())
	if err != nil {
		e.t.Fatal(err)
	}
	return r.Header.Revision
}

func (e *env) login(user, pw string) string {
	e.t.Helper()
	m := e.ok(200, "POST", "/api/v1/login", "", fmt.Sprintf(`{"username":%q,"password":%q}`, user, pw))
	tok, _ := m["token"].(string)
	if len(tok) < 40 {
		e.t.Fatalf("login returned token %q", tok)
	}
	return tok
}

func (e *env) user(name, role string) string {
	e.t.Helper()
	e.ok(201, "POST", "/api/v1/users", e.admin, fmt.Sprintf(`{"name":%q,"role":%q,"password":"password-%s"}`, name, role, name))
	return e.login(name, "password-"+name)
}

// cluster builds pd1, fault sets fs1/fs2, SDSs a (fs1), b (fs2), c (fs1),
// pool p and one device per SDS.
func (e *env) cluster() {
	a := e.admin
	e.ok(201, "POST", "/api/v1/system/bootstrap", a, `{"name":"lab"}`)
	e.ok(201, "POST", "/api/v1/protection-domains", a, `{"name":"pd1"}`)
	e.ok(201, "POST", "/api/v1/fault-sets", a, `{"name":"fs1","protection_domain":"pd1"}`)
	e.ok(201, "POST", "/api/v1/fault-sets", a, `{"name":"fs2","protection_domain":"pd1"}`)
	e.ok(201, "POST", "/api/v1/sds", a, `{"name":"a","protection_domain":"pd1","fault_set":"fs1","address":"127.0.0.1:7101"}`)
	e.ok(201, "POST", "/api/v1/sds", a, `{"name":"b","protection_domain":"pd1","fault_set":"fs2","address":"127.0.0.1:7102"}`)
	e.ok(201, "POST", "/api/v1/sds", a, `{"name":"c","protection_domain":"pd1","fault_set":"fs1","address":"127.0.0.1:7103"}`)
	e.ok(201, "POST", "/api/v1/pools", a, `{"name":"p","protection_domain":"pd1"}`)
	e.ok(201, "POST", "/api/v1/devices", a, `{"name":"a1","sds":"a","pool":"p","path":"/var/lib/cairn/a1.img"}`)
}

func TestFirstStartAdminPassword(t *testing.T) {
	e := newEnv(t)
	file := filepath.Join(e.dir, AdminPasswordFile)
	st, err := os.Stat(file)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("admin password file: %v %v", st, err)
	}
	if !strings.Contains(e.logs.String(), file) {
		t.Errorf("the log does not say where the password is:\n%s", e.logs)
	}
	pw, _ := os.ReadFile(file)
	if len(strings.TrimSpace(string(pw))) < 20 {
		t.Errorf("weak generated password %q", pw)
	}
	// A second gateway (another SVM) finds the user and writes nothing.
	dir2 := t.TempDir()
	if _, err := New(context.Background(), Config{Etcd: e.etcd, StateDir: dir2, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir2, AdminPasswordFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("second gateway wrote a password file: %v", err)
	}
}

func TestLoginAndTokens(t *testing.T) {
	// Short-lived tokens; the user is created in the store directly so the
	// test does not depend on the admin token staying valid.
	e := newEnv(t, func(c *Config) { c.TokenTTL = 2 * time.Second })
	e.fails(401, "wrong user name or password", "POST", "/api/v1/login", "", `{"username":"admin","password":"nope"}`)
	e.fails(401, "wrong user name or password", "POST", "/api/v1/login", "", `{"username":"ghost","password":"nope"}`)
	e.fails(401, "missing bearer token", "GET", "/api/v1/volumes", "", "")
	e.fails(401, "token invalid or expired", "GET", "/api/v1/volumes", "not-a-token", "")
	must(model.NewStore(e.etcd).CreateUser(context.Background(), model.UserSpec{Name: "mon", Role: model.RoleMonitor, Password: "password-mon"}))
	tok := e.login("mon", "password-mon")
	e.ok(200, "GET", "/api/v1/volumes", tok, "")
	time.Sleep(2200 * time.Millisecond)
	e.fails(401, "token invalid or expired", "GET", "/api/v1/volumes", tok, "")

	e2 := newEnv(t)
	tok = e2.login("admin", strings.TrimSpace(string(must(os.ReadFile(filepath.Join(e2.dir, AdminPasswordFile))))))
	e2.ok(204, "POST", "/api/v1/logout", tok, "")
	e2.fails(401, "token invalid or expired", "GET", "/api/v1/protection-domains", tok, "")
	// Deleting a user ends its sessions at once.
	mon := e2.user("mon", model.RoleMonitor)
	e2.ok(204, "DELETE", "/api/v1/users/mon", e2.admin, "")
	e2.fails(401, "no longer exists", "GET", "/api/v1/protection-domains", mon, "")
	// The token is stored only as a hash.
	r := must(e2.etcd.Get(context.Background(), model.Prefix+"session/", clientv3.WithPrefix()))
	for _, kv := range r.Kvs {
		if strings.Contains(string(kv.Key)+string(kv.Value), e2.admin) {
			t.Errorf("token stored in clear: %s", kv.Key)
		}
		if kv.Lease == 0 {
			t.Errorf("session %s has no lease", kv.Key)
		}
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func TestRoles(t *testing.T) {
	e := newEnv(t)
	e.cluster()
	mon := e.user("mon", model.RoleMonitor)
	op := e.user("op", model.RoleOperator)
	e.ok(200, "GET", "/api/v1/volumes", mon, "")
	e.ok(200, "GET", "/api/v1/system", mon, "")
	e.fails(403, `user "mon" has role monitor; DELETE /api/v1/volumes/v1 needs role operator or admin`, "DELETE", "/api/v1/volumes/v1", mon, "")
	e.fails(403, "needs role operator or admin", "POST", "/api/v1/volumes", mon, `{"name":"v","pool":"p","size":1073741824}`)
	e.fails(403, "needs role admin", "POST", "/api/v1/protection-domains", op, `{"name":"pd2"}`)
	e.fails(403, "needs role admin", "DELETE", "/api/v1/pools/p", op, "")
	e.fails(403, "needs role admin", "GET", "/api/v1/users", op, "")
	e.failsWith(404, CodeNotFound, "ref", `user "nobody" not found`, "GET", "/api/v1/users/nobody", e.admin, "")
	e.ok(200, "GET", "/api/v1/users/mon", e.admin, "")
	e.fails(403, "needs role admin", "POST", "/api/v1/system/bootstrap", op, `{"name":"x"}`)
	e.ok(201, "POST", "/api/v1/hosts", op, `{"name":"h1","type":"nbd"}`)
	// A role change takes effect on the next request.
	e.ok(200, "PATCH", "/api/v1/users/mon", e.admin, `{"role":"operator"}`)
	e.ok(204, "DELETE", "/api/v1/hosts/h1", mon, "")
}

func TestMalformedRequests(t *testing.T) {
	e := newEnv(t)
	e.cluster()
	a := e.admin
	e.fails(400, "malformed JSON at line 1, column 10", "POST", "/api/v1/protection-domains", a, `{"name": }`)
	e.fails(400, "the body ends early", "POST", "/api/v1/protection-domains", a, `{"name": "x"`)
	e.fails(400, `unknown field "nmae"; this request accepts: name`, "POST", "/api/v1/protection-domains", a, `{"nmae": "x"}`)
	e.fails(400, `field "size" at line 1`, "POST", "/api/v1/volumes", a, `{"name":"v","pool":"p","size":"8G"}`)
	e.fails(400, "must be a JSON object", "POST", "/api/v1/protection-domains", a, `["x"]`)
	e.fails(400, "request body is empty", "POST", "/api/v1/protection-domains", a, ``)
	e.fails(400, "unexpected data after the JSON object", "POST", "/api/v1/protection-domains", a, `{"name":"x"} {"name":"y"}`)
	e.fails(400, "larger than 1048576 bytes", "POST", "/api/v1/protection-domains", a, `{"name":"`+strings.Repeat("x", maxBody)+`"}`)
	e.failsWith(404, CodeNotFound, "", "no endpoint GET /api/v1/nothing", "GET", "/api/v1/nothing", a, "")
	e.fails(405, "allowed: DELETE, GET", "PUT", "/api/v1/protection-domains/pd1", a, `{}`)
}

func TestVolumeLifecycle(t *testing.T) {
	e := newEnv(t)
	e.cluster()
	a := e.admin
	op := e.user("op", model.RoleOperator)
	// Only SDS a has a device: one fault domain.
	e.fails(400, `pool "p" has devices on only 1 fault domain; add devices on another SDS/fault set: two copies need two`,
		"POST", "/api/v1/volumes", op, `{"name":"v1","pool":"p","size":8589934592}`)
	// SDS c is in the same fault set as a: still one domain.
	e.ok(201, "POST", "/api/v1/devices", a, `{"name":"c1","sds":"c","pool":"p","path":"/var/lib/cairn/c1.img"}`)
	e.fails(400, "only 1 fault domain", "POST", "/api/v1/volumes", op, `{"name":"v1","pool":"p","size":8589934592}`)
	e.ok(201, "POST", "/api/v1/devices", a, `{"name":"b1","sds":"b","pool":"p","path":"/var/lib/cairn/b1.img"}`)
	e.fails(400, "not a positive multiple of the allocation unit (1 GiB = 1073741824 bytes)", "POST", "/api/v1/volumes", op, `{"name":"v1","pool":"p","size":1000000000}`)
	v := e.ok(201, "POST", "/api/v1/volumes", op, `{"name":"v1","pool":"p","size":8589934592}`)
	if v["pool_name"] != "p" || v["thin"] != true || len(v["wwn"].(string)) != 32 || v["serial"] != v["id"] {
		t.Errorf("volume %v", v)
	}
	// A repeat answers the volume; another spec under the name is refused.
	if again := e.ok(200, "POST", "/api/v1/volumes", op, `{"name":"v1","pool":"p","size":8589934592}`); again["id"] != v["id"] {
		t.Errorf("repeat answered %v", again)
	}
	e.failsWith(409, CodeAlreadyExists, "", `volume "v1" already exists`, "POST", "/api/v1/volumes", op, `{"name":"v1","pool":"p","size":17179869184}`)
	e.fails(404, `host "esx1" not found`, "POST", "/api/v1/volumes/v1/map", op, `{"host":"esx1"}`)
	e.fails(400, "not a valid iSCSI name", "POST", "/api/v1/hosts", op, `{"name":"esx1","type":"iscsi","iqn":"esx1"}`)
	h := e.ok(201, "POST", "/api/v1/hosts", op, `{"name":"esx1","type":"iscsi","iqn":"iqn.1998-01.com.vmware:esx1-1234","chap_user":"u","chap_secret":"0123456789abcdef"}`)
	if _, leaked := h["chap_secret"]; leaked || h["chap"] != true {
		t.Errorf("host view %v", h)
	}
	m := e.ok(200, "POST", "/api/v1/volumes/v1/map", op, `{"host":"esx1"}`)
	maps := m["mappings"].([]any)
	if len(maps) != 1 || maps[0].(map[string]any)["host_name"] != "esx1" {
		t.Errorf("mappings %v", m["mappings"])
	}
	e.fails(409, "unmap it first", "DELETE", "/api/v1/volumes/v1", op, "")
	e.fails(409, "unmap them first", "DELETE", "/api/v1/hosts/esx1", op, "")
	e.fails(409, "remove the volumes first", "DELETE", "/api/v1/pools/p", a, "")
	e.fails(409, "remove them first", "DELETE", "/api/v1/protection-domains/pd1", a, "")
	e.fails(400, "can only grow", "PATCH", "/api/v1/volumes/v1", op, `{"size":1073741824}`)
	r := e.ok(200, "PATCH", "/api/v1/volumes/"+v["id"].(string), op, `{"size":17179869184}`)
	if r["size"] != float64(16*GiB) {
		t.Errorf("resized %v", r["size"])
	}
	e.ok(200, "POST", "/api/v1/volumes/v1/unmap", op, `{"host":"esx1"}`)
	e.ok(200, "POST", "/api/v1/volumes/v1/unmap", op, `{"host":"esx1"}`) // a repeat
	got := e.ok(200, "GET", "/api/v1/volumes/v1", op, "")
	if got["size"] != float64(16*GiB) || len(got["mappings"].([]any)) != 0 {
		t.Errorf("get %v", got)
	}
	_, list := e.do("GET", "/api/v1/volumes", op, "")
	if l, _ := list.([]any); len(l) != 1 {
		t.Errorf("list %v", list)
	}
	e.ok(204, "DELETE", "/api/v1/volumes/v1", op, "")
	e.fails(404, `volume "v1" not found`, "GET", "/api/v1/volumes/v1", op, "")
	audit := e.logs.String()
	for _, want := range []string{`msg=audit user=op method=POST path=/api/v1/volumes status=201`, `msg=audit user=op method=DELETE path=/api/v1/volumes/v1 status=409`} {
		if !strings.Contains(audit, want) {
			t.Errorf("audit log lacks %q", want)
		}
	}
	if strings.Contains(audit, "method=GET") {
		t.Error("GET requests are audited")
	}
}

func TestDevices(t *testing.T) {
	e := newEnv(t)
	a := e.admin
	e.fails(404, "not bootstrapped", "POST", "/api/v1/devices", a, `{"sds":"a","pool":"p","path":"/dev/disk/by-id/x"}`)
	e.cluster()
	e.fails(400, "use /dev/disk/by-id/... or /dev/disk/by-path/... : /dev/sdX names change across reboots", "POST", "/api/v1/devices", a, `{"sds":"a","pool":"p","path":"/dev/sdb"}`)
	e.fails(409, "is in use by the ext4 filesystem mounted on /srv", "POST", "/api/v1/devices", a, `{"sds":"a","pool":"p","path":"/dev/disk/by-id/busy"}`)
	e.ok(200, "POST", "/api/v1/devices", a, `{"sds":"a","pool":"p","path":"/var/lib/cairn/a1.img"}`) // a repeat
	e.failsWith(409, CodeAlreadyExists, "", "a path can be added once", "POST", "/api/v1/devices", a, `{"name":"other","sds":"a","pool":"p","path":"/var/lib/cairn/a1.img"}`)
	d := e.ok(201, "POST", "/api/v1/devices", a, `{"sds":"a","pool":"p","path":"/dev/sdb","force":true}`)
	if d["capacity"] != float64(100*GiB) || d["state"] != "normal" || d["sds_name"] != "a" {
		t.Errorf("device %v", d)
	}
	e.prober.mu.Lock()
	calls := strings.Join(e.prober.calls, "|")
	e.prober.mu.Unlock()
	if strings.Contains(calls, "/dev/sdb|") || !strings.Contains(calls, "127.0.0.1:7101 /dev/sdb") {
		t.Errorf("prober calls %s", calls)
	}
}

func TestSystemAndMetrics(t *testing.T) {
	e := newEnv(t)
	st := e.ok(200, "GET", "/api/v1/system", e.admin, "")
	if st["health"].(map[string]any)["status"] != HealthNotBootstrapped {
		t.Errorf("system %v", st)
	}
	e.cluster()
	e.ok(201, "POST", "/api/v1/devices", e.admin, `{"name":"b1","sds":"b","pool":"p","path":"/var/lib/cairn/b1.img"}`)
	e.ok(201, "POST", "/api/v1/volumes", e.admin, `{"name":"v1","pool":"p","size":8589934592}`)
	e.ok(200, "POST", "/api/v1/system/bootstrap", e.admin, `{"name":"lab"}`)
	e.fails(409, "already bootstrapped", "POST", "/api/v1/system/bootstrap", e.admin, `{"name":"other"}`)
	vol := e.ok(200, "GET", "/api/v1/volumes/v1", e.admin, "")
	ids := map[string]string{}
	for _, kind := range []string{"sds", "devices"} {
		_, l := e.do("GET", "/api/v1/"+kind, e.admin, "")
		for _, o := range l.([]any) {
			m := o.(map[string]any)
			ids[m["name"].(string)] = m["id"].(string)
		}
	}
	// SDS a is alive and publishes statistics; b and c are down.
	ctx := context.Background()
	live, _ := json.Marshal(model.SDSLive{Address: "127.0.0.1:7101", PID: 1})
	must(e.etcd.Put(ctx, model.LiveKey(ids["a"]), string(live)))
	stats, _ := json.Marshal(model.SDSStats{SDSID: ids["a"], Time: time.Now(),
		Total:   model.IOCounters{ReadOps: 10, WriteOps: 5, ReadBytes: 40960, WriteBytes: 20480, ReadLatencyNs: 2e6, WriteLatencyNs: 3e6},
		Volumes: map[string]model.IOCounters{vol["id"].(string): {ReadOps: 7, WriteOps: 3, ReadLatencyNs: 1500000000}},
		Devices: map[string]model.DeviceUsage{ids["a1"]: {Capacity: 100 * GiB, Used: 3 << 20, State: "normal"}}})
	must(e.etcd.Put(ctx, model.StatsKey(ids["a"]), string(stats)))

	st = e.ok(200, "GET", "/api/v1/system", e.admin, "")
	h := st["health"].(map[string]any)
	if h["status"] != HealthDegraded || h["sds_up_count"] != float64(1) || fmt.Sprint(h["sds_down_names"]) != "[b c]" {
		t.Errorf("health %v", h)
	}
	if c := st["capacity"].(map[string]any); c["raw"] != float64(200*GiB) || c["raw_allocated"] != float64(3<<20) {
		t.Errorf("capacity %v", c)
	}

	status, body := e.do("GET", "/metrics", "", "")
	text, _ := body.(string)
	if status != 200 {
		t.Fatalf("metrics %d %v", status, body)
	}
	for _, want := range []string{
		"# TYPE cairn_sds_up gauge",
		fmt.Sprintf(`cairn_sds_up{sds_id="%s",sds="a"} 1`, ids["a"]),
		fmt.Sprintf(`cairn_sds_up{sds_id="%s",sds="b"} 0`, ids["b"]),
		fmt.Sprintf(`cairn_sds_read_ops_total{sds_id="%s",sds="a"} 10`, ids["a"]),
		fmt.Sprintf(`cairn_volume_read_ops_total{volume_id="%s",volume="v1",pool="p"} 7`, vol["id"]),
		fmt.Sprintf(`cairn_volume_read_latency_seconds_total{volume_id="%s",volume="v1",pool="p"} 1.5`, vol["id"]),
		fmt.Sprintf(`cairn_device_used_bytes{device_id="%s",device="a1",sds="a",pool="p"} 3145728`, ids["a1"]),
		fmt.Sprintf(`cairn_pool_capacity_bytes{pool_id="`),
		"# TYPE cairn_volume_write_bytes_total counter",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	checkExposition(t, text)
}

// checkExposition parses the text format strictly enough to catch
// malformed lines: every sample belongs to the family declared before it.
func checkExposition(t *testing.T, text string) {
	t.Helper()
	family := ""
	for i, line := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		switch {
		case strings.HasPrefix(line, "# HELP "):
		case strings.HasPrefix(line, "# TYPE "):
			f := strings.Fields(line)
			if len(f) != 4 || (f[3] != "counter" && f[3] != "gauge") {
				t.Errorf("line %d: bad TYPE %q", i+1, line)
			}
			family = f[2]
		default:
			name := line
			if j := strings.IndexAny(line, "{ "); j >= 0 {
				name = line[:j]
			}
			if name != family {
				t.Errorf("line %d: sample %q outside its family %q", i+1, line, family)
			}
			if strings.Count(line, `"`)%2 != 0 || !strings.Contains(line, " ") {
				t.Errorf("line %d: malformed sample %q", i+1, line)
			}
		}
	}
}

func TestTLS(t *testing.T) {
	c := etcdtest.Start(t)
	dir := t.TempDir()
	logs := &syncBuffer{}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Serve(ctx, Config{Etcd: c, StateDir: dir, TLS: true, Logger: slog.New(slog.NewTextHandler(logs, nil))}, ln)
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	var pem []byte
	for i := 0; i < 100; i++ {
		if pem, err = os.ReadFile(filepath.Join(dir, CertFile)); err == nil && strings.Contains(logs.String(), "gateway listening") {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if st, err := os.Stat(filepath.Join(dir, KeyFile)); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key.pem: %v %v", st, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		t.Fatal("cert.pem holds no certificate")
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	resp, err := client.Get("https://" + addr + "/api/v1/openapi.json")
	if err != nil {
		t.Fatalf("TLS with the generated certificate as CA: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("openapi.json: %d", resp.StatusCode)
	}
	fp := resp.TLS.PeerCertificates[0]
	if !strings.Contains(logs.String(), "sha256_fingerprint=") || fp.PublicKeyAlgorithm != x509.ECDSA {
		t.Errorf("fingerprint not logged or key not ECDSA: %v", fp.PublicKeyAlgorithm)
	}
	// Plain HTTP on the TLS port gets no API.
	if resp, err := http.Get("http://" + addr + "/api/v1/openapi.json"); err == nil {
		if resp.StatusCode == 200 {
			t.Error("plain HTTP served the API on the TLS port")
		}
		resp.Body.Close()
	}
}

// TestCertificateReplacement: an admin's new cert.pem/key.pem are served
// from the next handshake on.
func TestCertificateReplacement(t *testing.T) {
	dir := t.TempDir()
	c, err := loadOrCreateCert(dir, "127.0.0.1:8443")
	if err != nil {
		t.Fatal(err)
	}
	first := c.fingerprint()
	other := t.TempDir()
	if err := generateCert(filepath.Join(other, CertFile), filepath.Join(other, KeyFile), "127.0.0.1:8443"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond) // a distinct modification time
	for _, f := range []string{KeyFile, CertFile} {
		if err := os.WriteFile(filepath.Join(dir, f), must(os.ReadFile(filepath.Join(other, f))), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if second := c.fingerprint(); second == first || second == "" {
		t.Errorf("certificate not reloaded: %s", second)
	}
	// Half-written replacement: keep serving the last good pair.
	good := c.fingerprint()
	os.WriteFile(filepath.Join(dir, CertFile), []byte("garbage"), 0o644)
	if got := c.fingerprint(); got != good {
		t.Errorf("a broken cert.pem replaced the served certificate: %s", got)
	}
	// Only one of the two files: refuse to start.
	os.Remove(filepath.Join(dir, KeyFile))
	if _, err := loadOrCreateCert(dir, ""); err == nil || !strings.Contains(err.Error(), "only one of") {
		t.Errorf("start with cert.pem but no key.pem: %v", err)
	}
}
