// Tests of the gateway basics end to end: first start, login and roles,
// malformed requests, the volume lifecycle and device preparation.

package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cairn-storage/cairn/appliance/internal/model"
	clientv3 "go.etcd.io/etcd/client/v3"
)

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
	// The sessions' leases end with their tokens, and etcd deletes expired
	// leases' keys a moment later: wait for that, so that the refused
	// request below is checked against a store nothing else changes.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		r := must(e.etcd.Get(context.Background(), model.SessionPrefix, clientv3.WithPrefix(), clientv3.WithCountOnly()))
		if r.Count == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d expired sessions still in etcd 10 s after their tokens ended", r.Count)
		}
	}
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
	r := must(e2.etcd.Get(context.Background(), model.SessionPrefix, clientv3.WithPrefix()))
	for _, kv := range r.Kvs {
		if strings.Contains(string(kv.Key)+string(kv.Value), e2.admin) {
			t.Errorf("token stored in clear: %s", kv.Key)
		}
		if kv.Lease == 0 {
			t.Errorf("session %s has no lease", kv.Key)
		}
	}
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
	e.device(a, `{"name":"c1","sds":"c","pool":"p","path":"/var/lib/cairn/c1.img"}`)
	e.fails(400, "only 1 fault domain", "POST", "/api/v1/volumes", op, `{"name":"v1","pool":"p","size":8589934592}`)
	e.device(a, `{"name":"b1","sds":"b","pool":"p","path":"/var/lib/cairn/b1.img"}`)
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
	// The SDS refuses a device in use: the job fails with in_use, the
	// SDS's message, and records nothing.
	_, before := e.do("GET", "/api/v1/devices", a, "")
	j := e.addDevice(a, `{"sds":"a","pool":"p","path":"/dev/disk/by-id/busy"}`)
	if er, _ := j["error"].(map[string]any); j["state"] != JobFailed || er["code"] != CodeInUse || !strings.Contains(fmt.Sprint(er["message"]), "is in use by the ext4 filesystem mounted on /srv") {
		t.Errorf("busy device: job %v", j)
	}
	if _, after := e.do("GET", "/api/v1/devices", a, ""); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("a refused device changed the devices: %v -> %v", before, after)
	}
	e.ok(200, "POST", "/api/v1/devices", a, `{"sds":"a","pool":"p","path":"/var/lib/cairn/a1.img"}`) // a repeat
	e.failsWith(409, CodeAlreadyExists, "", "a path can be added once", "POST", "/api/v1/devices", a, `{"name":"other","sds":"a","pool":"p","path":"/var/lib/cairn/a1.img"}`)
	d := e.device(a, `{"sds":"a","pool":"p","path":"/dev/sdb","force":true}`)
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
