package maintenance_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cairn-storage/cairn/vcenter-plugin/internal/deploy"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/gateway"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/maintenance"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/progress"
)

// whole fails unless every host is out of maintenance mode, every SVM on
// and every SDS normal: what a stop must leave.
func whole(t *testing.T, e *env) {
	t.Helper()
	ctx := context.Background()
	for _, h := range e.plan.Hosts {
		hs, _ := e.finder.HostSystem(ctx, h.Name)
		var m mo.HostSystem
		if err := hs.Properties(ctx, hs.Reference(), []string{"runtime"}, &m); err != nil {
			t.Fatal(err)
		}
		if m.Runtime.InMaintenanceMode {
			t.Errorf("host %s left in maintenance mode", h.Name)
		}
		vm, _ := e.finder.VirtualMachine(ctx, e.plan.SVMName(h.Name))
		if g, _ := deploy.ReadGuest(ctx, vm); g.PowerState != types.VirtualMachinePowerStatePoweredOn {
			t.Errorf("SVM of %s left %s", h.Name, g.PowerState)
		}
		if s, _ := e.array.GetSDS(ctx, deploy.SDSName(h.Name)); s.State != gateway.SDSNormal {
			t.Errorf("sds of %s left %s", h.Name, s.State)
		}
	}
	if sys, _ := e.array.System(ctx); sys.Health.Status != gateway.HealthOK {
		t.Errorf("health %s after the stop", sys.Health.Status)
	}
}

// waitEvent waits for an event of job containing msg.
func waitEvent(t *testing.T, log *progress.Log, job, msg string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		for _, ev := range log.Since(0, job) {
			if strings.Contains(ev.Message, msg) {
				return
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("no event %q", msg)
}

// TestStopWhileWaitingForThePatch: a stop while the roll waits for the
// operator on host 2 brings host 2 back unpatched, ends "stopped", and a
// resume rolls hosts 3 and 4 only.
func TestStopWhileWaitingForThePatch(t *testing.T) {
	e := setup(t, perHost)
	ctx := context.Background()
	log := progress.NewLog(1000, nil)
	e.engine.Log = log
	job := maintenance.Job("cairn1")
	if _, err := e.engine.Stop("cairn1"); err == nil || !strings.Contains(err.Error(), "nothing to stop") {
		t.Fatalf("stop without a roll: %v", err)
	}
	req := maintenance.Request{By: maintenance.ByHost}
	done := make(chan error, 1)
	go func() { done <- e.engine.Run(ctx, e.plan, req) }()
	waitEvent(t, log, job, "patch and reboot esx-01.cairn.test")
	if err := e.engine.Continue("cairn1"); err != nil {
		t.Fatal(err)
	}
	waitEvent(t, log, job, "patch and reboot esx-02.cairn.test")
	sp, err := e.engine.Stop("cairn1")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(sp.Hosts, ",") != "esx-02.cairn.test" || sp.Step != "patch" || !sp.Unpatched || !strings.Contains(strings.Join(sp.Actions, "; "), "without patching") {
		t.Fatalf("stop plan %+v", sp)
	}
	if again, err := e.engine.Stop("cairn1"); err != nil || again != sp {
		t.Fatalf("second stop: %+v %v", again, err)
	}
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the roll did not stop")
	}
	if !errors.Is(err, maintenance.ErrStopped) || !strings.Contains(err.Error(), "NOT patched") || !strings.Contains(err.Error(), "continues with esx-03.cairn.test") {
		t.Fatalf("stopped roll: %v", err)
	}
	whole(t, e)
	st, _ := maintenance.LoadState(e.engine.StateDir, "cairn1")
	if st.DoneUnits != 2 || !st.Stopped || st.Completed || st.Stopping || st.LastError != "" || len(st.Unpatched) != 1 || st.Unpatched[0][0] != "esx-02.cairn.test" {
		t.Fatalf("state after stop %+v", st)
	}
	if _, err := e.engine.Stop("cairn1"); err == nil {
		t.Fatal("stop of a stopped roll accepted")
	}
	// Resume: the next hosts only.
	ck := &checker{t: t, e: e}
	e.engine.Patch = ck.patch
	if err := e.engine.Run(ctx, e.plan, req); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(ck.order, ","); got != "esx-03.cairn.test,esx-04.cairn.test" {
		t.Fatalf("resumed order %s", got)
	}
	st, _ = maintenance.LoadState(e.engine.StateDir, "cairn1")
	if !st.Completed || st.Stopped || len(st.Unpatched) != 1 {
		t.Fatalf("state after resume %+v", st)
	}
}

// TestStopAfterThePatch: a stop during a patch hook lets it finish and
// brings the host back patched; the job stops before the next host.
func TestStopAfterThePatch(t *testing.T) {
	e := setup(t, perHost)
	var plan *maintenance.StopPlan
	ck := &checker{t: t, e: e, onUnit: func(unit []string) {
		var err error
		if plan, err = e.engine.Stop("cairn1"); err != nil {
			t.Error(err)
		}
	}}
	e.engine.Patch = ck.patch
	err := e.engine.Run(context.Background(), e.plan, maintenance.Request{By: maintenance.ByHost})
	if !errors.Is(err, maintenance.ErrStopped) || !strings.Contains(err.Error(), "esx-01.cairn.test patched and back") {
		t.Fatalf("stopped roll: %v", err)
	}
	if plan == nil || plan.Unpatched || plan.Step != "patch" || !strings.Contains(strings.Join(plan.Actions, "; "), "let the patch of esx-01.cairn.test finish") {
		t.Fatalf("stop plan %+v", plan)
	}
	whole(t, e)
	st, _ := maintenance.LoadState(e.engine.StateDir, "cairn1")
	if st.DoneUnits != 1 || !st.Stopped || len(st.Unpatched) != 0 || len(ck.order) != 1 {
		t.Fatalf("state %+v, patched %v", st, ck.order)
	}
}

// TestStopThatCannotBringTheHostBack: when the SVM does not come back
// during a stop, the roll fails (not "stopped": the host is not back) and
// a resume carries on bringing it back, never patching it, then rolls on.
func TestStopThatCannotBringTheHostBack(t *testing.T) {
	e := setup(t, perHost)
	ctx := context.Background()
	log := progress.NewLog(1000, nil)
	e.engine.Log = log
	job := maintenance.Job("cairn1")
	req := maintenance.Request{By: maintenance.ByHost}
	done := make(chan error, 1)
	go func() { done <- e.engine.Run(ctx, e.plan, req) }()
	waitEvent(t, log, job, "patch and reboot esx-01.cairn.test")
	e.guest.failHost.Store("esx-01.cairn.test")
	if _, err := e.engine.Stop("cairn1"); err != nil {
		t.Fatal(err)
	}
	err := <-done
	if err == nil || errors.Is(err, maintenance.ErrStopped) || !strings.Contains(err.Error(), "stopping: svm-power-on") {
		t.Fatalf("stop with an SVM that does not boot: %v", err)
	}
	st, _ := maintenance.LoadState(e.engine.StateDir, "cairn1")
	if !st.Stopping || st.DoneUnits != 0 {
		t.Fatalf("state %+v", st)
	}
	e.guest.failHost.Store("")
	ck := &checker{t: t, e: e}
	e.engine.Patch = ck.patch
	if err := e.engine.Run(ctx, e.plan, req); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(ck.order, ","); got != "esx-02.cairn.test,esx-03.cairn.test,esx-04.cairn.test" {
		t.Fatalf("resumed order %s (esx-01 must not be patched after the stop)", got)
	}
	whole(t, e)
	st, _ = maintenance.LoadState(e.engine.StateDir, "cairn1")
	if len(st.Unpatched) != 1 || st.Unpatched[0][0] != "esx-01.cairn.test" {
		t.Fatalf("unpatched %+v", st.Unpatched)
	}
}
