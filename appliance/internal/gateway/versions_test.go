package gateway

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/cairn-storage/cairn/appliance/internal/buildinfo"
	"github.com/cairn-storage/cairn/appliance/internal/model"
	"github.com/cairn-storage/cairn/appliance/internal/pki"
	"github.com/cairn-storage/cairn/appliance/internal/pki/pkitest"
)

// TestVersionsListedAndMixedAlerted: daemons publish their version with their
// certificate (the product's pki.Publish); GET /system/versions counts them;
// a daemon of an older version (as during a rolling upgrade) makes the
// system mixed and raises versions-mixed naming it, which clears once it is
// gone.
func TestVersionsListedAndMixedAlerted(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	kit := pkitest.New(t)
	pkitest.Publish(t, e.etcd, kit.Identity(pki.RoleSDS, "sds1"))
	pkitest.Publish(t, e.etcd, kit.Identity(pki.RoleTarget, "svm-a"))
	now := buildinfo.Version()

	versions := func(want int) versionsView {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			st, v := e.do("GET", "/api/v1/system/versions", e.admin, "")
			if st != 200 {
				t.Fatalf("GET /system/versions: %d %v", st, v)
			}
			b, _ := json.Marshal(v)
			var got versionsView
			if err := json.Unmarshal(b, &got); err != nil {
				t.Fatal(err)
			}
			if len(got.Daemons) == want {
				return got
			}
			if time.Now().After(deadline) {
				t.Fatalf("versions: %+v; want %d daemons", got, want)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	v := versions(2)
	if v.Mixed || v.Gateway != now || v.Versions[now] != 2 || len(v.Versions) != 1 ||
		v.Daemons[0] != (daemonVersion{pki.RoleSDS, "sds1", now}) || v.Daemons[1] != (daemonVersion{pki.RoleTarget, "svm-a", now}) {
		t.Fatalf("one version: %+v", v)
	}

	// An SDS still on the older version, as its host waits its turn in a roll.
	old := pki.InfoOf(kit.Identity(pki.RoleSDS, "sds2").Leaf())
	old.Version = "0.0.9"
	b, _ := json.Marshal(old)
	must(e.etcd.Put(ctx, model.CertKey(pki.RoleSDS, "sds2"), string(b)))
	v = versions(3)
	if !v.Mixed || v.Versions["0.0.9"] != 1 || v.Versions[now] != 2 {
		t.Fatalf("mixed: %+v", v)
	}
	mixed := func() []map[string]any {
		if err := e.srv.observe(ctx); err != nil {
			t.Fatal(err)
		}
		_, l := e.do("GET", "/api/v1/alerts?active=true", e.admin, "")
		var out []map[string]any
		for _, x := range l.([]any) {
			if a := x.(map[string]any); a["kind"] == AlertVersionsMixed {
				out = append(out, a)
			}
		}
		return out
	}
	al := mixed()
	if len(al) != 1 || al[0]["severity"] != SeverityWarning {
		t.Fatalf("versions-mixed alerts: %v", al)
	}
	if msg := al[0]["message"].(string); !strings.Contains(msg, "0.0.9 on 1, "+now+" on 2") || !strings.Contains(msg, "sds sds2 still run 0.0.9") {
		t.Errorf("the alert does not say which versions run where: %q", msg)
	}
	must(e.etcd.Delete(ctx, model.CertKey(pki.RoleSDS, "sds2")))
	versions(2)
	if al := mixed(); len(al) != 0 {
		t.Fatalf("one version again, yet versions-mixed is active: %v", al)
	}
}

func TestVersionOrder(t *testing.T) {
	in := []string{"0.10.0", "unknown", "0.9.1", "1.0.0", "0.9.0", "x"}
	for i := range in {
		for j := range in {
			if i != j && versionLess(in[i], in[j]) && versionLess(in[j], in[i]) {
				t.Fatalf("%s and %s each before the other", in[i], in[j])
			}
		}
	}
	for _, c := range [][2]string{{"unknown", "0.0.1"}, {"0.9.0", "0.9.1"}, {"0.9.1", "0.10.0"}, {"0.10.0", "1.0.0"}, {"1.0.0", "x"}} {
		if !versionLess(c[0], c[1]) || versionLess(c[1], c[0]) {
			t.Errorf("want %s before %s", c[0], c[1])
		}
	}
}
