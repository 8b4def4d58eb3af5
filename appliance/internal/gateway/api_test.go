package gateway

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cairn-storage/cairn/appliance/internal/model"
)

// redundant adds devices so that pool p spans two fault domains.
func (e *env) redundant() {
	e.device(e.admin, `{"name":"b1","sds":"b","pool":"p","path":"/var/lib/cairn/b1.img"}`)
}

// TestErrorCodes: every error code with its status and field, and that a
// refusal changes nothing but the audit log (fails checks it).
func TestErrorCodes(t *testing.T) {
	e := newEnv(t)
	e.cluster()
	e.redundant()
	a := e.admin
	mon := e.user("mon", model.RoleMonitor)
	e.ok(201, "POST", "/api/v1/volumes", a, `{"name":"v1","pool":"p","size":1073741824}`)
	e.ok(201, "POST", "/api/v1/hosts", a, `{"name":"h1","type":"nbd"}`)
	e.ok(200, "POST", "/api/v1/volumes/v1/map", a, `{"host":"h1"}`)

	e.failsWith(400, CodeInvalid, "size", "not a positive multiple", "POST", "/api/v1/volumes", a, `{"name":"v2","pool":"p","size":5}`)
	e.failsWith(400, CodeInvalid, "name", "looks like an object id", "POST", "/api/v1/protection-domains", a, `{"name":"0123456789abcdef"}`)
	e.failsWith(400, CodeInvalid, "nmae", `unknown field "nmae"`, "POST", "/api/v1/protection-domains", a, `{"nmae":"x"}`)
	e.failsWith(400, CodeInvalid, "size", `field "size"`, "POST", "/api/v1/volumes", a, `{"name":"v","pool":"p","size":"8G"}`)
	e.failsWith(400, CodeInvalid, "iqn", "not a valid iSCSI name", "POST", "/api/v1/hosts", a, `{"name":"h2","type":"iscsi","iqn":"nope"}`)
	e.failsWith(400, CodeNoChange, "", "changes nothing", "PATCH", "/api/v1/volumes/v1", a, `{}`)
	e.failsWith(401, CodeUnauthorized, "", "missing bearer token", "GET", "/api/v1/volumes", "", "")
	e.failsWith(403, CodeForbidden, "", "needs role operator", "DELETE", "/api/v1/volumes/v1", mon, "")
	e.failsWith(404, CodeNotFound, "ref", `volume "nope" not found`, "GET", "/api/v1/volumes/nope", a, "")
	e.failsWith(404, CodeNotFound, "ref", `volume "nope" not found`, "PATCH", "/api/v1/volumes/nope", a, `{"name":"x"}`)
	e.failsWith(404, CodeNotFound, "pool", `pool "q" not found`, "POST", "/api/v1/volumes", a, `{"name":"v2","pool":"q","size":1073741824}`)
	e.failsWith(404, CodeNotFound, "host", `host "h9" not found`, "POST", "/api/v1/volumes/v1/map", a, `{"host":"h9"}`)
	e.failsWith(404, CodeNotFound, "protection_domain", `protection domain "pd9" not found`, "POST", "/api/v1/pools", a, `{"name":"p2","protection_domain":"pd9"}`)
	e.failsWith(404, CodeNotFound, "", "no endpoint GET /api/v1/nothing", "GET", "/api/v1/nothing", a, "")
	e.failsWith(405, CodeInvalid, "", "allowed: DELETE, GET, PATCH", "PUT", "/api/v1/pools/p", a, `{}`)
	e.failsWith(409, CodeAlreadyExists, "", `volume "v1" already exists`, "POST", "/api/v1/volumes", a, `{"name":"v1","pool":"p","size":2147483648}`)
	e.ok(201, "POST", "/api/v1/pools", a, `{"name":"p2","protection_domain":"pd1"}`)
	e.failsWith(409, CodeAlreadyExists, "name", `pool "p" already exists`, "PATCH", "/api/v1/pools/p2", a, `{"name":"p"}`)
	e.failsWith(409, CodeInUse, "", "unmap it first", "DELETE", "/api/v1/volumes/v1", a, "")
	e.failsWith(409, CodeInUse, "", "remove the volumes first", "DELETE", "/api/v1/pools/p", a, "")
	e.failsWith(409, CodeConflict, "read_only", "unmap it first to change that", "POST", "/api/v1/volumes/v1/map", a, `{"host":"h1","read_only":true}`)
	e.hdr = map[string]string{"If-Match": `"1"`}
	e.failsWith(412, CodeConflict, "", "changed since ETag", "PATCH", "/api/v1/volumes/v1", a, `{"name":"v9"}`)
	e.hdr = nil
	// The SDS's answer comes in the device-add job: its error has the code.
	j := e.addDevice(a, `{"sds":"c","pool":"p","path":"/dev/disk/by-id/offline"}`)
	if er, _ := j["error"].(map[string]any); j["state"] != JobFailed || er["code"] != CodeUnavailable || !strings.Contains(fmt.Sprint(er["message"]), "does not answer") {
		t.Errorf("device on an SDS that does not answer: job %v", j)
	}
}

// TestRenamesAndPatch: every object renames; PATCH of hosts, pools and
// volumes; equal values are a repeat that writes nothing.
func TestRenamesAndPatch(t *testing.T) {
	e := newEnv(t)
	e.cluster()
	e.redundant()
	a := e.admin
	e.ok(201, "POST", "/api/v1/volumes", a, `{"name":"v1","pool":"p","size":1073741824}`)
	e.ok(201, "POST", "/api/v1/hosts", a, `{"name":"esx1","type":"iscsi","iqn":"iqn.1998-01.com.vmware:esx1"}`)
	for _, r := range []struct{ path, from, to string }{
		{"/protection-domains", "pd1", "pd-a"}, {"/fault-sets", "fs1", "rack1"}, {"/sds", "a", "sds-a"}, {"/devices", "a1", "disk-a1"},
		{"/pools", "p", "pool-a"}, {"/volumes", "v1", "vol-1"}, {"/hosts", "esx1", "esx-01"},
	} {
		got := e.ok(200, "PATCH", "/api/v1"+r.path+"/"+r.from, a, fmt.Sprintf(`{"name":%q}`, r.to))
		if got["name"] != r.to {
			t.Errorf("rename %s %s: %v", r.path, r.from, got)
		}
		e.ok(200, "GET", "/api/v1"+r.path+"/"+r.to, a, "")
		e.failsWith(404, CodeNotFound, "ref", "not found", "GET", "/api/v1"+r.path+"/"+r.from, a, "")
		// The old name is free again, the new one is taken.
		before := e.state()
		e.ok(200, "PATCH", "/api/v1"+r.path+"/"+r.to, a, fmt.Sprintf(`{"name":%q}`, r.to))
		if !mapsEqual(before, e.state()) {
			t.Errorf("%s: a rename to the same name wrote to etcd", r.path)
		}
	}
	// References follow the rename (they are ids).
	if v := e.ok(200, "GET", "/api/v1/volumes/vol-1", a, ""); v["pool_name"] != "pool-a" {
		t.Errorf("volume after pool rename: %v", v)
	}
	if x := e.ok(200, "GET", "/api/v1/sds/sds-a", a, ""); x["protection_domain_name"] != "pd-a" || x["fault_set_name"] != "rack1" {
		t.Errorf("SDS after renames: %v", x)
	}
	// Hosts: IQN and CHAP change; CHAP is removed with two empty strings.
	h := e.ok(200, "PATCH", "/api/v1/hosts/esx-01", a, `{"iqn":"IQN.1998-01.com.vmware:ESX01-new","chap_user":"u","chap_secret":"0123456789abcdef"}`)
	if h["iqn"] != "iqn.1998-01.com.vmware:esx01-new" || h["chap"] != true || h["chap_user"] != "u" {
		t.Errorf("host update %v", h)
	}
	e.failsWith(400, CodeInvalid, "chap_secret", "give both chap_user and chap_secret", "PATCH", "/api/v1/hosts/esx-01", a, `{"chap_secret":""}`)
	if h := e.ok(200, "PATCH", "/api/v1/hosts/esx-01", a, `{"chap_user":"","chap_secret":""}`); h["chap"] != false {
		t.Errorf("CHAP not removed: %v", h)
	}
	e.ok(201, "POST", "/api/v1/hosts", a, `{"name":"linux1","type":"nbd"}`)
	e.failsWith(400, CodeInvalid, "iqn", "iSCSI hosts only", "PATCH", "/api/v1/hosts/linux1", a, `{"iqn":"iqn.1998-01.com.vmware:x"}`)
	e.ok(201, "POST", "/api/v1/hosts", a, `{"name":"esx2","type":"iscsi","iqn":"iqn.1998-01.com.vmware:esx2"}`)
	e.failsWith(409, CodeAlreadyExists, "iqn", "one host per initiator", "PATCH", "/api/v1/hosts/esx2", a, `{"iqn":"iqn.1998-01.com.vmware:esx01-new"}`)
	// Volumes: grow, same size (a repeat), shrink refused.
	if v := e.ok(200, "PATCH", "/api/v1/volumes/vol-1", a, `{"size":2147483648}`); v["size"] != float64(2*GiB) {
		t.Errorf("grow %v", v)
	}
	before := e.state()
	e.ok(200, "PATCH", "/api/v1/volumes/vol-1", a, `{"size":2147483648}`)
	if !mapsEqual(before, e.state()) {
		t.Error("resize to the same size wrote to etcd")
	}
	e.failsWith(400, CodeInvalid, "size", "can only grow", "PATCH", "/api/v1/volumes/vol-1", a, `{"size":1073741824}`)
	// Pools: the spare share.
	if p := e.ok(200, "PATCH", "/api/v1/pools/pool-a", a, `{"spare_percent":20}`); p["spare_percent"] != 20.0 {
		t.Errorf("spare %v", p)
	}
}

func mapsEqual(a, b map[string]int64) bool { return diffKeys(a, b) == "" }

// TestETagLocationFilters: ETag on one object, If-Match on changes,
// Location on create, and the list filters.
func TestETagLocationFilters(t *testing.T) {
	e := newEnv(t)
	e.cluster()
	e.redundant()
	a := e.admin
	st, v, h := e.doH("POST", "/api/v1/volumes", a, `{"name":"v1","pool":"p","size":1073741824}`, nil)
	id, _ := v.(map[string]any)["id"].(string)
	if st != 201 || h.Get("Location") != "/api/v1/volumes/"+id || h.Get("ETag") == "" {
		t.Fatalf("create: %d Location %q ETag %q", st, h.Get("Location"), h.Get("ETag"))
	}
	_, _, h = e.doH("GET", "/api/v1/volumes/v1", a, "", nil)
	etag := h.Get("ETag")
	// A repeat answers 200 without Location.
	if st, _, h := e.doH("POST", "/api/v1/volumes", a, `{"name":"v1","pool":"p","size":1073741824}`, nil); st != 200 || h.Get("Location") != "" {
		t.Errorf("repeat: %d Location %q", st, h.Get("Location"))
	}
	st, v, h = e.doH("PATCH", "/api/v1/volumes/v1", a, `{"size":2147483648}`, map[string]string{"If-Match": etag})
	if st != 200 || h.Get("ETag") == etag {
		t.Fatalf("PATCH with the current ETag: %d %v, ETag %q", st, v, h.Get("ETag"))
	}
	newTag := h.Get("ETag")
	e.hdr = map[string]string{"If-Match": etag}
	e.failsWith(412, CodeConflict, "", "changed since ETag", "PATCH", "/api/v1/volumes/v1", a, `{"size":4294967296}`)
	e.failsWith(412, CodeConflict, "", "changed since ETag", "DELETE", "/api/v1/volumes/v1", a, "")
	e.failsWith(412, CodeConflict, "", "changed since ETag", "POST", "/api/v1/volumes/v1/map", a, `{"host":"x"}`)
	e.hdr = map[string]string{"If-Match": "yesterday"}
	e.failsWith(400, CodeInvalid, "If-Match", "is not an ETag", "PATCH", "/api/v1/volumes/v1", a, `{"size":4294967296}`)
	e.hdr = map[string]string{"If-Match": newTag}
	e.ok(204, "DELETE", "/api/v1/volumes/v1", a, "")
	e.hdr = nil

	// Filters.
	e.ok(201, "POST", "/api/v1/pools", a, `{"name":"q","protection_domain":"pd1"}`)
	e.device(a, `{"name":"c1","sds":"c","pool":"q","path":"/var/lib/cairn/c1.img"}`)
	e.ok(201, "POST", "/api/v1/volumes", a, `{"name":"v2","pool":"p","size":1073741824}`)
	e.ok(201, "POST", "/api/v1/volumes", a, `{"name":"v3","pool":"p","size":1073741824}`)
	e.ok(201, "POST", "/api/v1/hosts", a, `{"name":"h1","type":"nbd"}`)
	e.ok(200, "POST", "/api/v1/volumes/v3/map", a, `{"host":"h1"}`)
	names := func(path string) string {
		t.Helper()
		st, l := e.do("GET", path, a, "")
		if st != 200 {
			t.Fatalf("%s: %d %v", path, st, l)
		}
		var out []string
		for _, o := range l.([]any) {
			out = append(out, o.(map[string]any)["name"].(string))
		}
		return strings.Join(out, ",")
	}
	for path, want := range map[string]string{
		"/api/v1/volumes":                              "v2,v3",
		"/api/v1/volumes?name=v3":                      "v3",
		"/api/v1/volumes?host=h1":                      "v3",
		"/api/v1/volumes?pool=p&host=h1":               "v3",
		"/api/v1/devices?pool=q":                       "c1",
		"/api/v1/devices?sds=a":                        "a1",
		"/api/v1/devices?state=normal":                 "a1,b1,c1",
		"/api/v1/sds?fault_set=fs1":                    "a,c",
		"/api/v1/pools?protection_domain=pd1":          "p,q",
		"/api/v1/fault-sets?protection_domain=pd1":     "fs1,fs2",
		"/api/v1/protection-domains?name=nope":         "",
		"/api/v1/users?role=admin":                     "admin",
		"/api/v1/hosts?type=iscsi":                     "",
		"/api/v1/volumes?pool=" + e.idOf("pools", "q"): "",
	} {
		if got := names(path); got != want {
			t.Errorf("%s: %q, want %q", path, got, want)
		}
	}
	e.failsWith(400, CodeInvalid, "size", `unknown filter "size"`, "GET", "/api/v1/volumes?size=1", a, "")
	e.failsWith(404, CodeNotFound, "pool", `pool "nope" not found`, "GET", "/api/v1/volumes?pool=nope", a, "")
}

func (e *env) idOf(collection, name string) string {
	e.t.Helper()
	return e.ok(200, "GET", "/api/v1/"+collection+"/"+name, e.admin, "")["id"].(string)
}

// TestIdempotentRepeats: a repeated create, map, unmap, PATCH or bootstrap
// answers 200 and writes nothing.
func TestIdempotentRepeats(t *testing.T) {
	e := newEnv(t)
	e.cluster()
	e.redundant()
	a := e.admin
	e.ok(201, "POST", "/api/v1/volumes", a, `{"name":"v1","pool":"p","size":1073741824}`)
	e.ok(201, "POST", "/api/v1/hosts", a, `{"name":"esx1","type":"iscsi","iqn":"iqn.1998-01.com.vmware:esx1","chap_user":"u","chap_secret":"0123456789abcdef"}`)
	e.ok(200, "POST", "/api/v1/volumes/v1/map", a, `{"host":"esx1"}`)
	for _, r := range []struct{ method, path, body string }{
		{"POST", "/api/v1/system/bootstrap", `{"name":"lab"}`},
		{"POST", "/api/v1/protection-domains", `{"name":"pd1"}`},
		{"POST", "/api/v1/fault-sets", `{"name":"fs1","protection_domain":"pd1"}`},
		{"POST", "/api/v1/sds", `{"name":"a","protection_domain":"pd1","fault_set":"fs1","address":"127.0.0.1:7101"}`},
		{"POST", "/api/v1/pools", `{"name":"p","protection_domain":"pd1"}`},
		{"POST", "/api/v1/pools", `{"name":"p","protection_domain":"pd1","spare_percent":10,"pg_count":256}`},
		{"POST", "/api/v1/devices", `{"name":"a1","sds":"a","pool":"p","path":"/var/lib/cairn/a1.img"}`},
		{"POST", "/api/v1/volumes", `{"name":"v1","pool":"p","size":1073741824,"thin":true}`},
		{"POST", "/api/v1/hosts", `{"name":"esx1","type":"iscsi","iqn":"IQN.1998-01.com.vmware:esx1","chap_user":"u","chap_secret":"0123456789abcdef"}`},
		{"POST", "/api/v1/volumes/v1/map", `{"host":"esx1"}`},
		{"PATCH", "/api/v1/volumes/v1", `{"size":1073741824}`},
		{"PATCH", "/api/v1/sds/a", `{"rebuild_mbps":0}`},
		{"PATCH", "/api/v1/pools/p", `{"rebuild_policy":"unlimited"}`},
		{"PATCH", "/api/v1/hosts/esx1", `{"chap_user":"u"}`},
	} {
		before := e.state()
		got := e.ok(200, r.method, r.path, a, r.body)
		if len(got) == 0 {
			t.Errorf("%s %s: no object in the answer", r.method, r.path)
		}
		if d := diffKeys(before, e.state()); d != "" {
			t.Errorf("%s %s %s: a repeat changed etcd: %s", r.method, r.path, r.body, d)
		}
	}
	// Different specs under a taken name are refused.
	e.failsWith(409, CodeAlreadyExists, "", "already exists", "POST", "/api/v1/sds", a, `{"name":"a","protection_domain":"pd1","address":"127.0.0.1:7999"}`)
	e.failsWith(409, CodeAlreadyExists, "", "already exists", "POST", "/api/v1/pools", a, `{"name":"p","protection_domain":"pd1","spare_percent":20}`)
	e.failsWith(409, CodeAlreadyExists, "", "already exists", "POST", "/api/v1/users", a, `{"name":"admin","role":"admin","password":"whatever-pw"}`)
	// Unmap twice: the second is a repeat.
	e.ok(200, "POST", "/api/v1/volumes/v1/unmap", a, `{"host":"esx1"}`)
	before := e.state()
	e.ok(200, "POST", "/api/v1/volumes/v1/unmap", a, `{"host":"esx1"}`)
	if d := diffKeys(before, e.state()); d != "" {
		t.Errorf("unmap repeat changed etcd: %s", d)
	}
}

// TestCapacity: the one unit set, with allocation reported by a (simulated)
// SDS: usable after spare and two copies, allocated = raw/2, free,
// provisioned sums and the over-provisioning ratio, per pool and system,
// and a volume's allocated bytes.
func TestCapacity(t *testing.T) {
	e := newEnv(t)
	e.cluster()
	e.redundant() // a1 and b1: 100 GiB each
	a := e.admin
	thin := e.ok(201, "POST", "/api/v1/volumes", a, `{"name":"thin1","pool":"p","size":107374182400}`)
	e.ok(201, "POST", "/api/v1/volumes", a, `{"name":"thick1","pool":"p","size":10737418240,"thin":false}`)
	ids := map[string]string{"a": e.idOf("sds", "a"), "b": e.idOf("sds", "b"), "a1": e.idOf("devices", "a1"), "b1": e.idOf("devices", "b1")}
	for _, st := range []model.SDSStats{
		{SDSID: ids["a"], Devices: map[string]model.DeviceUsage{ids["a1"]: {Capacity: 100 * GiB, Used: 6 << 20}}, VolumeChunks: map[string]int64{thin["id"].(string): 6}},
		{SDSID: ids["b"], Devices: map[string]model.DeviceUsage{ids["b1"]: {Capacity: 100 * GiB, Used: 4 << 20}}, VolumeChunks: map[string]int64{thin["id"].(string): 4}},
	} {
		st.Time = time.Now()
		b, _ := json.Marshal(st)
		must(e.etcd.Put(context.Background(), model.StatsKey(st.SDSID), string(b)))
	}

	raw := 200 * GiB
	usable := raw * 90 / 100 / 2
	want := map[string]float64{"raw": float64(raw), "usable": float64(usable), "spare_reserved": float64(raw/2 - usable),
		"raw_allocated": 10 << 20, "allocated": 5 << 20, "free": float64(usable - 5<<20),
		"thin_provisioned": float64(100 * GiB), "thick_reserved": float64(10 * GiB),
		"over_provisioning_ratio": float64(int(1000*float64(110*GiB)/float64(usable)+0.5)) / 1000}
	pool := e.ok(200, "GET", "/api/v1/pools/p", a, "")["capacity"].(map[string]any)
	sys := e.ok(200, "GET", "/api/v1/system", a, "")["capacity"].(map[string]any)
	for k, w := range want {
		if pool[k] != w || sys[k] != w {
			t.Errorf("capacity %s: pool %v, system %v, want %v", k, pool[k], sys[k], w)
		}
	}
	if len(pool) != len(want) {
		t.Errorf("pool capacity has fields %v", pool)
	}
	if v := e.ok(200, "GET", "/api/v1/volumes/thin1", a, ""); v["allocated"] != float64(5<<20) {
		t.Errorf("volume allocated %v, want 5 MiB (10 chunk copies / 2)", v["allocated"])
	}
}

// TestEventsAndStream: every mutating call (refused ones too) and every
// login is an event; the filters; the SSE stream replays and follows.
func TestEventsAndStream(t *testing.T) {
	e := newEnv(t)
	a := e.admin
	e.ok(201, "POST", "/api/v1/system/bootstrap", a, `{"name":"lab"}`)
	e.ok(201, "POST", "/api/v1/protection-domains", a, `{"name":"pd1"}`)
	e.ok(200, "POST", "/api/v1/protection-domains", a, `{"name":"pd1"}`) // a repeat is still audited
	e.fails(400, "unknown field", "POST", "/api/v1/protection-domains", a, `{"nmae":"pd1"}`)
	e.fails(401, "wrong user name or password", "POST", "/api/v1/login", "", `{"username":"admin","password":"nope"}`)
	list := func(q string) []map[string]any {
		t.Helper()
		st, v := e.do("GET", "/api/v1/events"+q, a, "")
		if st != 200 {
			t.Fatalf("events%s: %d %v", q, st, v)
		}
		var out []map[string]any
		for _, x := range v.([]any) {
			out = append(out, x.(map[string]any))
		}
		return out
	}
	all := list("")
	var msgs []string
	for _, ev := range all {
		msgs = append(msgs, fmt.Sprintf("%s %s %v", ev["kind"], ev["severity"], ev["message"]))
	}
	joined := strings.Join(msgs, "\n")
	for _, want := range []string{"login info admin: POST /api/v1/login -> 200", "audit info admin: POST /api/v1/system/bootstrap -> 201",
		"audit info admin: POST /api/v1/protection-domains -> 201", "audit info admin: POST /api/v1/protection-domains -> 200", "audit warning admin: POST /api/v1/protection-domains -> 400 invalid",
		"login warning admin: POST /api/v1/login -> 401"} {
		if !strings.Contains(joined, want) {
			t.Errorf("events lack %q:\n%s", want, joined)
		}
	}
	if o := all[2]["object"].(map[string]any); o["kind"] != "pd" || o["name"] != "pd1" {
		t.Errorf("create event object %v", o)
	}
	if got := list("?severity=warning"); len(got) != 2 {
		t.Errorf("warning and above: %d events", len(got))
	}
	if got := list("?object=pd1&kind=audit"); len(got) != 2 {
		t.Errorf("object pd1: %d events", len(got))
	}
	if got := list("?after=" + all[1]["id"].(string) + "&limit=2"); len(got) != 2 || got[0]["id"] != all[2]["id"] {
		t.Errorf("after/limit: %v", got)
	}
	e.failsWith(400, CodeInvalid, "severity", "use info, warning", "GET", "/api/v1/events?severity=loud", a, "")
	e.failsWith(400, CodeInvalid, "after", "not an event id", "GET", "/api/v1/events?after=x", a, "")

	// The stream: the backlog after Last-Event-ID, then a new event.
	req, _ := http.NewRequest("GET", e.url+"/api/v1/events/stream?kind=audit", nil)
	req.Header.Set("Authorization", "Bearer "+a)
	req.Header.Set("Last-Event-ID", all[1]["id"].(string))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("stream content type %q", resp.Header.Get("Content-Type"))
	}
	events := make(chan map[string]any, 16)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		id := ""
		for sc.Scan() {
			line := sc.Text()
			if v, ok := strings.CutPrefix(line, "id: "); ok {
				id = v
			}
			if v, ok := strings.CutPrefix(line, "data: "); ok {
				var ev map[string]any
				if json.Unmarshal([]byte(v), &ev) == nil && ev["id"] == id {
					events <- ev
				}
			}
		}
		close(events)
	}()
	next := func() map[string]any {
		t.Helper()
		select {
		case ev := <-events:
			return ev
		case <-ctx.Done():
			t.Fatal("no event on the stream")
		}
		return nil
	}
	if ev := next(); ev["id"] != all[2]["id"] {
		t.Errorf("first streamed event %v, want %v", ev["id"], all[2]["id"])
	}
	next() // the repeat
	next() // the refused create
	e.ok(201, "POST", "/api/v1/protection-domains", a, `{"name":"pd2"}`)
	if ev := next(); ev["object"].(map[string]any)["name"] != "pd2" || ev["status"] != 201.0 {
		t.Errorf("live event %v", ev)
	}
}

// TestAlertsAndJobsObserved: the observer raises an alert per down SDS
// (once, however many gateways observe), clears it when the SDS is back,
// and each is an event.
func TestAlertsObserved(t *testing.T) {
	e := newEnv(t)
	e.cluster()
	ctx := context.Background()
	// A second gateway on the same etcd observes too.
	other, err := New(ctx, Config{Etcd: e.etcd, StateDir: t.TempDir(), Logger: e.srv.log})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		if err := e.srv.observe(ctx); err != nil {
			t.Fatal(err)
		}
		if err := other.observe(ctx); err != nil {
			t.Fatal(err)
		}
	}
	alerts := func(q string) []any {
		_, v := e.do("GET", "/api/v1/alerts"+q, e.admin, "")
		return v.([]any)
	}
	down := 0
	for _, x := range alerts("?active=true") {
		al := x.(map[string]any)
		if al["kind"] == AlertSDSDown {
			down++
		}
	}
	if down != 3 {
		t.Fatalf("%d sds-down alerts for 3 down SDSs: %v", down, alerts(""))
	}
	live, _ := json.Marshal(model.SDSLive{Address: "127.0.0.1:7101"})
	must(e.etcd.Put(ctx, model.LiveKey(e.idOf("sds", "a")), string(live)))
	if err := other.observe(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(alerts("?active=true&object=a")); n != 0 {
		t.Errorf("a is up, %d active alerts remain", n)
	}
	if n := len(alerts("?active=false&object=a")); n != 1 {
		t.Errorf("a's cleared alert: %d", n)
	}
	_, v := e.do("GET", "/api/v1/events?kind=state&object=a", e.admin, "")
	if l := v.([]any); len(l) != 2 || !strings.HasPrefix(l[0].(map[string]any)["message"].(string), "alert raised: SDS a is down") ||
		!strings.HasPrefix(l[1].(map[string]any)["message"].(string), "alert cleared") {
		t.Errorf("state events of a: %v", v)
	}
	e.failsWith(400, CodeInvalid, "active", "use true", "GET", "/api/v1/alerts?active=maybe", e.admin, "")
}

// TestMDMMembers: list, add (a learner), repeat, remove, and the refusals,
// on the single-member embedded etcd.
func TestMDMMembers(t *testing.T) {
	e := newEnv(t)
	a := e.admin
	_, v := e.do("GET", "/api/v1/mdm/members", a, "")
	ms := v.([]any)
	if len(ms) != 1 || ms[0].(map[string]any)["raft_leader"] != true || ms[0].(map[string]any)["learner"] != false {
		t.Fatalf("members %v", v)
	}
	self := ms[0].(map[string]any)["name"].(string)
	// The raft leader, but no MDM runs the election here: no control loop
	// can move to it.
	e.failsWith(503, CodeUnavailable, "", "does not campaign", "POST", "/api/v1/mdm/leader", a, fmt.Sprintf(`{"name":%q}`, self))
	e.failsWith(400, CodeInvalid, "peer_url", "must be http(s)://host:port", "POST", "/api/v1/mdm/members", a, `{"name":"mdm4","peer_url":"10.0.0.4"}`)
	e.failsWith(404, CodeNotFound, "ref", "not found", "DELETE", "/api/v1/mdm/members/nope", a, "")
	e.failsWith(409, CodeInUse, "", "only voting member", "DELETE", "/api/v1/mdm/members/"+self, a, "")
	e.failsWith(404, CodeNotFound, "name", "not found", "POST", "/api/v1/mdm/leader", a, `{"name":"nope"}`)
	st, v, h := e.doH("POST", "/api/v1/mdm/members", a, `{"name":"mdm4","peer_url":"http://127.0.0.1:1","tie_breaker":true}`, nil)
	m, _ := v.(map[string]any)
	if st != 201 || m["learner"] != true || m["tie_breaker"] != true || !strings.Contains(m["initial_cluster"].(string), "mdm4=http://127.0.0.1:1") ||
		h.Get("Location") != "/api/v1/mdm/members/mdm4" {
		t.Fatalf("add: %d %v", st, v)
	}
	e.ok(200, "POST", "/api/v1/mdm/members", a, `{"name":"mdm4","peer_url":"http://127.0.0.1:1","tie_breaker":true}`)
	e.failsWith(409, CodeAlreadyExists, "peer_url", "already has peer URL", "POST", "/api/v1/mdm/members", a, `{"name":"mdm5","peer_url":"`+ms[0].(map[string]any)["peer_urls"].([]any)[0].(string)+`"}`)
	_, v = e.do("GET", "/api/v1/mdm/members", a, "")
	if len(v.([]any)) != 2 {
		t.Fatalf("after add: %v", v)
	}
	e.failsWith(400, CodeInvalid, "name", "cannot lead", "POST", "/api/v1/mdm/leader", a, `{"name":"http://127.0.0.1:1"}`)
	e.ok(204, "DELETE", "/api/v1/mdm/members/http:%2F%2F127.0.0.1:1", a, "")
	_, v = e.do("GET", "/api/v1/mdm/members", a, "")
	if len(v.([]any)) != 1 {
		t.Fatalf("after remove: %v", v)
	}
}

// TestDrainRefusals: a drain that would leave a pool holding volumes on one
// fault domain is refused and changes nothing.
func TestDrainRefusals(t *testing.T) {
	e := newEnv(t)
	e.cluster()   // a1 on a (fs1)
	e.redundant() // b1 on b (fs2)
	a := e.admin
	e.ok(201, "POST", "/api/v1/volumes", a, `{"name":"v1","pool":"p","size":1073741824}`)
	e.failsWith(409, CodeInUse, "", `removing SDS b would leave pool "p" (which holds volumes) on 1 fault domain`, "POST", "/api/v1/sds/b/remove", a, "")
	e.failsWith(409, CodeInUse, "", `removing device b1 would leave pool "p"`, "POST", "/api/v1/devices/b1/remove", a, "")
	e.failsWith(403, CodeForbidden, "", "needs role admin", "POST", "/api/v1/devices/b1/remove", e.user("op", model.RoleOperator), "")
	// c is in fs1 like a: its device may go, the pool keeps fs1 and fs2.
	e.device(a, `{"name":"c1","sds":"c","pool":"p","path":"/var/lib/cairn/c1.img"}`)
	if st, v := e.do("POST", "/api/v1/devices/c1/remove", a, ""); st != 202 {
		t.Fatalf("remove c1: %d %v", st, v)
	}
	if d := e.ok(200, "GET", "/api/v1/devices/c1", a, ""); d["state"] != model.DeviceRemoving {
		t.Errorf("c1 state %v", d["state"])
	}
	// An SDS without devices in a pool with volumes elsewhere may go too.
	e.ok(201, "POST", "/api/v1/sds", a, `{"name":"d","protection_domain":"pd1","address":"127.0.0.1:7104"}`)
	e.ok(200, "POST", "/api/v1/sds/d/maintenance", a, `{"mode":"instant"}`)
	e.failsWith(409, CodeConflict, "", "exit maintenance first", "POST", "/api/v1/sds/d/remove", a, "")
}
