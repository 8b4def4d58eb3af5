package mdm_test

import (
	"context"
	"fmt"
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
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Cheap password hashes: the cost of the real ones is the point of them.
func init() { model.PasswordHashParams = model.Argon2Params{MemoryKiB: 64, Passes: 1, Lanes: 1} }

// CHAP secrets and password hashes are outside the model: the sds, nbd
// and client roles read the model but no secret; the target reads the
// CHAP secrets (to configure LIO) and nothing else of them; no daemon
// role writes one.
func TestSecretsReadableByGatewayAndTargetOnly(t *testing.T) {
	kit := pkitest.New(t)
	u := etcdtest.StartTLS(t, kit)
	ctx := ctxT(t)
	gw := model.NewStore(etcdtest.Client(t, u, kit.Identity(pki.RoleGateway, "gw")))
	const secret = "chap-secret-0123"
	h, err := gw.CreateHost(ctx, model.HostSpec{Name: "esx1", Type: model.HostISCSI, IQN: "iqn.1998-01.com.vmware:esx1", CHAPUser: "u", CHAPSecret: secret})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gw.CreateUser(ctx, model.UserSpec{Name: "ann", Role: model.RoleAdmin, Password: "correct horse"}); err != nil {
		t.Fatal(err)
	}
	hash, err := gw.C.Get(ctx, model.PasswordHashKey("ann"))
	if err != nil || len(hash.Kvs) != 1 {
		t.Fatalf("gateway reads the hash: %v %v", hash, err)
	}

	for _, role := range []string{pki.RoleSDS, pki.RoleNBD, pki.RoleClient, pki.RoleTarget} {
		c := etcdtest.Client(t, u, kit.Identity(role, role+"1"))
		// Every role still reads the whole model, and it holds no secret.
		r, err := c.Get(ctx, model.Prefix, clientv3.WithPrefix())
		if err != nil || len(r.Kvs) == 0 {
			t.Fatalf("%s reads the model: %v", role, err)
		}
		for _, kv := range r.Kvs {
			if strings.Contains(string(kv.Value), secret) || strings.Contains(string(kv.Value), string(hash.Kvs[0].Value)) {
				t.Errorf("%s read a secret in the model at %s", role, kv.Key)
			}
		}
		if _, err := c.Get(ctx, model.SecretPrefix, clientv3.WithPrefix()); !denied(err) {
			t.Errorf("%s reads every secret: %v, want permission denied", role, err)
		}
		if _, err := c.Get(ctx, model.PasswordHashKey("ann")); !denied(err) {
			t.Errorf("%s reads a password hash: %v, want permission denied", role, err)
		}
		if _, err := c.Get(ctx, model.PasswordHashPrefix, clientv3.WithPrefix()); !denied(err) {
			t.Errorf("%s reads the password hashes: %v, want permission denied", role, err)
		}
		for _, k := range []string{model.CHAPSecretKey(h.ID), model.PasswordHashKey("ann")} {
			if _, err := c.Put(ctx, k, "owned"); !denied(err) {
				t.Errorf("%s writes %s: %v, want permission denied", role, k, err)
			}
		}
		secrets, err := model.NewStore(c).CHAPSecrets(ctx)
		if role == pki.RoleTarget {
			if err != nil || secrets[h.ID] != secret {
				t.Errorf("target reads the CHAP secrets: %v %v", secrets, err)
			}
		} else if !denied(err) {
			t.Errorf("%s reads the CHAP secrets: %v %v, want permission denied", role, secrets, err)
		}
	}
	if got, err := gw.HostCHAPSecret(ctx, h.ID); err != nil || got != secret {
		t.Fatalf("secret changed: %q %v", got, err)
	}
	if _, err := gw.Authenticate(ctx, "ann", "correct horse"); err != nil {
		t.Fatalf("login: %v", err)
	}
}

// A cluster upgraded from a Cairn that kept secrets inline in the model:
// the MDM leader moves them out at the start of its term, before it
// enables access control, and says so in its log without the secrets.
func TestLeaderMovesInlineSecrets(t *testing.T) {
	kit := pkitest.New(t)
	var logBuf testlog.Buffer
	pu, cu := "https://"+porttest.Addr(t), "https://"+porttest.Addr(t)
	cfg := mdm.Config{Name: "mdm1", DataDir: filepath.Join(t.TempDir(), "mdm1"), PeerURL: pu, ClientURL: cu,
		Identity: kit.Identity(pki.RoleMDM, "mdm1"), Logger: slog.New(slog.NewTextHandler(&logBuf, nil)),
		ElectionTTL: 2}
	// The older version's data: its etcd, secrets inline.
	e, err := mdm.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(30 * time.Second):
		t.Fatal("etcd not ready")
	}
	ctx := ctxT(t)
	old := model.NewStore(etcdtest.Client(t, cu, cfg.Identity))
	if _, err := old.CreateUser(ctx, model.UserSpec{Name: "root", Role: model.RoleAdmin, Password: "correct horse"}); err != nil {
		t.Fatal(err)
	}
	hr, err := old.C.Get(ctx, model.PasswordHashKey("root"))
	if err != nil {
		t.Fatal(err)
	}
	hash := string(hr.Kvs[0].Value)
	const id, secret = "00000000000000a1", "inline-chap-secret"
	for k, v := range map[string]string{
		model.Key(model.KindUser, "root"):     fmt.Sprintf(`{"name":"root","role":"admin","password_hash":%q}`, hash),
		model.Key(model.KindHost, id):         fmt.Sprintf(`{"id":%q,"name":"esx1","type":"iscsi","iqn":"iqn.1998-01.com.vmware:esx1","chap_user":"u","chap_secret":%q}`, id, secret),
		model.NameKey(model.KindHost, "esx1"): id,
	} {
		if _, err := old.C.Put(ctx, k, v); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := old.C.Delete(ctx, model.SecretPrefix, clientv3.WithPrefix()); err != nil {
		t.Fatal(err)
	}
	old.C.Close()
	e.Close()

	// This version's MDM on that data.
	rctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := mdm.Run(rctx, cfg); err != nil {
			t.Errorf("mdm: %v", err)
		}
	}()
	t.Cleanup(func() { cancel(); wg.Wait() })
	target := model.NewStore(etcdtest.Client(t, cu, kit.Identity(pki.RoleTarget, "tgt1")))
	sds := etcdtest.Client(t, cu, kit.Identity(pki.RoleSDS, "sds1"))
	deadline := time.Now().Add(60 * time.Second)
	for {
		// The target reads the moved secret only once access control is
		// on, which the leader enables after the move.
		secrets, err := target.CHAPSecrets(ctx)
		if err == nil && secrets[id] == secret {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("secrets not moved in 60 s: %v %v\n%s", secrets, err, logBuf.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
	r, err := sds.Get(ctx, model.Prefix, clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range r.Kvs {
		if v := string(kv.Value); strings.Contains(v, secret) || strings.Contains(v, hash) || strings.Contains(v, "chap_secret") || strings.Contains(v, "password_hash") {
			t.Errorf("model key %s after the move: %s", kv.Key, v)
		}
	}
	gw := model.NewStore(etcdtest.Client(t, cu, kit.Identity(pki.RoleGateway, "gw")))
	if _, err := gw.Authenticate(ctx, "root", "correct horse"); err != nil {
		t.Fatalf("login after the move: %v", err)
	}
	if h, err := gw.GetHost(ctx, "esx1"); err != nil || !h.CHAP || h.CHAPUser != "u" {
		t.Fatalf("host after the move: %+v %v", h, err)
	}
	logs := logBuf.String()
	if !strings.Contains(logs, "moved out of the model") || !strings.Contains(logs, "objects=2") {
		t.Errorf("the move is not logged:\n%s", logs)
	}
	if strings.Contains(logs, secret) || strings.Contains(logs, hash) {
		t.Errorf("a secret in the MDM's log:\n%s", logs)
	}
}
