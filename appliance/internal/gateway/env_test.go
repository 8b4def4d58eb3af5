// The test harness of the gateway tests: a Server on embedded etcd behind
// httptest, with helpers that send requests and assert status, error codes
// and what changed in etcd.

package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
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
	"github.com/cairn-storage/cairn/appliance/internal/testlog"
	clientv3 "go.etcd.io/etcd/client/v3"
	"golang.org/x/crypto/bcrypt"
)

// Cheap password hashes: the cost of the real ones is the point of them.
func init() {
	model.BcryptCost = bcrypt.MinCost
	model.PasswordHashParams = model.Argon2Params{MemoryKiB: 64, Passes: 1, Lanes: 1}
}

const GiB = int64(model.AllocationUnit)

// fakeProber plays the SDSs: paths containing "busy" are in use, others
// hold 100 GiB. With hold set, paths containing "slow" take until hold is
// closed or the request's context ends (a large device being cleared).
type fakeProber struct {
	mu    sync.Mutex
	calls []string
	ids   []string // the device id of each call
	hold  chan struct{}
}

func (p *fakeProber) PrepareDevice(ctx context.Context, addr, clusterID, deviceID, path string, force bool) (int64, error) {
	p.mu.Lock()
	p.calls = append(p.calls, addr+" "+path)
	p.ids = append(p.ids, deviceID)
	hold := p.hold
	p.mu.Unlock()
	if hold != nil && strings.Contains(path, "slow") {
		select {
		case <-hold:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	if strings.Contains(path, "busy") {
		return 0, fmt.Errorf("%s is in use by the ext4 filesystem mounted on /srv: %w", path, model.ErrInUse)
	}
	if strings.Contains(path, "offline") {
		return 0, fmt.Errorf("SDS at %s does not answer: %w", addr, model.ErrUnavailable)
	}
	return 100 * GiB, nil
}

type env struct {
	t      *testing.T
	ctx    context.Context // the gateway's life (New); stop ends it
	stop   context.CancelFunc
	etcd   *clientv3.Client
	srv    *Server
	url    string
	dir    string
	logs   *testlog.Buffer
	prober *fakeProber
	admin  string            // token
	hdr    map[string]string // extra request headers of do
}

func newEnv(t *testing.T, mod ...func(*Config)) *env {
	t.Helper()
	e := &env{t: t, etcd: etcdtest.Start(t), dir: t.TempDir(), logs: &testlog.Buffer{}, prober: &fakeProber{}}
	cfg := Config{Etcd: e.etcd, StateDir: e.dir, Devices: e.prober,
		Logger: slog.New(slog.NewTextHandler(e.logs, nil))}
	for _, f := range mod {
		f(&cfg)
	}
	e.serve(cfg)
	return e
}

// serve starts the gateway of cfg behind httptest and logs in as the admin
// with the password its first start wrote.
func (e *env) serve(cfg Config) {
	e.t.Helper()
	if e.ctx == nil {
		e.ctx, e.stop = context.WithCancel(context.Background())
		e.t.Cleanup(e.stop)
	}
	srv, err := New(e.ctx, cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	e.srv = srv
	hs := httptest.NewServer(srv.Handler())
	e.t.Cleanup(hs.Close)
	e.url = hs.URL
	pw, err := os.ReadFile(filepath.Join(e.dir, AdminPasswordFile))
	if err != nil {
		e.t.Fatalf("first start wrote no admin password: %v", err)
	}
	e.admin = e.login("admin", strings.TrimSpace(string(pw)))
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
		405: {CodeInvalid}, 409: {CodeAlreadyExists, CodeInUse, CodeConflict}, 412: {CodeConflict}, 429: {CodeThrottled}, 503: {CodeUnavailable}, 500: {CodeInternal}}
	c, _ := code.(string)
	return slices.Contains(ok[status], c)
}

// state returns every key's mod revision, except the event log's (every
// mutating request, a refused one too, is an audit event), the login
// throttle's counters (every password attempt is counted) and what running
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
		if strings.HasPrefix(k, model.EventPrefix) || k == model.EventSeqKey || strings.HasPrefix(k, model.ThrottlePrefix) || strings.HasPrefix(k, model.StatsPrefix) || strings.HasPrefix(k, model.LivePrefix) ||
			strings.HasPrefix(k, model.FilledPrefix) {
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
	e.device(a, `{"name":"a1","sds":"a","pool":"p","path":"/var/lib/cairn/a1.img"}`)
}

// addDevice posts a device, asserts the answer is its device-add job (202
// with Location) and returns the job as it ended.
func (e *env) addDevice(token, body string) map[string]any {
	e.t.Helper()
	st, v, h := e.doH("POST", "/api/v1/devices", token, body, e.hdr)
	j, _ := v.(map[string]any)
	if st != 202 || j["kind"] != JobDeviceAdd || h.Get("Location") != "/api/v1/jobs/"+fmt.Sprint(j["id"]) {
		e.t.Fatalf("POST /api/v1/devices %s: %d %v (Location %q), want 202 with a device-add job", body, st, v, h.Get("Location"))
	}
	return e.waitJob(token, j["id"].(string))
}

// waitJob reads a job until it ends (10 s at most) and returns it.
func (e *env) waitJob(token, id string) map[string]any {
	e.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		j := e.ok(200, "GET", "/api/v1/jobs/"+id, token, "")
		if j["state"] != JobRunning && j["state"] != JobQueued {
			return j
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("job %s still %v after 10 s: %v", id, j["state"], j)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// device adds a device through its job and returns the device as GET
// shows it.
func (e *env) device(token, body string) map[string]any {
	e.t.Helper()
	j := e.addDevice(token, body)
	if j["state"] != JobSucceeded {
		e.t.Fatalf("device %s: job %v", body, j)
	}
	return e.ok(200, "GET", "/api/v1/devices/"+j["object"].(map[string]any)["id"].(string), token, "")
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
