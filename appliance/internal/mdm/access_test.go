package mdm_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"log/slog"
	"net"
	"net/url"
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
	"github.com/cairn-storage/cairn/appliance/internal/refusals"
	"github.com/cairn-storage/cairn/appliance/internal/testlog"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func denied(err error) bool { return errors.Is(err, rpctypes.ErrPermissionDenied) }

// A client of another CA, or none, cannot even connect: every request
// fails (TLS handshake refused), nothing is read or written.
func TestUnauthenticatedClientsRefused(t *testing.T) {
	kit := pkitest.New(t)
	u, rep := etcdtest.StartTLSReporting(t, kit)
	ctx := ctxT(t)
	gw := etcdtest.Client(t, u, kit.Identity(pki.RoleGateway, "gw"))
	if _, err := gw.Put(ctx, model.SystemKey, "{}"); err != nil {
		t.Fatalf("gateway put: %v", err)
	}

	roots := x509.NewCertPool()
	roots.AddCert(kit.CA.Cert)
	noCert, err := clientv3.New(clientv3.Config{Endpoints: []string{u}, DialTimeout: 2 * time.Second, TLS: &tls.Config{RootCAs: roots}})
	if err != nil {
		t.Fatal(err)
	}
	defer noCert.Close()
	other := pkitest.New(t) // another cluster's CA, same role
	foreign := etcdtest.Client(t, u, other.Identity(pki.RoleGateway, "gw"))
	plain, err := clientv3.New(clientv3.Config{Endpoints: []string{"http://" + strings.TrimPrefix(u, "https://")}, DialTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	for name, c := range map[string]*clientv3.Client{"no certificate": noCert, "another CA": foreign, "plain http": plain} {
		rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		if r, err := c.Get(rctx, model.SystemKey); err == nil {
			t.Errorf("%s: read the model: %v", name, r.Kvs)
		}
		if _, err := c.Put(rctx, model.SystemKey, "owned"); err == nil {
			t.Errorf("%s: wrote the model", name)
		}
		cancel()
	}
	r, err := gw.Get(ctx, model.SystemKey)
	if err != nil || len(r.Kvs) != 1 || string(r.Kvs[0].Value) != "{}" {
		t.Fatalf("system key changed: %v %v", r, err)
	}
	// Each kind of refusal reached the reporter (the security events).
	seen := map[string]bool{}
	for _, f := range refusals.Pending(rep) {
		for _, s := range []string{"didn't provide a certificate", "does not look like a TLS handshake"} {
			if f.Service == "etcd client port" && strings.Contains(f.Reason, s) {
				seen[s] = true
			}
		}
	}
	if len(seen) != 2 {
		t.Errorf("refusals reported: %+v", refusals.Pending(rep))
	}
}

// Each role reads and writes what the table in model/keys.go gives it,
// and nothing else; a denial is logged with its key.
func TestRolePermissions(t *testing.T) {
	kit := pkitest.New(t)
	u := etcdtest.StartTLS(t, kit)
	ctx := ctxT(t)
	gw := etcdtest.Client(t, u, kit.Identity(pki.RoleGateway, "gw"))
	for _, k := range []string{model.Key("volume", "v1"), model.EventPrefix + "0000000000000001"} {
		if _, err := gw.Put(ctx, k, "{}"); err != nil {
			t.Fatalf("gateway put %s: %v", k, err)
		}
	}
	if _, err := gw.MemberList(ctx); err != nil {
		t.Fatalf("gateway member list: %v", err)
	}
	if _, err := gw.Status(ctx, u); err != nil {
		t.Fatalf("gateway status (MDM health): %v", err)
	}

	var logBuf testlog.Buffer
	cfg, err := mdm.ClientConfig([]string{u}, kit.Identity(pki.RoleSDS, "sds1"), slog.New(slog.NewTextHandler(&logBuf, nil)))
	if err != nil {
		t.Fatal(err)
	}
	sds, err := clientv3.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer sds.Close()
	// Allowed: read the model, publish under a lease, report a fill.
	if r, err := sds.Get(ctx, model.Prefix, clientv3.WithPrefix()); err != nil || len(r.Kvs) == 0 {
		t.Fatalf("sds reads the model: %v %v", r, err)
	}
	l, err := sds.Grant(ctx, 5)
	if err != nil {
		t.Fatalf("sds lease: %v", err)
	}
	if _, err := sds.Put(ctx, model.LiveKey("sds1"), "{}", clientv3.WithLease(l.ID)); err != nil {
		t.Fatalf("sds liveness: %v", err)
	}
	if _, err := sds.KeepAliveOnce(ctx, l.ID); err != nil {
		t.Fatalf("sds keep-alive: %v", err)
	}
	for _, k := range []string{model.StatsKey("sds1"), model.FilledPoolPrefix("p1") + "0/d1", model.CertKey(pki.RoleSDS, "sds1"), model.SVMKey("svm1")} {
		if _, err := sds.Put(ctx, k, "1", clientv3.WithLease(l.ID)); err != nil {
			t.Fatalf("sds put %s: %v", k, err)
		}
	}
	if _, err := sds.Revoke(ctx, l.ID); err != nil {
		t.Fatalf("sds revokes its lease: %v", err)
	}
	// Refused: the model, another role's keys, the log, the leadership
	// (a hand-over request), admin requests.
	for _, k := range []string{model.Key("volume", "v1"), model.SystemKey, model.MapKey("p1"), model.FrontendStatsKey("x"),
		model.CertKey(pki.RoleGateway, "gw"), model.EventPrefix + "0000000000000002", model.LeaderHandoverKey} {
		if _, err := sds.Put(ctx, k, "owned"); !denied(err) {
			t.Errorf("sds put %s: %v, want permission denied", k, err)
		}
	}
	if _, err := sds.Delete(ctx, model.Prefix, clientv3.WithPrefix()); !denied(err) {
		t.Errorf("sds deletes the model: %v, want permission denied", err)
	}
	if _, err := sds.Get(ctx, model.EventPrefix, clientv3.WithPrefix()); !denied(err) {
		t.Errorf("sds reads the log: %v, want permission denied", err)
	}
	if _, err := sds.MemberList(ctx); err != nil {
		t.Logf("member list: %v", err) // etcd lets any authenticated user list members
	}
	if _, err := sds.UserAdd(ctx, "sds2", "x"); err == nil {
		t.Errorf("sds added an etcd user")
	}
	if !strings.Contains(logBuf.String(), "permission denied") || !strings.Contains(logBuf.String(), model.Key("volume", "v1")) {
		t.Errorf("denial not logged with its key:\n%s", logBuf.String())
	}
	r, err := gw.Get(ctx, model.Key("volume", "v1"))
	if err != nil || string(r.Kvs[0].Value) != "{}" {
		t.Fatalf("volume changed: %v %v", r, err)
	}

	// Frontends publish statistics; a host (NBD initiator) has no etcd user.
	nbd := etcdtest.Client(t, u, kit.Identity(pki.RoleNBD, "nbd1"))
	if _, err := nbd.Put(ctx, model.FrontendStatsKey("nbd1"), "{}"); err != nil {
		t.Errorf("nbd stats: %v", err)
	}
	if _, err := nbd.Put(ctx, model.StatsKey("sds1"), "{}"); !denied(err) {
		t.Errorf("nbd writes SDS stats: %v", err)
	}
	// cairn peersync on an SVM records it with the SVM's sds or target certificate.
	if _, err := etcdtest.Client(t, u, kit.Identity(pki.RoleTarget, "tgt1")).Put(ctx, model.SVMKey("svm2"), "{}"); err != nil {
		t.Errorf("target records its SVM: %v", err)
	}
	if _, err := nbd.Put(ctx, model.SVMKey("svm3"), "{}"); !denied(err) {
		t.Errorf("nbd writes an SVM record: %v", err)
	}
	host := etcdtest.Client(t, u, kit.Identity(pki.RoleHost, "esx1"))
	if _, err := host.Get(ctx, model.SystemKey); err == nil {
		t.Errorf("host role read the model")
	}
}

// The leader runs EnsureAccess every term: a second run changes nothing,
// and a permission missing (an older version's table) is granted.
func TestEnsureAccessIdempotent(t *testing.T) {
	kit := pkitest.New(t)
	u := etcdtest.StartTLS(t, kit)
	ctx := ctxT(t)
	root := etcdtest.Client(t, u, kit.Identity(pki.RoleMDM, "mdm1"))
	before, err := root.AuthStatus(ctx)
	if err != nil || !before.Enabled {
		t.Fatalf("auth status: %v %v", before, err)
	}
	if err := mdm.EnsureAccess(ctx, root, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	after, err := root.AuthStatus(ctx)
	if err != nil || after.AuthRevision != before.AuthRevision {
		t.Fatalf("second run changed the auth store: revision %d -> %d (%v)", before.AuthRevision, after.AuthRevision, err)
	}
	// As if upgraded from a version without the fill reports permission.
	if _, err := root.RoleRevokePermission(ctx, "cairn-sds", model.FilledPrefix, clientv3.GetPrefixRangeEnd(model.FilledPrefix)); err != nil {
		t.Fatal(err)
	}
	sds := etcdtest.Client(t, u, kit.Identity(pki.RoleSDS, "sds1"))
	if _, err := sds.Put(ctx, model.FilledPrefix+"p/0/d", "1"); !denied(err) {
		t.Fatalf("revoked permission still works: %v", err)
	}
	if err := mdm.EnsureAccess(ctx, root, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	if _, err := sds.Put(ctx, model.FilledPrefix+"p/0/d", "1"); err != nil {
		t.Fatalf("permission not granted again on upgrade: %v", err)
	}
}

// Three MDM members with peer TLS form a cluster and elect a leader, which
// enables access control; a certificate of another role cannot open a
// peer connection.
func TestThreeMembersPeerTLS(t *testing.T) {
	kit := pkitest.New(t)
	names := []string{"mdm1", "mdm2", "mdm3"}
	peers, clients := map[string]string{}, map[string]string{}
	var initial []string
	for _, n := range names {
		peers[n], clients[n] = "https://"+porttest.Addr(t), "https://"+porttest.Addr(t)
		initial = append(initial, n+"="+peers[n])
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	// Cleanups run last first: the data directories are made before the
	// members' stop is registered, so they are removed after the members
	// stopped (etcd's file purge, still running, dies on a vanished one).
	base := t.TempDir()
	t.Cleanup(func() { cancel(); wg.Wait() })
	for _, n := range names {
		cfg := mdm.Config{Name: n, DataDir: filepath.Join(base, n), PeerURL: peers[n], ClientURL: clients[n],
			InitialCluster: strings.Join(initial, ","), Identity: kit.Identity(pki.RoleMDM, n),
			Logger: slog.New(slog.DiscardHandler)}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := mdm.Run(ctx, cfg); err != nil {
				t.Errorf("mdm %s: %v", cfg.Name, err)
			}
		}()
	}
	gw := etcdtest.Client(t, clients["mdm2"], kit.Identity(pki.RoleGateway, "gw"))
	deadline := time.Now().Add(60 * time.Second)
	for {
		rctx, rcancel := context.WithTimeout(ctx, 2*time.Second)
		st, err1 := gw.AuthStatus(rctx)
		el, err2 := gw.Get(rctx, model.ElectionPrefix, clientv3.WithPrefix())
		ml, err3 := gw.MemberList(rctx)
		rcancel()
		if err1 == nil && err2 == nil && err3 == nil && st.Enabled && len(el.Kvs) > 0 && len(ml.Members) == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no 3-member cluster with a leader and access control in 60s: %v %v %v", err1, err2, err3)
		}
		time.Sleep(200 * time.Millisecond)
	}
	// A gateway certificate (valid, same CA) on the peer port: refused.
	pu, _ := url.Parse(peers["mdm1"])
	gwID := kit.Identity(pki.RoleGateway, "gw2")
	conf := gwID.HostTLS()
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 3 * time.Second}, "tcp", pu.Host, conf)
	if err == nil {
		// TLS 1.3: the server's verdict on the client certificate arrives
		// with the first read.
		_ = conn.SetDeadline(time.Now().Add(3 * time.Second))
		_, err = conn.Read(make([]byte, 1))
		conn.Close()
	}
	if err == nil || !strings.Contains(err.Error(), "bad certificate") && !strings.Contains(err.Error(), "certificate") {
		t.Errorf("gateway certificate on the peer port: %v, want a refused handshake", err)
	}
}

// A scheme that does not match the PKI is refused up front, saying what to
// give, instead of a dial that times out later.
func TestSchemeMismatchRefused(t *testing.T) {
	kit := pkitest.New(t)
	id := kit.Identity(pki.RoleSDS, "sds1")
	for _, c := range []struct {
		url  string
		id   *pki.Identity
		want string
	}{
		{"http://127.0.0.1:2379", id, "use https://127.0.0.1:2379"},
		{"https://127.0.0.1:2379", nil, "give --pki DIR"},
		{"127.0.0.1:2379", nil, "give http(s)://HOST:PORT"},
	} {
		if _, err := mdm.ClientConfig([]string{c.url}, c.id, nil); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ClientConfig(%s, pki=%t): %v, want %q", c.url, c.id != nil, err, c.want)
		}
	}
	dir := t.TempDir()
	_, err := mdm.Start(mdm.Config{Name: "mdm1", DataDir: dir, PeerURL: "http://127.0.0.1:1", ClientURL: "https://127.0.0.1:2",
		Identity: kit.Identity(pki.RoleMDM, "mdm1")})
	if err == nil || !strings.Contains(err.Error(), "give https://127.0.0.1:1") {
		t.Errorf("mdm with --pki and an http peer URL: %v", err)
	}
	_, err = mdm.Start(mdm.Config{Name: "mdm1", DataDir: dir, PeerURL: "https://127.0.0.1:1", ClientURL: "https://127.0.0.1:2",
		InitialCluster: "mdm1=https://127.0.0.1:1,mdm2=http://127.0.0.1:3", Identity: kit.Identity(pki.RoleMDM, "mdm1")})
	if err == nil || !strings.Contains(err.Error(), "mdm2=http://127.0.0.1:3") {
		t.Errorf("mdm with an http member in --initial-cluster: %v", err)
	}
}

// A member joining a running cluster must be given its members (the API's
// answer to the addition): alone, it would found a cluster of its own.
func TestJoinNeedsTheMembers(t *testing.T) {
	kit := pkitest.New(t)
	for _, initial := range []string{"", "mdm4=https://127.0.0.1:1"} {
		_, err := mdm.Start(mdm.Config{Name: "mdm4", DataDir: t.TempDir(), PeerURL: "https://127.0.0.1:1", ClientURL: "https://127.0.0.1:2",
			InitialCluster: initial, Join: true, Identity: kit.Identity(pki.RoleMDM, "mdm4")})
		if err == nil || !strings.Contains(err.Error(), "--join needs --initial-cluster with every member") {
			t.Errorf("--join with --initial-cluster %q: %v", initial, err)
		}
	}
}
