package mdm_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairn-storage/cairn/appliance/internal/etcdtest"
	"github.com/cairn-storage/cairn/appliance/internal/mdm"
	"github.com/cairn-storage/cairn/appliance/internal/model"
	"github.com/cairn-storage/cairn/appliance/internal/pki"
	"github.com/cairn-storage/cairn/appliance/internal/pki/pkitest"
	"github.com/cairn-storage/cairn/appliance/internal/porttest"
	"github.com/cairn-storage/cairn/appliance/internal/testlog"
)

// TestLeaderWritesTheSchemaAndLeadsNoNewerModel: the first leader of a new
// system records the model schema; a member whose binary is older than the
// model (brought back after the system moved on) does not lead it.
func TestLeaderWritesTheSchemaAndLeadsNoNewerModel(t *testing.T) {
	kit := pkitest.New(t)
	cfg := mdm.Config{Name: "mdm1", DataDir: filepath.Join(t.TempDir(), "mdm1"), PeerURL: "https://" + porttest.Addr(t),
		ClientURL: "https://" + porttest.Addr(t), Identity: kit.Identity(pki.RoleMDM, "mdm1"), ElectionTTL: 2}
	run := func(logs *testlog.Buffer) func() {
		c := cfg
		c.Logger = slog.New(slog.NewTextHandler(logs, nil))
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := mdm.Run(ctx, c); err != nil {
				t.Errorf("mdm: %v", err)
			}
		}()
		return func() { cancel(); wg.Wait() }
	}
	var first testlog.Buffer
	stop := run(&first)
	cli := etcdtest.Client(t, cfg.ClientURL, kit.Identity(pki.RoleGateway, "gw"))
	ctx := ctxT(t)
	deadline := time.Now().Add(60 * time.Second)
	for {
		r, err := cli.Get(ctx, model.SchemaKey)
		if err == nil && len(r.Kvs) == 1 {
			var s model.Schema
			if json.Unmarshal(r.Kvs[0].Value, &s) != nil || s.Version != model.SchemaVersion {
				t.Fatalf("schema written: %s", r.Kvs[0].Value)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no schema written in 60 s: %v\n%s", err, first.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
	// The system moves past this binary.
	if _, err := cli.Put(ctx, model.SchemaKey, `{"version":99,"written_by":"9.0.0"}`); err != nil {
		t.Fatal(err)
	}
	cli.Close()
	stop()
	var second testlog.Buffer
	stop = run(&second)
	defer stop()
	for !strings.Contains(second.String(), "not leading: model schema") {
		if time.Now().After(deadline.Add(30 * time.Second)) {
			t.Fatalf("an MDM older than the model led it:\n%s", second.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
	if !strings.Contains(second.String(), "upgrade Cairn on this host") {
		t.Errorf("the refusal does not say what to do:\n%s", second.String())
	}
}
