package gateway

import (
	"context"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cairn-storage/cairn/appliance/internal/etcdtest"
	"github.com/cairn-storage/cairn/appliance/internal/model"
	"github.com/cairn-storage/cairn/appliance/internal/testlog"
)

const testBootstrapToken = "cj1.bootstrap-0123456789abcdef0123"

func tokenEnv(t *testing.T, ttl time.Duration) *env {
	t.Helper()
	file := filepath.Join(t.TempDir(), "join-token")
	if err := os.WriteFile(file, []byte(testBootstrapToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return newEnv(t, func(c *Config) { c.BootstrapTokenFile, c.BootstrapTokenTTL = file, ttl })
}

// redeem posts the token and returns the status; a refusal must change nothing.
func (e *env) redeem(token, password string, want int) {
	e.t.Helper()
	before := e.state() // the model, not the audit log (a refusal is an event)
	st, v := e.do("POST", "/api/v1/bootstrap/admin-password", "", `{"token":"`+token+`","password":"`+password+`"}`)
	if st != want {
		e.t.Fatalf("redeem: status %d, want %d: %v", st, want, v)
	}
	if want != 200 {
		if after := e.state(); !maps.Equal(before, after) {
			e.t.Errorf("a refused redeem changed etcd: %s", diffKeys(before, after))
		}
		if m, _ := v.(map[string]any); !strings.Contains(strings.ToLower(toString(m)), "unknown, expired or already used") {
			e.t.Errorf("refusal does not say why: %v", v)
		}
	}
}

func toString(m map[string]any) string {
	var b strings.Builder
	for _, v := range m {
		s, _ := v.(string)
		b.WriteString(s)
	}
	return b.String()
}

func TestBootstrapTokenOnce(t *testing.T) {
	e := tokenEnv(t, time.Minute)
	if strings.Contains(e.logs.String(), testBootstrapToken) {
		t.Fatal("the gateway logged the bootstrap token")
	}
	r, err := e.etcd.Get(context.Background(), model.TokenPrefix+"bootstrap/", clientv3.WithPrefix())
	if err != nil || len(r.Kvs) != 1 || strings.Contains(string(r.Kvs[0].Key)+string(r.Kvs[0].Value), testBootstrapToken) {
		t.Fatalf("want one stored token record, by hash only: %v %v", r, err)
	}
	oldPW, _ := os.ReadFile(filepath.Join(e.dir, AdminPasswordFile))

	e.redeem("cj1.wrong-0123456789abcdef0123456", "deployer-password-1", 401)
	e.redeem(testBootstrapToken, "deployer-password-1", 200)
	e.login("admin", "deployer-password-1")
	if st, _ := e.do("POST", "/api/v1/login", "", `{"username":"admin","password":"`+strings.TrimSpace(string(oldPW))+`"}`); st != 401 {
		t.Errorf("the generated first password still works: %d", st)
	}
	if _, err := os.Stat(filepath.Join(e.dir, AdminPasswordFile)); !os.IsNotExist(err) {
		t.Errorf("the stale first password file is still there: %v", err)
	}
	// Used once: a second use (say, by whoever read the VM's vApp properties) is refused.
	e.redeem(testBootstrapToken, "attacker-password-1", 401)
	e.login("admin", "deployer-password-1")
}

func TestBootstrapTokenExpires(t *testing.T) {
	e := tokenEnv(t, 2*time.Second)
	deadline := time.Now().Add(20 * time.Second)
	for {
		r, err := e.etcd.Get(context.Background(), model.TokenPrefix+"bootstrap/", clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			t.Fatal(err)
		}
		if r.Count == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the bootstrap token did not expire")
		}
		time.Sleep(200 * time.Millisecond)
	}
	e.redeem(testBootstrapToken, "deployer-password-1", 401)
}

// A gateway started with a token on a system that has users already stores nothing:
// a token can only set the first admin's password of a new system.
func TestBootstrapTokenNotForExistingSystem(t *testing.T) {
	e := newEnv(t)
	file := filepath.Join(t.TempDir(), "join-token")
	if err := os.WriteFile(file, []byte(testBootstrapToken), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := New(context.Background(), Config{Etcd: e.etcd, StateDir: t.TempDir(), BootstrapTokenFile: file,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}); err != nil {
		t.Fatal(err)
	}
	e.redeem(testBootstrapToken, "deployer-password-1", 401)
}

// TestBootstrapTokenStoredOnceEtcdTakesWrites: the first gateway of a new
// system starts while etcd refuses writes (here etcd's own NOSPACE alarm,
// which refuses puts and lease grants as a member out of quota does); it
// keeps trying, and once etcd takes writes again the token is stored and
// works. Before, the token was given up after one failure and the deployer
// got 401.
func TestBootstrapTokenStoredOnceEtcdTakesWrites(t *testing.T) {
	cli := etcdtest.Start(t)
	ctx := context.Background()
	st, err := cli.Status(ctx, cli.Endpoints()[0])
	if err != nil {
		t.Fatal(err)
	}
	alarms := etcdserverpb.NewMaintenanceClient(cli.ActiveConnection())
	if _, err := alarms.Alarm(ctx, &etcdserverpb.AlarmRequest{Action: etcdserverpb.AlarmRequest_ACTIVATE,
		MemberID: st.Header.MemberId, Alarm: etcdserverpb.AlarmType_NOSPACE}); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(ctx, "probe", "x"); err == nil {
		t.Fatal("etcd took a write under its NOSPACE alarm: the test would prove nothing")
	}
	disarmed := make(chan struct{})
	go func() {
		defer close(disarmed)
		time.Sleep(2 * time.Second)
		if _, err := cli.AlarmDisarm(ctx, &clientv3.AlarmMember{MemberID: st.Header.MemberId, Alarm: etcdserverpb.AlarmType_NOSPACE}); err != nil {
			t.Error(err)
		}
	}()
	file := filepath.Join(t.TempDir(), "join-token")
	if err := os.WriteFile(file, []byte(testBootstrapToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, etcd: cli, dir: t.TempDir(), logs: &testlog.Buffer{}, prober: &fakeProber{}}
	e.serve(Config{Etcd: cli, StateDir: e.dir, Devices: e.prober, BootstrapTokenFile: file, BootstrapTokenTTL: time.Minute,
		Logger: slog.New(slog.NewTextHandler(e.logs, nil))})
	<-disarmed
	if !strings.Contains(e.logs.String(), "bootstrap token not stored yet; retrying") {
		t.Errorf("no retry logged:\n%s", e.logs.String())
	}
	if strings.Contains(e.logs.String(), testBootstrapToken) {
		t.Fatal("the gateway logged the bootstrap token")
	}
	e.redeem(testBootstrapToken, "deployer-password-1", 200)
	e.login("admin", "deployer-password-1")
}
