package gateway

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/cairn-storage/cairn/appliance/internal/model"
)

// SVM records through the API: written ahead of a new SVM (what peer sync on
// the other SVMs reads), refused when malformed, deleted idempotently.
func TestSVMRecords(t *testing.T) {
	e := newEnv(t)
	a := e.admin
	st, v := e.do("PUT", "/api/v1/svms/cairn-svm-esx05", a, `{"addresses":["10.20.0.15","::ffff:10.30.0.15","10.20.0.15"],"roles":["sds","target"],"target_port":5}`)
	if st != 200 {
		t.Fatalf("PUT: %d %v", st, v)
	}
	r, err := e.etcd.Get(context.Background(), model.SVMKey("cairn-svm-esx05"))
	if err != nil || len(r.Kvs) != 1 {
		t.Fatalf("no record in etcd: %v", err)
	}
	var rec model.SVM
	if err := json.Unmarshal(r.Kvs[0].Value, &rec); err != nil || rec.Name != "cairn-svm-esx05" || len(rec.Addresses) != 2 ||
		rec.Addresses[1] != "10.30.0.15" || rec.TargetPort != 5 || len(rec.Roles) != 2 {
		t.Fatalf("record %s (%v)", r.Kvs[0].Value, err)
	}
	if st, v := e.do("GET", "/api/v1/svms", a, ""); st != 200 || len(v.([]any)) != 1 {
		t.Fatalf("GET: %d %v", st, v)
	}
	for _, bad := range []string{`{"addresses":[]}`, `{"addresses":["10.0.0.1%eth0"]}`, `{"addresses":["127.0.0.1"]}`,
		`{"addresses":["10.0.0.1"],"roles":["nbd"]}`, `{"addresses":["10.0.0.1"],"name":"other"}`, `{"addresses":["10.0.0.1"],"extra":1}`} {
		if st, v := e.do("PUT", "/api/v1/svms/cairn-svm-esx06", a, bad); st != 400 {
			t.Errorf("PUT %s: %d %v, want 400", bad, st, v)
		}
	}
	monitor := e.user("mon", model.RoleMonitor)
	if st, _ := e.do("PUT", "/api/v1/svms/cairn-svm-esx06", monitor, `{"addresses":["10.20.0.16"]}`); st != 403 {
		t.Errorf("a monitor wrote an SVM record: %d", st)
	}
	// The SVM's upgrade order and state (as its updater leaves them) go with
	// its record: a removed SVM is not listed by GET /upgrade/svms.
	for _, k := range []string{model.UpgradeOrderPrefix + "cairn-svm-esx05", model.UpgradeStatePrefix + "cairn-svm-esx05", model.UpgradeStatePrefix + "cairn-svm-esx04"} {
		if _, err := e.etcd.Put(context.Background(), k, `{}`); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 2; i++ { // the second: nothing to delete, still done
		if st, v := e.do("DELETE", "/api/v1/svms/cairn-svm-esx05", a, ""); st != 204 {
			t.Fatalf("DELETE #%d: %d %v", i+1, st, v)
		}
	}
	for _, k := range []string{model.SVMKey("cairn-svm-esx05"), model.UpgradeOrderPrefix + "cairn-svm-esx05", model.UpgradeStatePrefix + "cairn-svm-esx05"} {
		if r, _ := e.etcd.Get(context.Background(), k); len(r.Kvs) != 0 {
			t.Errorf("%s outlived the SVM's DELETE", k)
		}
	}
	if r, _ := e.etcd.Get(context.Background(), model.UpgradeStatePrefix+"cairn-svm-esx04"); len(r.Kvs) != 1 {
		t.Error("another SVM's upgrade state went with it")
	}
}
