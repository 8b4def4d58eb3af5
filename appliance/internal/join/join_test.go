package join_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cairn-storage/cairn/appliance/internal/etcdtest"
	"github.com/cairn-storage/cairn/appliance/internal/join"
	"github.com/cairn-storage/cairn/appliance/internal/join/jointest"
	"github.com/cairn-storage/cairn/appliance/internal/model"
	"github.com/cairn-storage/cairn/appliance/internal/pki"
	"github.com/cairn-storage/cairn/appliance/internal/pki/pkitest"
	"github.com/cairn-storage/cairn/appliance/internal/porttest"
	"github.com/cairn-storage/cairn/appliance/internal/refusals"
)

type fixture struct {
	kit   *pkitest.Kit
	etcd  *clientv3.Client
	url   string
	store join.Store
	etcdU string
	rep   *refusals.Reporter
}

// start runs the join service as an MDM would: its CA, its identity, etcd
// with access control on (the records are secrets).
func start(t *testing.T, kit *pkitest.Kit) *fixture {
	t.Helper()
	u := etcdtest.StartTLS(t, kit)
	f := &fixture{kit: kit, etcd: etcdtest.Client(t, u, kit.Identity(pki.RoleMDM, "mdm1")), etcdU: u}
	f.store = join.Store{Etcd: f.etcd}
	f.url, f.rep = jointest.Start(t, kit, f.etcd)
	return f
}

func (f *fixture) token(t *testing.T, ttl time.Duration, roles ...string) join.Token {
	t.Helper()
	tok, rec, err := join.New(pki.InfoOf(f.kit.CA.Cert).Fingerprint, roles, ttl, "admin", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := f.store.Create(context.Background(), rec); err != nil {
		t.Fatal(err)
	}
	return tok
}

func wantErr(t *testing.T, err error, want string) {
	t.Helper()
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("got %v, want an error containing %q", err, want)
	}
}

// TestJoin: a node joins with a token and gets a certificate of its role and
// name, for its own key, that the cluster's servers accept; the token is
// spent, and every misuse is refused with what to do.
func TestJoin(t *testing.T) {
	kit := pkitest.New(t)
	f := start(t, kit)
	ctx := context.Background()
	tok := f.token(t, time.Hour, pki.RoleSDS, pki.RoleTarget)
	if strings.Count(tok.String(), ".") != 3 || len(tok.String()) > 256 {
		t.Fatalf("token form %d chars", len(tok.String()))
	}
	dir := filepath.Join(t.TempDir(), "sds")
	cert, err := join.Join(ctx, []string{f.url}, tok.String(), pki.Request{Role: pki.RoleSDS, Name: "svm-4", Hosts: []string{"10.0.0.4", "SVM-4.Lab"}}, dir)
	if err != nil {
		t.Fatal(err)
	}
	id, err := pki.LoadIdentity(dir)
	if err != nil {
		t.Fatalf("the written directory: %v", err)
	}
	if id.Peer() != (pki.Peer{Role: pki.RoleSDS, Name: "svm-4"}) || !id.Leaf().Equal(cert) ||
		len(id.Leaf().IPAddresses) != 1 || len(id.Leaf().DNSNames) != 1 || id.Leaf().DNSNames[0] != "svm-4.lab" {
		t.Fatalf("joined as %v (%v %v)", id.Peer(), id.Leaf().IPAddresses, id.Leaf().DNSNames)
	}
	if st, _ := os.Stat(filepath.Join(dir, pki.NodeKeyFile)); st.Mode().Perm() != 0o600 {
		t.Fatalf("node.key mode %v", st.Mode())
	}
	// The new certificate is the cluster's: etcd takes it (as an SDS).
	sds := etcdtest.Client(t, f.etcdU, id)
	if _, err := sds.Get(ctx, model.Prefix+"x"); err != nil {
		t.Fatalf("etcd with the joined certificate: %v", err)
	}
	// ... and an SDS may not read the join records (secrets).
	if _, err := sds.Get(ctx, model.JoinTokenPrefix, clientv3.WithPrefix()); err == nil {
		t.Fatal("an SDS read the join tokens")
	}
	// Its role sds is spent; its role target is left, for svm-4 only.
	_, err = join.Join(ctx, []string{f.url}, tok.String(), pki.Request{Role: pki.RoleSDS, Name: "svm-4"}, t.TempDir())
	wantErr(t, err, `may be spent on target, not "sds"`)
	_, err = join.Join(ctx, []string{f.url}, tok.String(), pki.Request{Role: pki.RoleTarget, Name: "svm-5"}, t.TempDir())
	wantErr(t, err, `was spent by svm-4; its other roles are for that node only, not "svm-5"`)
	if _, err := join.Join(ctx, []string{f.url}, tok.String(), pki.Request{Role: pki.RoleTarget, Name: "svm-4"}, t.TempDir()); err != nil {
		t.Fatalf("the token's second role: %v", err)
	}
	// All spent: refused, on any role.
	_, err = join.Join(ctx, []string{f.url}, tok.String(), pki.Request{Role: pki.RoleTarget, Name: "svm-4"}, t.TempDir())
	wantErr(t, err, "unknown, already used or revoked")
	if !join.Final(err) {
		t.Fatalf("a spent token is not final: %v", err)
	}

	// Wrong role, expired, wrong secret, revoked.
	tok = f.token(t, time.Hour, pki.RoleSDS)
	_, err = join.Join(ctx, []string{f.url}, tok.String(), pki.Request{Role: pki.RoleGateway, Name: "gw"}, t.TempDir())
	wantErr(t, err, `may be spent on sds, not "gateway"`)
	bad := tok
	bad.Secret = strings.Repeat("A", 43)
	_, err = join.Join(ctx, []string{f.url}, bad.String(), pki.Request{Role: pki.RoleSDS, Name: "x"}, t.TempDir())
	wantErr(t, err, "unknown, already used or revoked")
	// Each refusal goes to the gateways (as a security event).
	if p := refusals.Pending(f.rep); len(p) < 2 || p[len(p)-1].Service != "join service" ||
		!strings.HasPrefix(p[len(p)-1].Remote, "127.0.0.1:") || strings.Contains(p[len(p)-1].Reason, bad.Secret) {
		t.Fatalf("refusals reported: %+v", p)
	}
	if ok, err := f.store.Revoke(ctx, tok.ID); !ok || err != nil {
		t.Fatalf("revoke: %v %v", ok, err)
	}
	_, err = join.Join(ctx, []string{f.url}, tok.String(), pki.Request{Role: pki.RoleSDS, Name: "x"}, t.TempDir())
	wantErr(t, err, "unknown, already used or revoked")
	tok, rec, _ := join.New(pki.InfoOf(kit.CA.Cert).Fingerprint, []string{pki.RoleSDS}, time.Minute, "admin", time.Now().Add(-2*time.Minute))
	if err := f.store.Create(ctx, rec); err != nil {
		t.Fatal(err)
	}
	_, err = join.Join(ctx, []string{f.url}, tok.String(), pki.Request{Role: pki.RoleSDS, Name: "x"}, t.TempDir())
	wantErr(t, err, "expired at")
	if err := f.store.Prune(ctx, time.Now()); err != nil {
		t.Fatal(err)
	}
	if l, _ := f.store.List(ctx); len(l) != 0 {
		t.Fatalf("after prune: %+v", l)
	}
	// A name the CA refuses spends the token and says so.
	tok = f.token(t, time.Hour, pki.RoleSDS)
	_, err = join.Join(ctx, []string{f.url}, tok.String(), pki.Request{Role: pki.RoleSDS, Name: "-bad"}, t.TempDir())
	wantErr(t, err, "the token is spent")
	// Nothing of a refused join is written.
	empty := t.TempDir()
	if _, err = join.Join(ctx, []string{f.url}, tok.String(), pki.Request{Role: pki.RoleSDS, Name: "x"}, empty); err == nil {
		t.Fatal("spent token accepted")
	}
	if ents, _ := os.ReadDir(empty); len(ents) != 0 {
		t.Fatalf("a refused join wrote %v", ents)
	}
}

// TestJoinPinsTheCA: a node never sends its request to a service that does
// not hold the CA its token names, and tries the next MDM when one is down.
func TestJoinPinsTheCA(t *testing.T) {
	kit := pkitest.New(t)
	f := start(t, kit)
	tok := f.token(t, time.Hour, pki.RoleSDS)
	// An impostor: a service of another CA (whose tokens it could mint).
	other := start(t, pkitest.New(t))
	ctx := context.Background()
	_, err := join.Join(ctx, []string{other.url}, tok.String(), pki.Request{Role: pki.RoleSDS, Name: "x"}, t.TempDir())
	wantErr(t, err, "does not hold the CA the token names")
	if !join.Final(err) {
		t.Fatalf("an impostor is not final: %v", err)
	}
	// The token was not spent by that attempt; a dead address first is skipped.
	dead := "https://" + porttest.Addr(t)
	if _, err := join.Join(ctx, []string{dead}, tok.String(), pki.Request{Role: pki.RoleSDS, Name: "x"}, t.TempDir()); err == nil || join.Final(err) {
		t.Fatalf("no service answering is worth another try: %v", err)
	}
	if _, err := join.Join(ctx, []string{dead, f.url}, tok.String(), pki.Request{Role: pki.RoleSDS, Name: "x"}, t.TempDir()); err != nil {
		t.Fatalf("second MDM: %v", err)
	}
}

// TestSpendOnce: two nodes presenting one token at once: exactly one joins.
func TestSpendOnce(t *testing.T) {
	kit := pkitest.New(t)
	f := start(t, kit)
	tok := f.token(t, time.Hour, pki.RoleSDS)
	var wg sync.WaitGroup
	var mu sync.Mutex
	ok := 0
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := join.Join(context.Background(), []string{f.url}, tok.String(), pki.Request{Role: pki.RoleSDS, Name: "x"}, t.TempDir()); err == nil {
				mu.Lock()
				ok++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if ok != 1 {
		t.Fatalf("%d nodes joined with one token", ok)
	}
}

// TestTokenForm: what join.Parse and join.New refuse, without echoing the secret.
func TestTokenForm(t *testing.T) {
	fp := strings.Repeat("ab", 32)
	tok, _, err := join.New(fp, []string{pki.RoleSDS}, time.Hour, "admin", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if back, err := join.Parse(" " + tok.String() + "\n"); err != nil || back != tok {
		t.Fatalf("round trip: %v %v", back, err)
	}
	for _, bad := range []string{"", "cj1", tok.String() + ".x", strings.Replace(tok.String(), "cj1", "cj2", 1),
		"cj1.zz" + tok.String()[6:], strings.Repeat("a", 300)} {
		_, err := join.Parse(bad)
		if err == nil {
			t.Fatalf("accepted %q", bad)
		}
		if tok.Secret != "" && strings.Contains(err.Error(), tok.Secret) {
			t.Fatalf("error echoes the secret: %v", err)
		}
	}
	for _, c := range []struct {
		roles []string
		ttl   time.Duration
		want  string
	}{
		{nil, time.Hour, "give 1-"},
		{[]string{"sds", "sds"}, time.Hour, "at most once"},
		{[]string{"wizard"}, time.Hour, `"wizard"`},
		{[]string{"sds"}, time.Second, "lifetime"},
		{[]string{"sds"}, 30 * 24 * time.Hour, "lifetime"},
	} {
		_, _, err := join.New(fp, c.roles, c.ttl, "admin", time.Now())
		wantErr(t, err, c.want)
	}
	_, _, err = join.New("abc", []string{"sds"}, time.Hour, "admin", time.Now())
	wantErr(t, err, "64 hex digits")
}
