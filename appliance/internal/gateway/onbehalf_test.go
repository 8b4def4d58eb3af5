package gateway

import (
	"strings"
	"testing"

	"github.com/cairn-storage/cairn/appliance/internal/model"
)

// TestOnBehalfOf: a delegate user's X-Cairn-On-Behalf-Of is recorded in the
// audit event (message and field); any other user sending it is refused and
// the refusal is audited under its own name only; a bad value is refused;
// the header changes no role: a delegate monitor stays a monitor.
func TestOnBehalfOf(t *testing.T) {
	e := newEnv(t)
	e.cluster()
	e.redundant()
	e.ok(201, "POST", "/api/v1/users", e.admin, `{"name":"vc-operator","role":"operator","password":"password-vc-operator","delegate":true}`)
	e.ok(201, "POST", "/api/v1/users", e.admin, `{"name":"vc-monitor","role":"monitor","password":"password-vc-monitor","delegate":true}`)
	vop := e.login("vc-operator", "password-vc-operator")
	vmon := e.login("vc-monitor", "password-vc-monitor")
	op := e.user("op", model.RoleOperator)
	if u := e.ok(200, "GET", "/api/v1/users/vc-operator", e.admin, ""); u["delegate"] != true {
		t.Errorf("user view: %v", u)
	}
	if u := e.ok(200, "GET", "/api/v1/users/op", e.admin, ""); u["delegate"] != false {
		t.Errorf("user view: %v", u)
	}

	alice := map[string]string{OnBehalfOfHeader: `VSPHERE.LOCAL\alice`}
	if st, v, _ := e.doH("POST", "/api/v1/volumes", vop, `{"name":"va","pool":"p","size":1073741824}`, alice); st != 201 {
		t.Fatalf("delegate create: %d %v", st, v)
	}
	// Not a delegate: refused, whatever its role.
	if st, v, _ := e.doH("POST", "/api/v1/volumes", op, `{"name":"vb","pool":"p","size":1073741824}`, alice); st != 403 ||
		!strings.Contains(v.(map[string]any)["message"].(string), `user "op" may not act on behalf of others`) {
		t.Fatalf("non-delegate with header: %d %v", st, v)
	}
	e.fails(404, "not found", "GET", "/api/v1/volumes/vb", e.admin, "")
	// A delegate monitor is still a monitor.
	if st, v, _ := e.doH("POST", "/api/v1/volumes", vmon, `{"name":"vc","pool":"p","size":1073741824}`, map[string]string{OnBehalfOfHeader: "bob"}); st != 403 ||
		!strings.Contains(v.(map[string]any)["message"].(string), "needs role operator or admin") {
		t.Fatalf("delegate monitor: %d %v", st, v)
	}
	for _, bad := range []string{"a\tb", strings.Repeat("x", maxOnBehalfOf+1)} {
		if st, _, _ := e.doH("DELETE", "/api/v1/volumes/va", vop, "", map[string]string{OnBehalfOfHeader: bad}); st != 400 {
			t.Errorf("header %.20q: status %d, want 400", bad, st)
		}
	}
	e.ok(200, "GET", "/api/v1/volumes/va", e.admin, "")
	// A user may turn delegate on and off (admin only).
	e.fails(403, "needs role admin", "PATCH", "/api/v1/users/op", op, `{"delegate":true}`)
	e.ok(200, "PATCH", "/api/v1/users/op", e.admin, `{"delegate":true}`)
	if st, v, _ := e.doH("DELETE", "/api/v1/volumes/va", op, "", map[string]string{OnBehalfOfHeader: "carol@vsphere.local"}); st != 204 {
		t.Fatalf("op as delegate: %d %v", st, v)
	}

	st, evs := e.do("GET", "/api/v1/events?kind=audit&limit=1000", e.admin, "")
	if st != 200 {
		t.Fatalf("events: %d %v", st, evs)
	}
	var got []string
	for _, x := range evs.([]any) {
		ev := x.(map[string]any)
		if ev["method"] == "POST" && strings.HasPrefix(ev["path"].(string), "/api/v1/volumes") ||
			ev["method"] == "DELETE" && ev["path"] == "/api/v1/volumes/va" {
			obo, _ := ev["on_behalf_of"].(string)
			got = append(got, ev["user"].(string)+"|"+obo+"|"+ev["message"].(string))
		}
	}
	want := []string{
		`vc-operator|VSPHERE.LOCAL\alice|vc-operator for VSPHERE.LOCAL\alice: POST /api/v1/volumes -> 201`,
		`op||op: POST /api/v1/volumes -> 403`,
		`vc-monitor|bob|vc-monitor for bob: POST /api/v1/volumes -> 403`,
		"vc-operator||vc-operator: DELETE /api/v1/volumes/va -> 400",
		"vc-operator||vc-operator: DELETE /api/v1/volumes/va -> 400",
		"op|carol@vsphere.local|op for carol@vsphere.local: DELETE /api/v1/volumes/va -> 204",
	}
	if len(got) != len(want) {
		t.Fatalf("audit events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("audit event %d: %q, want prefix %q", i, got[i], want[i])
		}
	}
}
