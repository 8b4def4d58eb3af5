package deploy_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/vmware/govmomi/vim25/types"

	"github.com/cairn-storage/cairn/vcenter-plugin/internal/deploy"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/gateway"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/vcsimkit"
)

// failHost fails host as vCenter shows it (not responding, its VMs
// disconnected) and takes its SVM's SDS down in the fake array.
func (g *grown) failHost(t *testing.T, host string) {
	t.Helper()
	if err := g.kit.FailHost(host); err != nil {
		t.Fatal(err)
	}
	for _, h := range g.deployed.Hosts {
		if h.Name == host {
			svm := vcsimkit.SVM{Name: g.deployed.SVMName(host), Host: host, Properties: map[string]string{"cairn.mgmt.address": h.SVMIP + "/24"}}
			if err := g.array.Hooks(nil).PoweredOff(context.Background(), svm); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// A failed host's SVM is replaced by one on a spare host: the failed SDS
// is removed (its data rebuilt), the new SVM deployed like an expansion's,
// iSCSI moved to the new target. A failure in the middle, then the same
// request again: it resumes without redoing what was done.
func TestReplaceFailedHostResumes(t *testing.T) {
	g := setupGrown(t, 5, 4)
	ctx := context.Background()
	failed, spare := "esx-04.cairn.test", g.full.Hosts[4]
	g.volume(t, "vol1", 20, "esx-01.cairn.test")

	// Refused before anything changes: an MDM member; a host that has not failed.
	if err := g.engine.Replace(ctx, g.deployed, "esx-01.cairn.test", spare); err == nil || !strings.Contains(err.Error(), "holds an MDM member") {
		t.Fatalf("MDM host: %v", err)
	}
	if err := g.engine.Replace(ctx, g.deployed, failed, spare); err == nil || !strings.Contains(err.Error(), "is up: the host has not failed") {
		t.Fatalf("live host: %v", err)
	}
	if st, _ := deploy.LoadState(g.engine.StateDir, g.deployed); st == nil || st.Change != nil {
		t.Fatalf("a refused replacement recorded a change: %+v", st)
	}

	g.failHost(t, failed)
	// The kit refuses what vCenter cannot do on a host that does not respond.
	old, err := g.finder.VirtualMachine(ctx, g.deployed.SVMName(failed))
	if err != nil {
		t.Fatal(err)
	}
	if task, err := old.PowerOff(ctx); err == nil {
		if err = task.Wait(ctx); err == nil {
			t.Fatal("powered off a VM of a host that does not respond")
		}
	}

	g.array.FailNext("AddDevice", errors.New("injected: device busy"))
	err = g.engine.Replace(ctx, g.deployed, failed, spare)
	if err == nil || !strings.Contains(err.Error(), "injected: device busy") {
		t.Fatalf("first run: %v", err)
	}
	st, err := deploy.LoadState(g.engine.StateDir, g.deployed)
	if err != nil || st.Change == nil || st.Change.Kind != deploy.ChangeReplace || st.Change.Host != failed {
		t.Fatalf("state after the failure: %+v %v", st, err)
	}
	// Another change waits for this one.
	if err := g.engine.Expand(ctx, g.deployed, g.full); err == nil || !strings.Contains(err.Error(), "replacement of failed host "+failed+" in progress") {
		t.Fatalf("an expansion during the replacement: %v", err)
	}
	if err := g.engine.Replace(ctx, g.deployed, failed, spare); err != nil {
		t.Fatalf("resume: %v", err)
	}
	calls := g.array.Calls()
	for prefix, want := range map[string]int{"RemoveSDS": 1, "CreateSDS": 5, "AddDevice": 15} {
		if got := count(calls, prefix); got != want {
			t.Fatalf("%s called %d times in all, want %d: %v", prefix, got, want, calls)
		}
	}
	msgs := eventsMsgs(g.events(deploy.ReplaceJob("cairn1", failed)))
	for _, key := range []string{"replace/" + failed + "/sds", "replace/" + failed + "/rebuild", "svm/" + spare.Name + "/clone"} {
		if count(msgs, key+": done") != 1 || count(msgs, key+": already done") != 1 {
			t.Fatalf("step %s redone or not skipped on resume: %v", key, msgs)
		}
	}
	if _, err := g.array.GetSDS(ctx, deploy.SDSName(failed)); err == nil {
		t.Fatal("the failed SDS is still in the system")
	}
	sdss, _ := g.array.ListSDS(ctx)
	if len(sdss) != 4 || !slices.ContainsFunc(sdss, func(s gateway.SDS) bool { return s.Name == deploy.SDSName(spare.Name) && s.Up }) {
		t.Fatalf("SDSs after the replacement: %+v", sdss)
	}
	// iSCSI: every host sees the new SVM's target and not the failed one's.
	oldTarget := "10.20.0.14:3260"
	for _, h := range []string{"esx-01.cairn.test", "esx-02.cairn.test", "esx-03.cairn.test", spare.Name} {
		ts := g.sendTargets(t, h)
		if len(ts) != 4 || slices.Contains(ts, oldTarget) || !slices.Contains(ts, "10.20.0.15:3260") {
			t.Fatalf("host %s has send targets %v", h, ts)
		}
	}
	// The new target port id is one no SVM had.
	var names []string
	for _, m := range g.svms(t) {
		names = append(names, m.Name)
		if strings.HasSuffix(m.Name, "-esx-05") {
			props := map[string]string{}
			for _, p := range m.Config.VAppConfig.(*types.VmConfigInfo).Property {
				props[p.Id] = p.Value
			}
			if props["cairn.target.port_id"] != "5" {
				t.Fatalf("new SVM's properties %v", props)
			}
		}
	}
	// vcsim keeps the record of a VM it thinks powered on (vCenter lets a
	// disconnected VM be removed from the inventory); the run says so.
	kept := slices.Contains(names, g.deployed.SVMName(failed))
	if len(names) != 4+btoi(kept) || kept != strings.Contains(strings.Join(msgs, "\n"), "stays in the inventory") {
		t.Fatalf("old SVM kept %v, events say so %v: SVMs %v", kept, !kept, names)
	}
	// The new SVM's first boot spent a join token of its own roles.
	g.checkJoinTokens(t, []string{spare.Name}, []string{"sds", "target"})
	p, err := deploy.ReplacePlan(g.deployed, failed, spare)
	if err != nil {
		t.Fatal(err)
	}
	g.checkStateLoose(t, p)
	if len(g.saved) != 1 || len(g.saved[0].Hosts) != 4 || g.saved[0].Hosts[3].Name != spare.Name {
		t.Fatalf("SavePlan got %+v", g.saved)
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
