package gateway

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-storage/cairn/appliance/internal/model"
	"github.com/cairn-storage/cairn/appliance/internal/update"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// bundleFile is an update bundle of a stand-in build of version v.
func bundleFile(t *testing.T, v string) []byte {
	t.Helper()
	dir := t.TempDir()
	for _, n := range update.Binaries {
		os.WriteFile(filepath.Join(dir, n), []byte("#!/bin/sh\necho "+v+"\n"), 0o755)
	}
	var buf bytes.Buffer
	if _, err := update.Write(&buf, dir); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// Upload (verified, chunked into etcd, 2 versions kept), order one SVM
// whose updater reported, list the SVMs' states; the refusals say what to do.
func TestUpgradeBundlesAndOrders(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	gz := map[string]string{"Content-Type": "application/gzip"}
	upload := func(token string, raw []byte, hdr map[string]string) (int, any) {
		st, v, _ := e.doH("POST", "/api/v1/upgrade/bundles", token, string(raw), hdr)
		return st, v
	}
	raw := bundleFile(t, "0.2.0")
	st, v := upload(e.admin, raw, gz)
	if st != 201 {
		t.Fatalf("upload: %d %v", st, v)
	}
	b := v.(map[string]any)
	if b["version"] != "0.2.0" || b["size"] != float64(len(raw)) || len(b["sha256"].(string)) != 64 {
		t.Fatalf("upload answer %v", b)
	}
	// Stored in etcd, read back whole and verified as the SVMs read it.
	stored, err := update.Store{Etcd: e.etcd}.Bundle(ctx, "0.2.0")
	if err != nil || stored.SHA256 != b["sha256"] {
		t.Fatalf("read back: %v %v", stored, err)
	}

	// Refusals: a monitor may not upload; a damaged bundle, a wrong media type.
	mon := e.user("watcher", model.RoleMonitor)
	if st, _ := upload(mon, raw, gz); st != 403 {
		t.Errorf("monitor upload: %d", st)
	}
	bad := append([]byte{}, raw...)
	bad[len(bad)/2] ^= 0xff
	if st, v := upload(e.admin, bad, gz); st != 400 || !strings.Contains(v.(map[string]any)["message"].(string), "invalid update bundle") {
		t.Errorf("damaged bundle: %d %v", st, v)
	}
	if st, v := upload(e.admin, raw, map[string]string{"Content-Type": "application/json"}); st != 400 || !strings.Contains(v.(map[string]any)["message"].(string), "application/gzip") {
		t.Errorf("wrong media type: %d %v", st, v)
	}

	// A third version drops the oldest upload.
	for _, ver := range []string{"0.2.1", "0.2.2"} {
		if st, v := upload(e.admin, bundleFile(t, ver), gz); st != 201 {
			t.Fatalf("upload %s: %d %v", ver, st, v)
		}
	}
	_, list := e.do("GET", "/api/v1/upgrade/bundles", mon, "")
	var versions []string
	for _, x := range list.([]any) {
		versions = append(versions, x.(map[string]any)["version"].(string))
	}
	if strings.Join(versions, ",") != "0.2.1,0.2.2" {
		t.Fatalf("stored versions %v; want the two latest", versions)
	}
	if r, _ := e.etcd.Get(ctx, model.UpgradeChunkPrefix+"0.2.0/", clientv3.WithPrefix()); r.Count != 0 {
		t.Fatalf("chunks of the dropped version remain: %d", r.Count)
	}

	// Orders: to an SVM whose updater has not reported, of a version not stored.
	e.fails(404, "no updater has reported from SVM \"svm1\"", "POST", "/api/v1/upgrade/svms/svm1", e.admin, `{"version":"0.2.2"}`)
	store := update.Store{Etcd: e.etcd}
	if err := store.PutState(ctx, update.State{Name: "svm1", Running: "0.2.0", State: update.StateIdle}); err != nil {
		t.Fatal(err)
	}
	e.fails(404, "no bundle of version 0.2.0 is stored", "POST", "/api/v1/upgrade/svms/svm1", e.admin, `{"version":"0.2.0"}`)
	e.fails(400, "not a release number", "POST", "/api/v1/upgrade/svms/svm1", e.admin, `{"version":"latest"}`)
	e.fails(403, "", "POST", "/api/v1/upgrade/svms/svm1", mon, `{"version":"0.2.2"}`)
	o := e.ok(202, "POST", "/api/v1/upgrade/svms/svm1", e.admin, `{"version":"0.2.2"}`)
	if o["name"] != "svm1" || o["ordered"] != "0.2.2" || o["running"] != "0.2.0" {
		t.Fatalf("order answer %v", o)
	}
	if got, _, err := store.Order(ctx, "svm1"); err != nil || got.Version != "0.2.2" {
		t.Fatalf("stored order %+v %v", got, err)
	}
	// While the SVM installs, a new order waits.
	store.PutState(ctx, update.State{Name: "svm1", Running: "0.2.0", Ordered: "0.2.2", State: update.StateInstalling, Message: "restarting cairn-mdm.service on 0.2.2"})
	e.fails(409, "installing 0.2.2", "POST", "/api/v1/upgrade/svms/svm1", e.admin, `{"version":"0.2.1"}`)
	_, list = e.do("GET", "/api/v1/upgrade/svms", mon, "")
	svms := list.([]any)
	if len(svms) != 1 {
		t.Fatalf("svms %v", svms)
	}
	s := svms[0].(map[string]any)
	if s["name"] != "svm1" || s["state"] != "installing" || s["ordered"] != "0.2.2" || s["running"] != "0.2.0" ||
		!strings.Contains(s["message"].(string), "cairn-mdm") || s["updated"] == "" {
		t.Fatalf("svm state %v", s)
	}
}
