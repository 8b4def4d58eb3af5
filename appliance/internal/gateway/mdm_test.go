package gateway

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairn-storage/cairn/appliance/internal/mdm"
	"github.com/cairn-storage/cairn/appliance/internal/model"
	"github.com/cairn-storage/cairn/appliance/internal/porttest"
	"github.com/cairn-storage/cairn/appliance/internal/testlog"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// mdmCluster is real MDM members (embedded etcd, election, control loop)
// behind a gateway.
type mdmCluster struct {
	*env
	stop map[string]func() // stops one member and waits for it
}

// startMDMCluster runs one MDM member per name (those in tieBreakers as
// tie-breakers) and a gateway on them, and waits until every full member
// campaigns.
func startMDMCluster(t *testing.T, names []string, tieBreakers ...string) *mdmCluster {
	peers, clients := map[string]string{}, map[string]string{}
	var initial, endpoints []string
	for _, n := range names {
		peers[n], clients[n] = "http://"+porttest.Addr(t), "http://"+porttest.Addr(t)
		initial = append(initial, n+"="+peers[n])
		endpoints = append(endpoints, clients[n])
	}
	ctx, cancel := context.WithCancel(context.Background())
	dir := t.TempDir()
	c := &mdmCluster{stop: map[string]func(){}}
	for _, n := range names {
		cfg := mdm.Config{Name: n, DataDir: filepath.Join(dir, n), PeerURL: peers[n], ClientURL: clients[n],
			InitialCluster: strings.Join(initial, ","), TieBreaker: slices.Contains(tieBreakers, n), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
		mctx, mcancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- mdm.Run(mctx, cfg) }()
		c.stop[n] = sync.OnceFunc(func() {
			mcancel()
			if err := <-done; err != nil {
				t.Errorf("mdm %s: %v", n, err)
			}
		})
	}
	t.Cleanup(func() {
		cancel()
		for _, stop := range c.stop {
			stop()
		}
	})
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	e := &env{t: t, etcd: cli, dir: t.TempDir(), logs: &testlog.Buffer{}}
	var srv *Server
	waitFor(t, 30*time.Second, "MDM cluster up", func() bool {
		srv, err = New(ctx, Config{Etcd: cli, StateDir: e.dir, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		return err == nil
	})
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	e.srv, e.url = srv, hs.URL
	pw, err := os.ReadFile(filepath.Join(e.dir, AdminPasswordFile))
	if err != nil {
		t.Fatal(err)
	}
	e.admin = e.login("admin", strings.TrimSpace(string(pw)))
	c.env = e
	waitFor(t, 20*time.Second, "every full MDM member campaigns", func() bool {
		cands, err := model.NewStore(cli).ElectionCandidates(ctx)
		return err == nil && len(cands) == len(names)-len(tieBreakers)
	})
	return c
}

// members lists the MDM members through the API, by name.
func (c *mdmCluster) members() map[string]map[string]any {
	_, v := c.do("GET", "/api/v1/mdm/members", c.admin, "")
	out := map[string]map[string]any{}
	for _, x := range v.([]any) {
		m := x.(map[string]any)
		out[m["name"].(string)] = m
	}
	return out
}

// leaders returns the raft leader and the Cairn (control-loop) leader the
// API shows.
func (c *mdmCluster) leaders() (raft, cairn string) {
	for n, m := range c.members() {
		if m["raft_leader"] == true {
			raft = n
		}
		if m["cairn_leader"] == true {
			cairn = n
		}
	}
	return raft, cairn
}

// TestMDMLeaderMove: three real MDM members (one tie-breaker); the API
// shows their roles and moves the leadership to another full member.
func TestMDMLeaderMove(t *testing.T) {
	c := startMDMCluster(t, []string{"m1", "m2", "m3"}, "m3")
	var leader string
	waitFor(t, 20*time.Second, "roles published and a Cairn leader elected", func() bool {
		ms := c.members()
		raft, cairn := c.leaders()
		leader = raft
		return len(ms) == 3 && ms["m3"]["tie_breaker"] == true && ms["m1"]["tie_breaker"] == false && raft != "" && (cairn == "m1" || cairn == "m2")
	})
	target := "m1"
	if leader == "m1" {
		target = "m2"
	}
	c.failsWith(400, CodeInvalid, "name", "cannot lead", "POST", "/api/v1/mdm/leader", c.admin, `{"name":"m3"}`)
	if r := c.ok(200, "POST", "/api/v1/mdm/leader", c.admin, fmt.Sprintf(`{"name":%q}`, target)); r["leader"] != target {
		t.Fatalf("move leader: %v", r)
	}
	if raft, cairn := c.leaders(); raft != target || cairn != target {
		t.Fatalf("after moving the leadership to %s: raft leader %s, Cairn leader %s", target, raft, cairn)
	}
}

// TestMDMLeaderHandover: three full MDM members. Moving the leadership to
// a member that holds neither makes it both raft and control-loop leader
// before the call answers; a repeat answers at once; a member that is down
// cannot be named, and a hand-over request naming it (as one written just
// before it stopped) does not make the leader resign.
func TestMDMLeaderHandover(t *testing.T) {
	c := startMDMCluster(t, []string{"m1", "m2", "m3"})
	var raft, cairn string
	waitFor(t, 20*time.Second, "raft and Cairn leaders elected", func() bool {
		raft, cairn = c.leaders()
		return raft != "" && cairn != ""
	})
	var target string
	for _, n := range []string{"m1", "m2", "m3"} {
		if n != raft && n != cairn {
			target = n
		}
	}
	if r := c.ok(200, "POST", "/api/v1/mdm/leader", c.admin, fmt.Sprintf(`{"name":%q}`, target)); r["leader"] != target {
		t.Fatalf("move leader: %v", r)
	}
	if nowRaft, nowCairn := c.leaders(); nowRaft != target || nowCairn != target {
		t.Fatalf("after moving the leadership from %s (raft) and %s (Cairn) to %s: raft leader %s, Cairn leader %s", raft, cairn, target, nowRaft, nowCairn)
	}
	if r, err := c.etcd.Get(context.Background(), model.LeaderHandoverKey); err != nil || len(r.Kvs) != 0 {
		t.Errorf("hand-over request left after it was honoured: %v %v", r, err)
	}
	start := time.Now()
	c.ok(200, "POST", "/api/v1/mdm/leader", c.admin, fmt.Sprintf(`{"name":%q}`, target))
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("a repeat took %s", d)
	}

	// A member that is down: refused at once, nothing moves.
	down := "m1"
	if target == "m1" {
		down = "m2"
	}
	c.stop[down]()
	waitFor(t, 10*time.Second, down+" no longer campaigns", func() bool {
		cands, err := model.NewStore(c.etcd).ElectionCandidates(context.Background())
		return err == nil && len(cands) == 2 && !slices.Contains(cands, down)
	})
	c.failsWith(503, CodeUnavailable, "", "does not campaign", "POST", "/api/v1/mdm/leader", c.admin, fmt.Sprintf(`{"name":%q}`, down))

	// A request naming it anyway (it stopped after the gateway looked):
	// the leader keeps its term (its election key) until the request
	// expires.
	ctx := context.Background()
	term := func() int64 {
		r, err := c.etcd.Get(ctx, model.ElectionPrefix, clientv3.WithFirstCreate()...)
		if err != nil || len(r.Kvs) != 1 {
			t.Fatalf("election: %v %v", r, err)
		}
		return r.Kvs[0].CreateRevision
	}
	before := term()
	l, err := c.etcd.Grant(ctx, 3)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.etcd.Put(ctx, model.LeaderHandoverKey, down, clientv3.WithLease(l.ID)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the hand-over request expires", func() bool {
		r, err := c.etcd.Get(ctx, model.LeaderHandoverKey)
		return err == nil && len(r.Kvs) == 0
	})
	if after := term(); after != before {
		t.Errorf("the leader resigned for a member that is down (election key revision %d, was %d)", after, before)
	}
	if _, cairn := c.leaders(); cairn != target {
		t.Errorf("Cairn leader %s, want %s (still)", cairn, target)
	}
}
