package deploy_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairn-storage/cairn/vcenter-plugin/internal/deploy"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/gateway"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/plan"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/poll"
)

// The roll's units: a fault set's SVMs together, a host without one
// alone, the MDM members' SVMs last and one at a time, whatever the
// order the hosts are asked in.
func TestUpgradeUnits(t *testing.T) {
	p := &plan.Plan{System: "cairn1", Hosts: []plan.Host{
		{Name: "a", Roles: []string{plan.RoleMDM, plan.RoleSDS}, FaultSet: "fs1"},
		{Name: "b", Roles: []string{plan.RoleSDS}, FaultSet: "fs1"},
		{Name: "c", Roles: []string{plan.RoleSDS}, FaultSet: "fs2"},
		{Name: "d", Roles: []string{plan.RoleTieBreaker}},
		{Name: "e", Roles: []string{plan.RoleSDS, plan.RoleTarget}},
		{Name: "f", Roles: []string{plan.RoleSDS}, FaultSet: "fs2"},
		{Name: "g"}, // no SVM
	}}
	units, err := deploy.UpgradeUnits(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := [][]string{{"b"}, {"c", "f"}, {"e"}, {"a"}, {"d"}}
	if !slices.EqualFunc(units, want, slices.Equal[[]string]) {
		t.Fatalf("units %v, want %v", units, want)
	}
	units, err = deploy.UpgradeUnits(p, []string{"a", "f", "e"})
	if want := [][]string{{"e"}, {"f"}, {"a"}}; err != nil || !slices.EqualFunc(units, want, slices.Equal[[]string]) {
		t.Fatalf("units of a, f, e: %v %v, want %v", units, err, want)
	}
	for _, hosts := range [][]string{{"x"}, {"g"}} {
		if _, err := deploy.UpgradeUnits(p, hosts); err == nil {
			t.Fatalf("hosts %v accepted", hosts)
		}
	}
}

// waitWhole waits until the fake cluster is whole (a resync after an SDS
// left maintenance).
func (g *grown) waitWhole(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	if err := poll.Until(ctx, 10*time.Second, 10*time.Millisecond, "the fake did not resync", func() (bool, string, error) {
		return gateway.Whole(ctx, g.array)
	}); err != nil {
		t.Fatal(err)
	}
}

// A system rolled to a stored version: refused before anything changes
// without the bundle or with an SDS away; one unit at a time (its SDS in
// maintenance around its SVM's order, out before the next unit's), the
// MDM members last; a failure in the middle, then the same request
// resumes without redoing what was done; sent again, nothing happens; a
// broken version stops the roll at its first SVM, rolled back, with the
// system out of maintenance and no change left in progress.
func TestUpgradeRollsUnitsAndResumes(t *testing.T) {
	g := setupGrown(t, 5, 5)
	ctx := context.Background()
	next, broken := "0.2.0", "0.2.1"
	req := deploy.UpgradeRequest{Version: next}
	job := deploy.UpgradeJob("cairn1")

	if err := g.engine.Upgrade(ctx, g.deployed, req); err == nil || !strings.Contains(err.Error(), "no bundle of version 0.2.0 is stored") {
		t.Fatalf("without the bundle: %v", err)
	}
	g.array.StoreBundle(next, false)
	g.array.StoreBundle(broken, true)
	if err := g.array.EnterSDSMaintenance(ctx, deploy.SDSName("esx-02.cairn.test"), gateway.MaintenanceInstant); err != nil {
		t.Fatal(err)
	}
	if err := g.engine.Upgrade(ctx, g.deployed, req); err == nil || !strings.Contains(err.Error(), "is not whole") {
		t.Fatalf("with an SDS in maintenance: %v", err)
	}
	if err := g.array.ExitSDSMaintenance(ctx, deploy.SDSName("esx-02.cairn.test")); err != nil {
		t.Fatal(err)
	}
	g.waitWhole(t)
	if st, _ := deploy.LoadState(g.engine.StateDir, g.deployed); st == nil || st.Change != nil {
		t.Fatalf("a refused upgrade recorded a change: %+v", st)
	}
	if n := count(g.array.Calls(), "OrderUpgrade"); n != 0 {
		t.Fatalf("a refused upgrade ordered %d SVMs", n)
	}

	// The first order fails: the roll stops with esx-04's SDS in
	// maintenance; the same request resumes there.
	before := len(g.array.Calls())
	g.array.FailNext("OrderUpgrade", errors.New("injected: gateway busy"))
	err := g.engine.Upgrade(ctx, g.deployed, req)
	if err == nil || !strings.Contains(err.Error(), "injected: gateway busy") {
		t.Fatalf("first run: %v", err)
	}
	st, err := deploy.LoadState(g.engine.StateDir, g.deployed)
	if err != nil || st.Change == nil || st.Change.Kind != deploy.ChangeUpgrade || st.Change.Version != next {
		t.Fatalf("state after the failure: %+v %v", st, err)
	}
	if err := g.engine.Shrink(ctx, g.deployed, "esx-05.cairn.test"); err == nil || !strings.Contains(err.Error(), "an upgrade to 0.2.0 in progress") {
		t.Fatalf("a host removal during the upgrade: %v", err)
	}
	if err := g.engine.Upgrade(ctx, g.deployed, deploy.UpgradeRequest{Version: broken}); err == nil || !strings.Contains(err.Error(), "upgrade to 0.2.0") {
		t.Fatalf("another version during the upgrade: %v", err)
	}
	if err := g.engine.Upgrade(ctx, g.deployed, req); err != nil {
		t.Fatalf("resume: %v", err)
	}
	calls := g.array.Calls()[before:]
	var roll []string // the upgrade's own calls, in order
	for _, c := range calls {
		if strings.HasPrefix(c, "OrderUpgrade") || strings.Contains(c, "SDSMaintenance") {
			roll = append(roll, c)
		}
	}
	var wantRoll []string
	for _, h := range []string{"esx-04", "esx-05", "esx-01", "esx-02", "esx-03"} {
		svm := "cairn-" + h
		wantRoll = append(wantRoll, "EnterSDSMaintenance "+svm+":instant", "OrderUpgrade "+svm+":"+next, "ExitSDSMaintenance "+svm)
	}
	if !slices.Equal(roll, wantRoll) {
		t.Fatalf("the roll's calls:\n%s\nwant\n%s", strings.Join(roll, "\n"), strings.Join(wantRoll, "\n"))
	}
	msgs := eventsMsgs(g.events(job))
	if key := "upgrade/0.2.0/cairn-esx-04/maintenance"; count(msgs, key+": done") != 1 || count(msgs, key+": already done") != 1 {
		t.Fatalf("step %s redone or not skipped on resume: %v", key, msgs)
	}
	g.checkAllRunning(t, next, "the roll")
	g.checkUpgradeEnded(t)

	// Again: every SVM runs it, nothing is ordered.
	before = len(g.array.Calls())
	if err := g.engine.Upgrade(ctx, g.deployed, req); err != nil {
		t.Fatalf("again: %v", err)
	}
	if calls := g.array.Calls()[before:]; len(calls) != 0 {
		t.Fatalf("an upgrade to the running version called %v", calls)
	}

	// A broken version: the first SVM's updater rolls back; the roll stops there.
	before = len(g.array.Calls())
	err = g.engine.Upgrade(ctx, g.deployed, deploy.UpgradeRequest{Version: broken})
	if !errors.Is(err, deploy.ErrUpgradeStopped) || !strings.Contains(err.Error(), "SVM cairn-esx-04") || !strings.Contains(err.Error(), "rolled back to 0.2.0") {
		t.Fatalf("broken version: %v", err)
	}
	if calls := g.array.Calls()[before:]; count(calls, "OrderUpgrade") != 1 || count(calls, "ExitSDSMaintenance cairn-esx-04") != 1 {
		t.Fatalf("the broken roll's calls: %v", calls)
	}
	g.checkAllRunning(t, next, "the rolled-back roll")
	g.checkUpgradeEnded(t)
}

// checkAllRunning: every SVM's updater runs version after what.
func (g *grown) checkAllRunning(t *testing.T, version, what string) {
	t.Helper()
	for name, v := range g.array.Running() {
		if v != version {
			t.Fatalf("SVM %s runs %s after %s: %v", name, v, what, g.array.Running())
		}
	}
}

// checkUpgradeEnded: no change in progress, no upgrade step kept, every
// SDS out of maintenance, the cluster whole.
func (g *grown) checkUpgradeEnded(t *testing.T) {
	t.Helper()
	st, err := deploy.LoadState(g.engine.StateDir, g.deployed)
	if err != nil || st.Change != nil {
		t.Fatalf("state: %v %+v", err, st)
	}
	for k := range st.Steps {
		if strings.HasPrefix(k, "upgrade/") {
			t.Fatalf("state keeps step %s", k)
		}
	}
	ok, why, err := gateway.Whole(context.Background(), g.array)
	if err != nil || !ok {
		t.Fatalf("the cluster after the roll: %s %v", why, err)
	}
}

// TestUpgradeStopSwitch: the operator's stop ends the roll between units,
// never inside one: the unit it was on is upgraded and out of maintenance,
// the change ended; the same request goes on with the SVMs left only.
func TestUpgradeStopSwitch(t *testing.T) {
	g := setupGrown(t, 5, 5)
	ctx := context.Background()
	next := "0.2.0"
	g.array.StoreBundle(next, false)
	req := deploy.UpgradeRequest{Version: next}
	var stop atomic.Bool
	g.engine.UpgradeStop = func() bool {
		// Flipped while the first unit runs (its SVM ordered): as an
		// operator pressing Stop mid-unit.
		if count(g.array.Calls(), "OrderUpgrade") >= 1 {
			stop.Store(true)
		}
		return stop.Load()
	}
	err := g.engine.Upgrade(ctx, g.deployed, req)
	if !errors.Is(err, deploy.ErrUpgradeStoppedByOperator) || !strings.Contains(err.Error(), "after 1 of 5 SVM units") ||
		!strings.Contains(err.Error(), "cairn-esx-05") {
		t.Fatalf("stopped roll: %v", err)
	}
	if n := count(g.array.Calls(), "OrderUpgrade"); n != 1 || count(g.array.Calls(), "ExitSDSMaintenance cairn-esx-04") != 1 {
		t.Fatalf("the stopped roll's calls: %v", g.array.Calls())
	}
	g.checkUpgradeEnded(t)

	g.engine.UpgradeStop = nil
	before := len(g.array.Calls())
	if err := g.engine.Upgrade(ctx, g.deployed, req); err != nil {
		t.Fatalf("go on: %v", err)
	}
	if calls := g.array.Calls()[before:]; count(calls, "OrderUpgrade") != 4 || count(calls, "OrderUpgrade cairn-esx-04") != 0 {
		t.Fatalf("the resumed roll's calls: %v", calls)
	}
	g.checkAllRunning(t, next, "the resumed roll")
	g.checkUpgradeEnded(t)
}
