package update

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairn-storage/cairn/appliance/internal/etcdtest"
)

// buildCairn builds the real cairn of version v (the link-time override)
// into a directory with a cairnctl beside it, once per test binary.
var builds sync.Map

func buildCairn(t *testing.T, v string) string {
	t.Helper()
	if d, ok := builds.Load(v); ok {
		return d.(string)
	}
	if testing.Short() {
		t.Skip("builds cairn")
	}
	dir, err := os.MkdirTemp("", "cairn-update-build-")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "build", "-ldflags", "-X github.com/cairn-storage/cairn/appliance/internal/buildinfo.override="+v,
		"-o", filepath.Join(dir, "cairn"), "./cmd/cairn")
	cmd.Dir = "../.."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build cairn %s: %v\n%s", v, err, out)
	}
	// cairnctl is only carried by the switch here; a small stand-in keeps the build short.
	if err := os.WriteFile(filepath.Join(dir, "cairnctl"), []byte("#!/bin/sh\necho cairnctl "+v+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	// The bundle, written once by the build's own `cairn bundle` (the
	// race detector makes an in-process gzip of 40 MB take half a minute).
	cmd = exec.Command(filepath.Join(dir, "cairn"), "bundle", "--bin", dir, "--out", filepath.Join(dir, "bundle.tgz"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("cairn bundle %s: %v\n%s", v, err, out)
	}
	builds.Store(v, dir)
	return dir
}

func TestMain(m *testing.M) {
	code := m.Run()
	builds.Range(func(_, d any) bool { os.RemoveAll(d.(string)); return true })
	os.Exit(code)
}

// simRoot is an SVM's file system under a temporary root, as the image
// leaves it: plain cairn and cairnctl of build in /usr/local/bin, and unit
// files run by the e2e harness's systemctl (tests/e2e/guest/systemctl,
// which runs units the way systemd does). Units: two daemons (cairn
// updater processes of the installed binary, idling on the test's etcd;
// named as the MDM and the SDS units so the order is the real one), a
// oneshot that must not be restarted, and a daemon unit that is not running.
func simRoot(t *testing.T, build, etcdURL string) *Installer {
	t.Helper()
	root := t.TempDir()
	t.Setenv("CAIRN_SIM_ROOT", root)
	for _, d := range []string{"usr/local/bin", "etc/systemd/system"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range Binaries {
		b, err := os.ReadFile(filepath.Join(build, n))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, "usr/local/bin", n), b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	daemon := func(name string) string {
		return fmt.Sprintf("[Service]\nType=simple\nExecStart=%s/usr/local/bin/cairn updater --name %s --mdm %s --poll 1h\nRestart=on-failure\nRestartSec=0.5s\n",
			root, name, etcdURL)
	}
	units := map[string]string{
		"cairn-mdm.service":     daemon("test-mdm"),
		"cairn-sds.service":     daemon("test-sds"),
		"cairn-target.service":  daemon("test-target"),
		"cairn-gateway.service": daemon("test-gateway"),
		"cairn-ready.service":   "[Service]\nType=oneshot\nRemainAfterExit=yes\nExecStart=/bin/true\n",
	}
	for u, text := range units {
		if err := os.WriteFile(filepath.Join(root, "etc/systemd/system", u), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	systemctl, err := filepath.Abs("../../../tests/e2e/guest/systemctl")
	if err != nil {
		t.Fatal(err)
	}
	in := &Installer{Root: root, Systemctl: systemctl, Settle: 1500 * time.Millisecond, StartTimeout: 30 * time.Second,
		Log: slog.New(slog.NewTextHandler(testWriter{t}, nil))}
	ctx := context.Background()
	if _, err := in.systemctl(ctx, "start", "cairn-mdm.service", "cairn-sds.service", "cairn-target.service", "cairn-ready.service"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		in.systemctl(context.Background(), "stop", "cairn-mdm.service", "cairn-sds.service", "cairn-target.service", "cairn-gateway.service", "cairn-ready.service")
	})
	return in
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(b)))
	return len(b), nil
}

// parsed holds each directory's bundle, parsed once per test binary.
var parsed sync.Map

func readBundle(t *testing.T, dir string) *Bundle {
	t.Helper()
	if b, ok := parsed.Load(dir); ok {
		return b.(*Bundle)
	}
	b, err := Parse(bundleOf(t, dir))
	if err != nil {
		t.Fatal(err)
	}
	parsed.Store(dir, b)
	return b
}

// unitVersion is the version the unit's main process runs (as the health
// check reads it), or why there is none.
func unitVersion(t *testing.T, in *Installer, unit string) string {
	t.Helper()
	for _, v := range []string{"7.0.0", "7.0.1"} {
		if ok, _ := in.runs(context.Background(), unit, v); ok {
			return v
		}
	}
	_, why := in.runs(context.Background(), unit, "7.0.0")
	return why
}

// The first update moves the image's files into versions/, switches the
// links, restarts the running daemon units (MDM first) on the new version
// and prunes; a broken bundle (its cairn exits 1) is rolled back, leaving
// the previous version running.
func TestUpdateSwitchesAndRollsBack(t *testing.T) {
	cli := etcdtest.Start(t)
	oldBuild, newBuild := buildCairn(t, "7.0.0"), buildCairn(t, "7.0.1")
	in := simRoot(t, oldBuild, cli.Endpoints()[0])
	ctx := context.Background()
	// The unit is active once systemctl start returns, but its main process
	// may not have exec'd cairn yet (systemd's start job ends at the fork):
	// the installer's own health check waits for it.
	if err := in.healthy(ctx, []string{"cairn-sds.service"}, "7.0.0"); err != nil {
		t.Fatalf("before: %v", err)
	}
	units, err := in.Units(ctx)
	if err != nil || strings.Join(units, ",") != "cairn-mdm.service,cairn-sds.service,cairn-target.service" {
		t.Fatalf("units to restart: %v %v (want the active daemons, the MDM first; no oneshot, nothing inactive)", units, err)
	}
	// A stale version from long ago is pruned by the next good update.
	stale := filepath.Join(in.VersionsDir(), "6.9.9")
	os.MkdirAll(stale, 0o755)

	var steps []string
	in.Progress = func(m string) { steps = append(steps, m) }
	res, err := in.Update(ctx, readBundle(t, newBuild))
	if err != nil {
		t.Fatalf("update: %v", err)
	}
	if res.From != "7.0.0" || res.To != "7.0.1" || len(res.Units) != 3 {
		t.Fatalf("result %+v", res)
	}
	for _, u := range []string{"cairn-mdm.service", "cairn-sds.service", "cairn-target.service"} {
		if v := unitVersion(t, in, u); v != "7.0.1" {
			t.Errorf("after the update %s runs %s", u, v)
		}
	}
	if st, _ := in.systemctl(ctx, "is-active", "cairn-gateway.service"); st == "active" {
		t.Error("an inactive unit was started by the update")
	}
	if cur, err := in.Current(); cur != "7.0.1" || err != nil {
		t.Fatalf("current %s %v", cur, err)
	}
	if v, err := VersionOf(filepath.Join(in.Root, "usr/local/bin/cairn")); v != "7.0.1" {
		t.Fatalf("/usr/local/bin/cairn answers %s %v", v, err)
	}
	if target, _ := os.Readlink(filepath.Join(in.Root, "usr/local/bin/cairnctl")); target != "../lib/cairn/versions/7.0.1/cairnctl" {
		t.Fatalf("cairnctl links to %q", target)
	}
	ents, _ := os.ReadDir(in.VersionsDir())
	var kept []string
	for _, e := range ents {
		kept = append(kept, e.Name())
	}
	if strings.Join(kept, ",") != "7.0.0,7.0.1" {
		t.Fatalf("versions kept: %v (want the old and the new, the stale one pruned)", kept)
	}
	// The MDM alone first, then the others restarted and settled together.
	if !strings.Contains(strings.Join(steps, "\n"), "restarting cairn-mdm.service on 7.0.1\nrestarting cairn-sds.service on 7.0.1\n"+
		"restarting cairn-target.service on 7.0.1\nchecking that cairn-sds.service, cairn-target.service stay active on 7.0.1 for 1.5s") {
		t.Errorf("restart order: %q", steps)
	}

	// The broken build: its cairn answers `version` but exits 1 as a daemon.
	t0 := time.Now()
	_, err = in.Update(ctx, readBundle(t, fakeBuild(t, "7.0.2")))
	if !errors.Is(err, ErrRolledBack) || !strings.Contains(err.Error(), "cairn-mdm.service did not run version 7.0.2") {
		t.Fatalf("broken bundle: %v; want a roll back naming the MDM unit", err)
	}
	t.Logf("rolled back in %s: %v", time.Since(t0).Round(time.Millisecond), err)
	if cur, _ := in.Current(); cur != "7.0.1" {
		t.Fatalf("after the roll back the links name %s", cur)
	}
	for _, u := range []string{"cairn-mdm.service", "cairn-sds.service", "cairn-target.service"} {
		if v := unitVersion(t, in, u); v != "7.0.1" {
			t.Errorf("after the roll back %s runs %s", u, v)
		}
	}
}

// The updater carries out an order from etcd: it fetches and verifies the
// bundle, updates, reports done and returns (to restart on the new
// version); restarted, it does not carry the same order out again. A
// broken bundle's order ends rolled back with the version unchanged.
func TestUpdaterCarriesOutOrders(t *testing.T) {
	cli := etcdtest.Start(t)
	oldBuild, newBuild := buildCairn(t, "7.0.0"), buildCairn(t, "7.0.1")
	in := simRoot(t, oldBuild, cli.Endpoints()[0])
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	st := Store{Etcd: cli}
	for _, dir := range []string{newBuild, fakeBuild(t, "7.0.2")} {
		raw, b := bundleOf(t, dir), readBundle(t, dir)
		if _, err := st.PutBundle(ctx, b, raw); err != nil {
			t.Fatal(err)
		}
	}
	u := &Updater{Name: "svm1", Store: st, Installer: in, Poll: 100 * time.Millisecond, Log: in.Log}
	if _, err := st.PutOrder(ctx, "svm1", "7.0.1"); err != nil {
		t.Fatal(err)
	}
	if err := u.Run(ctx); err != nil {
		t.Fatalf("updater: %v", err)
	}
	s, err := st.State(ctx, "svm1")
	if err != nil || s.State != StateDone || s.Ordered != "7.0.1" || !strings.Contains(s.Message, "3 units run 7.0.1") {
		t.Fatalf("state after the update: %+v %v", s, err)
	}
	if v := unitVersion(t, in, "cairn-sds.service"); v != "7.0.1" {
		t.Fatalf("cairn-sds runs %s", v)
	}
	// Restarted: the order is carried out; nothing happens until ctx ends.
	rctx, rcancel := context.WithTimeout(ctx, time.Second)
	err = u.Run(rctx)
	rcancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("restarted updater: %v; want it to wait for a new order", err)
	}
	if s2, _ := st.State(ctx, "svm1"); s2.State != StateDone || s2.Order != s.Order {
		t.Fatalf("restarted updater changed the state: %+v", s2)
	}

	if _, err := st.PutOrder(ctx, "svm1", "7.0.2"); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- u.Run(ctx) }()
	for {
		s, _ = st.State(ctx, "svm1")
		if s.State == StateRolledBack || s.State == StateFailed || ctx.Err() != nil {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	cancel()
	<-done
	if s.State != StateRolledBack || s.Ordered != "7.0.2" || !strings.Contains(s.Message, "rolled back to 7.0.1") {
		t.Fatalf("broken bundle's order: %+v", s)
	}
	if cur, _ := in.Current(); cur != "7.0.1" {
		t.Fatalf("links name %s after the roll back", cur)
	}
	all, err := st.States(context.Background())
	if err != nil || len(all) == 0 {
		t.Fatalf("states: %v %v", all, err)
	}
}
