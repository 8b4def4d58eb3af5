package model_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/cairn-storage/cairn/appliance/internal/model"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// modelHolds fails the test if any key under the model prefix holds s.
func (f *fixture) modelHolds(s string) {
	f.t.Helper()
	r, err := f.c.Get(f.ctx, model.Prefix, clientv3.WithPrefix())
	if err != nil {
		f.t.Fatal(err)
	}
	for _, kv := range r.Kvs {
		if strings.Contains(string(kv.Value), s) {
			f.t.Errorf("model key %s holds a secret: %s", kv.Key, kv.Value)
		}
	}
}

func (f *fixture) value(key string) (string, bool) {
	f.t.Helper()
	r, err := f.c.Get(f.ctx, key)
	if err != nil {
		f.t.Fatal(err)
	}
	if len(r.Kvs) == 0 {
		return "", false
	}
	return string(r.Kvs[0].Value), true
}

// CHAP secrets and password hashes live under SecretPrefix, written and
// deleted with their objects; the model keeps a flag, never the secret.
func TestSecretsOutsideTheModel(t *testing.T) {
	f := newFixture(t)
	const sec1, sec2 = "first-secret-0001", "second-secret-0002"
	h := must(f.s.CreateHost(f.ctx, model.HostSpec{Name: "esx1", Type: model.HostISCSI, IQN: "iqn.1998-01.com.vmware:esx1", CHAPUser: "u", CHAPSecret: sec1}))
	var stored model.Host
	must(f.s.Get(f.ctx, model.Key(model.KindHost, h.ID), &stored))
	if !stored.CHAP || stored.CHAPUser != "u" || stored.CHAPSecret != "" {
		t.Fatalf("stored host %+v", stored)
	}
	if v, ok := f.value(model.CHAPSecretKey(h.ID)); !ok || v != sec1 {
		t.Fatalf("CHAP secret key: %q %v", v, ok)
	}
	// Changing only the user keeps the secret; a new secret replaces it.
	must(f.s.UpdateHost(f.ctx, "esx1", model.HostUpdate{CHAPUser: ptr("u2")}))
	if got := must(f.s.HostCHAPSecret(f.ctx, h.ID)); got != sec1 {
		t.Fatalf("secret after a user change: %q", got)
	}
	before := f.rev()
	must(f.s.UpdateHost(f.ctx, "esx1", model.HostUpdate{CHAPUser: ptr("u2"), CHAPSecret: ptr(sec1)}))
	if f.rev() != before {
		t.Errorf("a repeated update wrote")
	}
	must(f.s.UpdateHost(f.ctx, "esx1", model.HostUpdate{CHAPSecret: ptr(sec2)}))
	if got := must(f.s.CHAPSecrets(f.ctx)); got[h.ID] != sec2 || len(got) != 1 {
		t.Fatalf("secrets after a change: %v", got)
	}
	if _, err := f.s.UpdateHost(f.ctx, "esx1", model.HostUpdate{CHAPSecret: ptr("")}); model.FieldOf(err) != "chap_secret" {
		t.Fatalf("secret removed without the user: %v", err)
	}
	must(f.s.UpdateHost(f.ctx, "esx1", model.HostUpdate{CHAPUser: ptr(""), CHAPSecret: ptr("")}))
	if _, ok := f.value(model.CHAPSecretKey(h.ID)); ok {
		t.Errorf("CHAP off left the secret")
	}
	must(f.s.GetHost(f.ctx, "esx1"))
	must(f.s.UpdateHost(f.ctx, "esx1", model.HostUpdate{CHAPUser: ptr("u"), CHAPSecret: ptr(sec1)}))
	if err := f.s.DeleteHost(f.ctx, "esx1"); err != nil {
		t.Fatal(err)
	}
	if _, ok := f.value(model.CHAPSecretKey(h.ID)); ok {
		t.Errorf("deleted host left its secret")
	}

	must(f.s.CreateUser(f.ctx, model.UserSpec{Name: "ann", Role: model.RoleMonitor, Password: "correct horse"}))
	must(f.s.UpdateUser(f.ctx, "ann", model.UserUpdate{Password: "battery staple"}))
	hash, ok := f.value(model.PasswordHashKey("ann"))
	if !ok || !strings.HasPrefix(hash, "$argon2id$") {
		t.Fatalf("hash key: %q %v", hash, ok)
	}
	f.modelHolds(hash)
	f.modelHolds(sec1)
	f.modelHolds(sec2)
	if v, _ := f.value(model.Key(model.KindUser, "ann")); strings.Contains(v, "password") {
		t.Errorf("user object %s", v)
	}
	must(f.s.Authenticate(f.ctx, "ann", "battery staple"))
	must(f.s.CreateUser(f.ctx, model.UserSpec{Name: "boss", Role: model.RoleAdmin, Password: "correct horse"}))
	if err := f.s.DeleteUser(f.ctx, "ann"); err != nil {
		t.Fatal(err)
	}
	if _, ok := f.value(model.PasswordHashKey("ann")); ok {
		t.Errorf("deleted user left its hash")
	}
}

// A model written before SecretPrefix (secrets inline) is moved by
// MoveSecrets: every object loses its secret to its key, logins and CHAP
// work from there, and a second run writes nothing. More objects than one
// transaction takes move in batches.
func TestMoveSecrets(t *testing.T) {
	f := newFixture(t)
	// Today's layout first, to take the hash of a real password.
	must(f.s.CreateUser(f.ctx, model.UserSpec{Name: "root", Role: model.RoleAdmin, Password: "correct horse"}))
	hash, _ := f.value(model.PasswordHashKey("root"))
	// Rewrite it the way a Cairn from before SecretPrefix stored it.
	put := func(k, v string) {
		t.Helper()
		if _, err := f.c.Put(f.ctx, k, v); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.c.Delete(f.ctx, model.SecretPrefix, clientv3.WithPrefix()); err != nil {
		t.Fatal(err)
	}
	put(model.Key(model.KindUser, "root"), fmt.Sprintf(`{"name":"root","role":"admin","password_hash":%q}`, hash))
	put(model.Key(model.KindUser, "pending"), `{"name":"pending","role":"admin","password_hash":""}`)
	const n = 70 // more than one transaction's worth
	for i := range n {
		id := fmt.Sprintf("%016x", i+1)
		put(model.Key(model.KindHost, id), fmt.Sprintf(`{"id":%q,"name":"h%d","type":"iscsi","iqn":"iqn.1998-01.com.vmware:h%d","chap_user":"u%d","chap_secret":"legacy-secret-%04d"}`, id, i, i, i, i))
		put(model.NameKey(model.KindHost, fmt.Sprintf("h%d", i)), id)
	}
	noCHAP := fmt.Sprintf("%016x", 1000)
	put(model.Key(model.KindHost, noCHAP), fmt.Sprintf(`{"id":%q,"name":"plain","type":"iscsi","iqn":"iqn.1998-01.com.vmware:plain"}`, noCHAP))
	// Before the move no login works (the hash is not where it is read).
	if _, err := f.s.Authenticate(f.ctx, "root", "correct horse"); err == nil {
		t.Fatalf("login with the hash still inline")
	}

	moved, err := f.s.MoveSecrets(f.ctx)
	if err != nil || moved != n+2 {
		t.Fatalf("moved %d objects, err %v; want %d", moved, err, n+2)
	}
	f.modelHolds("legacy-secret")
	f.modelHolds(hash)
	f.modelHolds("password_hash")
	f.modelHolds("chap_secret")
	must(f.s.Authenticate(f.ctx, "root", "correct horse"))
	if _, ok := f.value(model.PasswordHashKey("pending")); ok {
		t.Errorf("an empty hash became a key")
	}
	secrets := must(f.s.CHAPSecrets(f.ctx))
	if len(secrets) != n {
		t.Fatalf("%d CHAP secrets, want %d", len(secrets), n)
	}
	for i := range n {
		id := fmt.Sprintf("%016x", i+1)
		h := must(f.s.GetHost(f.ctx, id))
		if !h.CHAP || h.CHAPUser != fmt.Sprintf("u%d", i) || secrets[id] != fmt.Sprintf("legacy-secret-%04d", i) {
			t.Fatalf("host %d after the move: %+v, secret %q", i, h, secrets[id])
		}
	}
	if h := must(f.s.GetHost(f.ctx, noCHAP)); h.CHAP {
		t.Errorf("host without CHAP got the flag")
	}
	// The moved host keeps working with the ops (the secret is loaded).
	must(f.s.UpdateHost(f.ctx, "h3", model.HostUpdate{CHAPUser: ptr("new-user")}))
	if got := must(f.s.HostCHAPSecret(f.ctx, fmt.Sprintf("%016x", 4))); got != "legacy-secret-0003" {
		t.Errorf("secret after an update of the moved host: %q", got)
	}

	before := f.rev()
	if moved, err := f.s.MoveSecrets(f.ctx); err != nil || moved != 0 {
		t.Fatalf("second run moved %d, err %v", moved, err)
	}
	if f.rev() != before {
		t.Errorf("a second run wrote")
	}
	var u map[string]any
	v, _ := f.value(model.Key(model.KindUser, "root"))
	if err := json.Unmarshal([]byte(v), &u); err != nil || u["role"] != "admin" || len(u) != 2 {
		t.Errorf("moved user object: %s", v)
	}
}
