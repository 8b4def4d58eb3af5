package peersync

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cairn-storage/cairn/appliance/contract"
	"github.com/cairn-storage/cairn/appliance/internal/etcdtest"
	"github.com/cairn-storage/cairn/appliance/internal/firewall"
	"github.com/cairn-storage/cairn/appliance/internal/model"
)

// svm1 of a four-SVM system (svm4: 192.0.2.13 / 198.51.100.13 is no MDM member).
func settings(t testing.TB) *contract.Settings {
	t.Helper()
	s, err := contract.Validate(map[string]string{
		contract.KeyHostname:    "svm1",
		contract.KeyMgmtAddress: "192.0.2.10/24",
		contract.KeyDataAddress: "198.51.100.10/24",
		contract.KeyRoles:       "mdm,sds,target",
		contract.KeyClusterName: "c1",
		contract.KeyMDMMembers:  "svm1=192.0.2.10,svm2=192.0.2.11,svm3=192.0.2.12",
		contract.KeyJoinToken:   "not-kept-after-first-boot",
		contract.KeySVMs:        "192.0.2.10,198.51.100.10,192.0.2.11,198.51.100.11,192.0.2.12,198.51.100.12,192.0.2.13,198.51.100.13",
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// nft stands in for nft -f: it keeps what it was asked to load (the staged file's
// content at that moment) and refuses while fail is set.
type nft struct {
	mu     sync.Mutex
	loads  []string
	fail   bool
	called int
}

func (n *nft) Run(_ context.Context, name string, args ...string) ([]byte, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.called++
	if name != "nft" || len(args) != 2 || args[0] != "-f" {
		return nil, errors.New("unexpected command")
	}
	if n.fail {
		return nil, errors.New("nft: refused")
	}
	b, err := os.ReadFile(args[1])
	if err != nil {
		return nil, err
	}
	n.loads = append(n.loads, string(b))
	return nil, nil
}

func (n *nft) calls() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.called
}

func (n *nft) count() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.loads)
}

func (n *nft) loaded() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(n.loads) == 0 {
		return ""
	}
	return n.loads[len(n.loads)-1]
}

// etcdRule is the loaded rule admitting peers to etcd.
func etcdRule(rs string) string {
	for _, l := range strings.Split(rs, "\n") {
		if strings.Contains(l, "dport 2379") && strings.Contains(l, "the SVMs") {
			return l
		}
	}
	return ""
}

func admits(rs, addr string) bool {
	return slices.Contains(strings.FieldsFunc(etcdRule(rs), func(r rune) bool { return r == ' ' || r == ',' || r == '{' || r == '}' }), addr)
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within 30 s: %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func putJSON(t *testing.T, cli *clientv3.Client, key string, v any) {
	t.Helper()
	b, _ := json.Marshal(v)
	if _, err := cli.Put(context.Background(), key, string(b)); err != nil {
		t.Fatal(err)
	}
}

func del(t *testing.T, cli *clientv3.Client, key string) {
	t.Helper()
	if _, err := cli.Delete(context.Background(), key); err != nil {
		t.Fatal(err)
	}
}

type fixture struct {
	dir    string
	nft    *nft
	s      *contract.Settings
	stop   func()
	runErr chan error
}

func (f *fixture) start(t *testing.T, cli *clientv3.Client) {
	t.Helper()
	sy := &Syncer{Settings: f.s, Self: Self(f.s), Etcd: cli, Runner: f.nft,
		RulesetPath: filepath.Join(f.dir, "nftables.conf"), KnownPath: filepath.Join(f.dir, "known"),
		MinBackoff: 50 * time.Millisecond, MaxBackoff: 200 * time.Millisecond, Log: slog.New(slog.DiscardHandler)}
	ctx, cancel := context.WithCancel(context.Background())
	f.runErr = make(chan error, 1)
	go func() { f.runErr <- sy.Run(ctx) }()
	f.stop = func() {
		cancel()
		if err := <-f.runErr; err != nil {
			t.Errorf("Run: %v", err)
		}
	}
	t.Cleanup(func() {
		if ctx.Err() == nil {
			f.stop()
		}
	})
}

func (f *fixture) file(t *testing.T) string {
	b, _ := os.ReadFile(filepath.Join(f.dir, "nftables.conf"))
	return string(b)
}

func newFixture(t *testing.T) *fixture {
	f := &fixture{dir: t.TempDir(), nft: &nft{}, s: settings(t)}
	// As first boot left it.
	if err := os.WriteFile(filepath.Join(f.dir, "nftables.conf"), []byte(firewall.Ruleset(f.s, firewall.Peers{})), 0o755); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestSyncFollowsModel: an SVM or SDS that joins the model is admitted, one that
// leaves is not, a first-boot peer whose record is deleted leaves too, and a change
// that moves no address loads nothing.
func TestSyncFollowsModel(t *testing.T) {
	cli := etcdtest.Start(t)
	f := newFixture(t)
	f.start(t, cli)

	// This SVM records itself; its record changes nothing (its addresses are
	// first-boot peers), so nothing is loaded.
	waitFor(t, "svm1's record", func() bool {
		r, err := cli.Get(context.Background(), model.SVMKey("svm1"))
		return err == nil && len(r.Kvs) == 1
	})
	var self model.SVM
	r, _ := cli.Get(context.Background(), model.SVMKey("svm1"))
	if err := json.Unmarshal(r.Kvs[0].Value, &self); err != nil || !slices.Equal(self.Addresses, []string{"192.0.2.10", "198.51.100.10"}) {
		t.Fatalf("svm1's record: %s (%v)", r.Kvs[0].Value, err)
	}

	putJSON(t, cli, model.SVMKey("svm9"), model.SVM{Name: "svm9", Addresses: []string{"192.0.2.20", "198.51.100.20"}, Roles: []string{"sds"}})
	waitFor(t, "svm9 admitted", func() bool { return admits(f.nft.loaded(), "192.0.2.20") && admits(f.nft.loaded(), "198.51.100.20") })
	if f.file(t) != f.nft.loaded() {
		t.Fatal("the ruleset file is not the loaded ruleset")
	}
	if f.nft.count() != 1 {
		t.Fatalf("%d loads for one change", f.nft.count())
	}
	for _, want := range []string{"dport 7100", "dport 2379"} {
		if !strings.Contains(f.file(t), "198.51.100.20") || !strings.Contains(f.file(t), want) {
			t.Fatalf("ruleset lacks %s for svm9:\n%s", want, f.file(t))
		}
	}

	// An SDS's data address (host:port) is a peer too.
	putJSON(t, cli, model.Key(model.KindSDS, "s1"), model.SDS{ID: "s1", Name: "sds-x", Address: "203.0.113.9:7100", State: model.SDSNormal})
	waitFor(t, "the SDS's address admitted", func() bool { return admits(f.nft.loaded(), "203.0.113.9") })

	// A change that moves no address (roles) loads nothing.
	n := f.nft.count()
	putJSON(t, cli, model.SVMKey("svm9"), model.SVM{Name: "svm9", Addresses: []string{"192.0.2.20", "198.51.100.20"}, Roles: []string{"sds", "target"}})
	putJSON(t, cli, model.Key(model.KindSDS, "s1"), model.SDS{ID: "s1", Name: "sds-x", Address: "203.0.113.9:7100", State: model.SDSMaintenance})
	time.Sleep(500 * time.Millisecond)
	if f.nft.count() != n {
		t.Fatalf("a change without new addresses loaded the ruleset again (%d loads, %d before)", f.nft.count(), n)
	}

	// svm9 removed: its addresses leave.
	del(t, cli, model.SVMKey("svm9"))
	waitFor(t, "svm9 no longer admitted", func() bool { return !admits(f.nft.loaded(), "192.0.2.20") && !admits(f.nft.loaded(), "198.51.100.20") })
	if !admits(f.nft.loaded(), "203.0.113.9") || !admits(f.nft.loaded(), "192.0.2.11") {
		t.Fatalf("removing svm9 took other peers:\n%s", etcdRule(f.nft.loaded()))
	}

	// svm4, a first-boot peer: admitted from the settings, then recorded, then
	// removed from the model: it leaves although the settings list it.
	putJSON(t, cli, model.SVMKey("svm4"), model.SVM{Name: "svm4", Addresses: []string{"192.0.2.13", "198.51.100.13"}})
	time.Sleep(300 * time.Millisecond)
	if !admits(f.file(t), "192.0.2.13") {
		t.Fatal("svm4 not admitted")
	}
	del(t, cli, model.SVMKey("svm4"))
	waitFor(t, "svm4 removed", func() bool { return !admits(f.nft.loaded(), "192.0.2.13") })
	// This SVM's own record deleted (by mistake): its addresses stay.
	del(t, cli, model.SVMKey("svm1"))
	time.Sleep(300 * time.Millisecond)
	if !admits(f.file(t), "192.0.2.10") || !admits(f.file(t), "198.51.100.10") {
		t.Fatalf("own addresses removed:\n%s", etcdRule(f.file(t)))
	}
}

// TestSyncRemovalWhileStopped: a record deleted while peersync was not running is
// still a removal when it starts again (the known-addresses file remembers it).
func TestSyncRemovalWhileStopped(t *testing.T) {
	cli := etcdtest.Start(t)
	f := newFixture(t)
	putJSON(t, cli, model.SVMKey("svm4"), model.SVM{Name: "svm4", Addresses: []string{"192.0.2.13", "198.51.100.13"}})
	f.start(t, cli)
	waitFor(t, "known file", func() bool {
		b, _ := os.ReadFile(filepath.Join(f.dir, "known"))
		return strings.Contains(string(b), "192.0.2.13\n")
	})
	f.stop()
	del(t, cli, model.SVMKey("svm4"))
	f.start(t, cli)
	waitFor(t, "svm4 removed after the restart", func() bool { return f.nft.count() > 0 && !admits(f.file(t), "192.0.2.13") })
	if !admits(f.file(t), "192.0.2.12") {
		t.Fatalf("other first-boot peers removed:\n%s", etcdRule(f.file(t)))
	}
}

// TestSyncEtcdDown: while etcd is away nothing is loaded and the ruleset stays;
// when it is back, changes made meanwhile and after are followed.
func TestSyncEtcdDown(t *testing.T) {
	m := etcdtest.StartMember(t)
	f := newFixture(t)
	f.start(t, m.Client)
	putJSON(t, m.Client, model.SVMKey("svm9"), model.SVM{Name: "svm9", Addresses: []string{"192.0.2.20"}})
	waitFor(t, "svm9 admitted", func() bool { return admits(f.nft.loaded(), "192.0.2.20") })
	before, calls := f.file(t), f.nft.calls()

	m.Stop()
	time.Sleep(2 * time.Second) // many backoff periods
	if f.file(t) != before || f.nft.calls() != calls {
		t.Fatalf("the firewall changed while etcd was down (%d nft calls, %d before)", f.nft.calls(), calls)
	}

	m.Restart()
	putJSON(t, m.Client, model.SVMKey("svm8"), model.SVM{Name: "svm8", Addresses: []string{"192.0.2.21"}})
	waitFor(t, "svm8 admitted after etcd came back", func() bool { return admits(f.nft.loaded(), "192.0.2.21") })
	if !admits(f.file(t), "192.0.2.20") {
		t.Fatal("svm9 lost over the outage")
	}
}

// TestSyncNftRefuses: a ruleset nft refuses changes neither the file nor the
// peers; the next change is tried again.
func TestSyncNftRefuses(t *testing.T) {
	cli := etcdtest.Start(t)
	f := newFixture(t)
	before := f.file(t)
	f.nft.mu.Lock()
	f.nft.fail = true
	f.nft.mu.Unlock()
	putJSON(t, cli, model.SVMKey("svm9"), model.SVM{Name: "svm9", Addresses: []string{"192.0.2.20"}})
	f.start(t, cli)
	waitFor(t, "nft asked twice", func() bool { return f.nft.calls() > 1 })
	if f.file(t) != before {
		t.Fatal("the ruleset file changed although nft refused the ruleset")
	}
	f.nft.mu.Lock()
	f.nft.fail = false
	f.nft.mu.Unlock()
	waitFor(t, "loaded once nft takes it", func() bool { return admits(f.file(t), "192.0.2.20") })
}

func TestCompute(t *testing.T) {
	a := func(ss ...string) []netip.Addr {
		var out []netip.Addr
		for _, s := range ss {
			out = append(out, netip.MustParseAddr(s))
		}
		return out
	}
	p := Compute(a("192.0.2.1", "192.0.2.3"), a("192.0.2.1", "192.0.2.2", "192.0.2.3", "192.0.2.4"))
	if !slices.Equal(p.Known, a("192.0.2.1", "192.0.2.3")) || !slices.Equal(p.Removed, a("192.0.2.2", "192.0.2.4")) {
		t.Fatalf("Compute: %+v", p)
	}
}

func TestKnownRoundTrip(t *testing.T) {
	in := []netip.Addr{netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("2001:db8::1")}
	got, err := ParseKnown(formatKnown(in))
	if err != nil || !slices.Equal(got, in) {
		t.Fatalf("ParseKnown(formatKnown) = %v, %v", got, err)
	}
	for _, bad := range []string{"", "192.0.2.1\n", knownHeader + "\nfe80::1%eth0\n", knownHeader + "\nnot-an-address\n", "#cairn-peersync known v2\n"} {
		if _, err := ParseKnown([]byte(bad)); err == nil {
			t.Errorf("ParseKnown(%q) accepted", bad)
		}
	}
}

// FuzzParseKnown: whatever the file holds, ParseKnown is bounded and what it
// accepts writes back to the same addresses.
func FuzzParseKnown(f *testing.F) {
	f.Add([]byte(knownHeader + "\n192.0.2.1\n2001:db8::1\n"))
	f.Add([]byte(knownHeader + "\n::ffff:192.0.2.1\n192.0.2.1\n"))
	f.Add([]byte("garbage"))
	f.Fuzz(func(t *testing.T, doc []byte) {
		got, err := ParseKnown(doc)
		if err != nil {
			return
		}
		if len(got) > MaxPeers*4 {
			t.Fatalf("%d addresses accepted", len(got))
		}
		again, err := ParseKnown(formatKnown(got))
		if err != nil || !slices.Equal(again, got) {
			t.Fatalf("round trip: %v, %v (was %v)", again, err, got)
		}
	})
}

// TestTargetPorts: the target port group is the settings' ports plus every
// recorded SVM's; a record's port leaves with the record, the settings' stay.
func TestTargetPorts(t *testing.T) {
	cli := etcdtest.Start(t)
	ctx := context.Background()
	s, err := contract.Validate(map[string]string{
		contract.KeyHostname: "svm4", contract.KeyMgmtAddress: "192.0.2.13/24", contract.KeyRoles: "sds,target",
		contract.KeyClusterName: "c1", contract.KeyMDMMembers: "svm1=192.0.2.10", contract.KeyTargetPortID: "4",
		contract.KeyJoinToken: "not-kept-after-first-boot",
	})
	if err != nil {
		t.Fatal(err)
	}
	if self := Self(s); self.TargetPort != 4 || !slices.Equal(self.Addresses, []string{"192.0.2.13"}) {
		t.Fatalf("Self: %+v", self)
	}
	putJSON(t, cli, model.SVMKey("svm4"), Self(s))
	putJSON(t, cli, model.SVMKey("svm9"), model.SVM{Name: "svm9", Addresses: []string{"192.0.2.20"}, TargetPort: 9})
	putJSON(t, cli, model.SVMKey("svm8"), model.SVM{Name: "svm8", Addresses: []string{"192.0.2.21"}}) // no target
	got, err := TargetPorts(ctx, cli, []uint16{1, 2, 3})
	if err != nil || !slices.Equal(got, []uint16{1, 2, 3, 4, 9}) {
		t.Fatalf("TargetPorts = %v, %v", got, err)
	}
	del(t, cli, model.SVMKey("svm9"))
	del(t, cli, model.SVMKey("svm4"))
	if got, err := TargetPorts(ctx, cli, []uint16{1, 2, 3}); err != nil || !slices.Equal(got, []uint16{1, 2, 3}) {
		t.Fatalf("after the removals: %v, %v", got, err)
	}
}
