package gateway

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cairn-storage/cairn/appliance/internal/mdm"
	"github.com/cairn-storage/cairn/appliance/internal/testlog"
	clientv3 "go.etcd.io/etcd/client/v3"
)

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// TestMDMLeaderMove: three real MDM members (one tie-breaker); the API
// shows their roles and moves the raft leadership to another full member.
func TestMDMLeaderMove(t *testing.T) {
	names := []string{"m1", "m2", "m3"}
	peers, clients := map[string]string{}, map[string]string{}
	var initial []string
	for _, n := range names {
		peers[n], clients[n] = "http://"+freePort(t), "http://"+freePort(t)
		initial = append(initial, n+"="+peers[n])
	}
	ctx, cancel := context.WithCancel(context.Background())
	dir := t.TempDir()
	done := make(chan error, len(names))
	for _, n := range names {
		cfg := mdm.Config{Name: n, DataDir: filepath.Join(dir, n), PeerURL: peers[n], ClientURL: clients[n],
			InitialCluster: strings.Join(initial, ","), TieBreaker: n == "m3", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
		go func() { done <- mdm.Run(ctx, cfg) }()
	}
	t.Cleanup(func() {
		cancel()
		for range names {
			if err := <-done; err != nil {
				t.Errorf("mdm: %v", err)
			}
		}
	})
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{clients["m1"], clients["m2"], clients["m3"]}, DialTimeout: 5 * time.Second})
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

	members := func() map[string]map[string]any {
		_, v := e.do("GET", "/api/v1/mdm/members", e.admin, "")
		out := map[string]map[string]any{}
		for _, x := range v.([]any) {
			m := x.(map[string]any)
			out[m["name"].(string)] = m
		}
		return out
	}
	var leader string
	waitFor(t, 20*time.Second, "roles published and a Cairn leader elected", func() bool {
		ms := members()
		leader = ""
		for n, m := range ms {
			if m["raft_leader"] == true {
				leader = n
			}
		}
		return len(ms) == 3 && ms["m3"]["tie_breaker"] == true && ms["m1"]["tie_breaker"] == false && leader != "" &&
			(ms["m1"]["cairn_leader"] == true || ms["m2"]["cairn_leader"] == true)
	})
	target := "m1"
	if leader == "m1" {
		target = "m2"
	}
	e.failsWith(400, CodeInvalid, "name", "cannot lead", "POST", "/api/v1/mdm/leader", e.admin, `{"name":"m3"}`)
	if r := e.ok(200, "POST", "/api/v1/mdm/leader", e.admin, fmt.Sprintf(`{"name":%q}`, target)); r["leader"] != target {
		t.Fatalf("move leader: %v", r)
	}
	waitFor(t, 10*time.Second, "raft leader is "+target, func() bool { return members()[target]["raft_leader"] == true })
}
