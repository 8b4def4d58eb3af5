package gateway

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/cairn-storage/cairn/appliance/internal/model"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// CHAP secrets and passwords set through the API end under SecretPrefix:
// not in the model, the log prefix, an answer, an event or the gateway's
// log; logins and CHAP work from there, and a repeated create compares
// the stored secret.
func TestNoSecretOutsideSecretPrefix(t *testing.T) {
	e := newEnv(t)
	a := e.admin
	const s1, s2, pw1, pw2 = "first-chap-secret-1", "second-chap-secret-2", "first-password-1", "second-password-2"
	var answers []string
	keep := func(m map[string]any) {
		b, _ := json.Marshal(m)
		answers = append(answers, string(b))
	}
	keep(e.ok(201, "POST", "/api/v1/hosts", a, `{"name":"esx1","type":"iscsi","iqn":"iqn.1998-01.com.vmware:esx1","chap_user":"u","chap_secret":"`+s1+`"}`))
	keep(e.ok(200, "POST", "/api/v1/hosts", a, `{"name":"esx1","type":"iscsi","iqn":"iqn.1998-01.com.vmware:esx1","chap_user":"u","chap_secret":"`+s1+`"}`))
	e.failsWith(409, CodeAlreadyExists, "", "one host per initiator", "POST", "/api/v1/hosts", a, `{"name":"esx1","type":"iscsi","iqn":"iqn.1998-01.com.vmware:esx1","chap_user":"u","chap_secret":"another-secret-99"}`)
	keep(e.ok(200, "PATCH", "/api/v1/hosts/esx1", a, `{"chap_secret":"`+s2+`"}`))
	keep(e.ok(201, "POST", "/api/v1/users", a, `{"name":"ann","role":"operator","password":"`+pw1+`"}`))
	keep(e.ok(200, "PATCH", "/api/v1/users/ann", a, `{"password":"`+pw2+`"}`))
	e.fails(401, "wrong user name or password", "POST", "/api/v1/login", "", `{"username":"ann","password":"`+pw1+`"}`)
	tok := e.login("ann", pw2)
	for _, p := range []string{"/api/v1/hosts", "/api/v1/hosts/esx1", "/api/v1/users", "/api/v1/users/ann", "/api/v1/events"} {
		_, v := e.do("GET", p, a, "")
		b, _ := json.Marshal(v)
		answers = append(answers, string(b))
	}
	if h := e.ok(200, "GET", "/api/v1/hosts/esx1", tok, ""); h["chap"] != true || h["chap_user"] != "u" {
		t.Errorf("host %v", h)
	}

	ctx := context.Background()
	id := e.idOf("hosts", "esx1")
	r, err := e.etcd.Get(ctx, model.CHAPSecretKey(id))
	if err != nil || len(r.Kvs) != 1 || string(r.Kvs[0].Value) != s2 {
		t.Fatalf("CHAP secret key: %v %v", r, err)
	}
	r, err = e.etcd.Get(ctx, model.PasswordHashKey("ann"))
	if err != nil || len(r.Kvs) != 1 {
		t.Fatalf("password hash key: %v %v", r, err)
	}
	hash := string(r.Kvs[0].Value)
	secrets := []string{s1, s2, pw1, pw2, hash, "chap_secret", "password_hash"}
	all, err := e.etcd.Get(ctx, "/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range all.Kvs {
		if strings.HasPrefix(string(kv.Key), model.SecretPrefix) {
			continue
		}
		for _, s := range secrets {
			if strings.Contains(string(kv.Value), s) {
				t.Errorf("%s holds %q: %s", kv.Key, s, kv.Value)
			}
		}
	}
	for _, ans := range answers {
		for _, s := range secrets {
			if strings.Contains(ans, s) {
				t.Errorf("an answer holds %q: %s", s, ans)
			}
		}
	}
	logs := e.logs.String()
	for _, s := range secrets[:5] {
		if strings.Contains(logs, s) {
			t.Errorf("the gateway's log holds %q", s)
		}
	}
	// Deleting them deletes their secrets.
	e.ok(204, "DELETE", "/api/v1/users/ann", a, "")
	e.ok(204, "DELETE", "/api/v1/hosts/esx1", a, "")
	left, err := e.etcd.Get(ctx, model.SecretPrefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range left.Kvs {
		if string(kv.Key) != model.PasswordHashKey("admin") {
			t.Errorf("left after the deletes: %s", kv.Key)
		}
	}
}
