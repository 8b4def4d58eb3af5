package main

// The SVM lifecycle under fio (issue 13): the deployed system grows by two
// hosts deployed in parallel, loses one (drained, SVM deleted), and one
// whose host fails (its SVM's daemons killed, the host not responding in
// vCenter) is replaced on the spare host. Each change runs through the
// deploy engine's functions the plugin server's routes call
// (POST /api/v1/systems/{s}/expand, …/hosts/{h}/remove, …/hosts/{h}/replace).

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/vim25"

	"github.com/cairn-storage/cairn/vcenter-plugin/internal/datastore"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/deploy"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/gateway"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/inventory"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/plan"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/poll"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/vcsimkit"
)

type lifecycle struct {
	*harness
	kit    *vcsimkit.Kit
	vc     *vim25.Client
	api    gateway.API
	full   *plan.Plan // the suggested plan of every kit host
	fio    *fioLoop
	engine func() *deploy.Engine
}

// run takes the system deployed with p through expand, remove, replace, and
// returns the plan of the system it leaves (the deployed hosts in p's order,
// then the added one that stayed and the replacement).
func (l *lifecycle) run(ctx context.Context, p *plan.Plan) (*plan.Plan, error) {
	grown := *p
	grown.Hosts = slices.Clone(p.Hosts)
	added := []plan.Host{l.full.Hosts[4], l.full.Hosts[5]}
	for _, x := range added {
		x.Roles = []string{plan.RoleSDS, plan.RoleTarget}
		grown.Hosts = append(grown.Hosts, x)
	}
	if err := l.phase("expand (2 hosts in parallel)", func() error { return l.expand(ctx, p, &grown, added) }); err != nil {
		return nil, err
	}
	removed := added[0].Name
	shrunk := grown.Without(removed)
	if err := l.phase("remove a host", func() error { return l.remove(ctx, &grown, removed) }); err != nil {
		return nil, err
	}
	if err := l.phase("replace a failed host", func() error { return l.replace(ctx, shrunk, added[1].Name, l.full.Hosts[6]) }); err != nil {
		return nil, err
	}
	// The system's plan now, exactly as the deploy state records it (the
	// upgrade phase's engine loads the state with it).
	return deploy.ReplacePlan(shrunk, added[1].Name, l.full.Hosts[6])
}

func (l *lifecycle) ds() *datastore.Engine {
	return &datastore.Engine{VC: l.vc, API: l.api, Log: l.log, RescanTimeout: time.Minute, PollInterval: 300 * time.Millisecond}
}

// sdsState checks the cluster has exactly the SDSs of hosts, all up and
// in normal state.
func (l *lifecycle) sdsState(ctx context.Context, hosts []string) {
	sdss, err := l.api.ListSDS(ctx)
	if err != nil {
		l.fail("list SDSs: %v", err)
		return
	}
	var got, want []string
	ok := true
	for _, s := range sdss {
		got = append(got, s.Name)
		ok = ok && s.Up && s.State == gateway.SDSNormal
	}
	for _, x := range hosts {
		want = append(want, deploy.SDSName(x))
	}
	slices.Sort(got)
	slices.Sort(want)
	l.check(ok && slices.Equal(got, want), "SDSs of the system, all up and normal: %v (want %v)", got, want)
}

// mountsDatastore checks the hosts mount the e2e volume's VMFS datastore.
func (l *lifecycle) mountsDatastore(ctx context.Context, hosts []string) error {
	inv, err := inventory.Collect(ctx, l.vc)
	if err != nil {
		return err
	}
	for _, name := range hosts {
		ih, _ := inv.Host(name)
		found := false
		if ih != nil {
			for _, ds := range ih.Datastores {
				found = found || (ds.Name == volume && ds.Type == "VMFS" && !ds.Local)
			}
		}
		l.check(found, "host %s sees the volume's LUN and mounts datastore %s", name, volume)
	}
	return nil
}

func (l *lifecycle) fioSoFar(what string) {
	l.check(l.fio.failures.Load() == 0, "fio during %s: %d verified passes so far, %d failures", what, l.fio.passes.Load(), l.fio.failures.Load())
}

func (l *lifecycle) expand(ctx context.Context, deployed, grown *plan.Plan, added []plan.Host) error {
	seq := l.lastSeq()
	if err := l.engine().Expand(ctx, deployed, grown); err != nil {
		return err
	}
	// Side by side: each new host's clone started before the other's
	// devices were added.
	evs := l.log.Since(seq, deploy.ExpandJob(system))
	at := func(host, substr string) int64 {
		for _, e := range evs {
			if e.Host == host && strings.Contains(e.Message, substr) {
				return e.Seq
			}
		}
		return -1
	}
	a, b := added[0].Name, added[1].Name
	ca, cb := at(a, "/clone: started"), at(b, "/clone: started")
	da, db := at(a, "cluster/devices/"+a+": done"), at(b, "cluster/devices/"+b+": done")
	l.check(ca >= 0 && cb >= 0 && da >= 0 && db >= 0 && cb < da && ca < db, "hosts %s and %s deployed in parallel (clone events %d %d before devices %d %d)", a, b, ca, cb, da, db)
	rebalanced := false
	for _, e := range evs {
		rebalanced = rebalanced || (e.Step == "rebalance" && strings.Contains(e.Message, "done"))
	}
	l.check(rebalanced, "the expansion followed the rebalance to its end")
	// The deployed SVMs' firewalls (first boot: the 4 SVMs and this core
	// only) now admit the new SVMs: cairn peersync on each followed the
	// SVM records the expansion wrote (nothing else opens them).
	for _, x := range deployed.Hosts {
		fw, err := os.ReadFile(filepath.Join(l.state, "svm", deployed.SVMName(x.Name), "root", "etc", "nftables.conf"))
		for _, n := range added {
			l.check(err == nil && strings.Contains(string(fw), n.SVMIP), "%s's firewall admits the new SVM of %s (%s): cairn peersync followed the model (%v)",
				deployed.SVMName(x.Name), n.Name, n.SVMIP, err)
		}
	}
	// Each new SVM got its certificates with a join token of its own (the
	// plugin created it for its roles; no bootstrap token), spent at its first
	// boot: the token read from its settings is worth nothing now.
	for _, n := range added {
		dir := filepath.Join(l.state, "svm", grown.SVMName(n.Name))
		tok, err := os.ReadFile(filepath.Join(dir, "root", "etc", "cairn", "join-token"))
		token := strings.TrimSpace(string(tok))
		sds := unitCmdline(dir, "cairn-sds.service")
		l.check(err == nil && strings.HasPrefix(token, "cj1.") && strings.Contains(sds, "--pki /etc/cairn/pki/sds"),
			"%s joined with a one-time join token of its own and runs with its certificate: %s", grown.SVMName(n.Name), sds)
		l.check(l.joinRefused(ctx, grown, token, "already used"), "%s: its join token is spent", grown.SVMName(n.Name))
	}
	l.sdsState(ctx, hostNames(grown))
	sys, err := waitHealthy(ctx, l.api, time.Minute)
	if err != nil {
		return err
	}
	l.check(sys.Rebuild.RebalancingGroups == 0 && sys.Rebuild.PendingBytes == 0, "no copy work left after the expansion: %d groups rebalancing, %d bytes pending",
		sys.Rebuild.RebalancingGroups, sys.Rebuild.PendingBytes)
	// The new hosts were wired to every target; mapped, they find the LUN.
	if err := l.ds().Map(ctx, datastore.HostsRequest{Datacenter: vcsimkit.Datacenter, Volume: volume, Hosts: []string{a, b}}); err != nil {
		return fmt.Errorf("map %s to the new hosts: %w", volume, err)
	}
	if err := l.mountsDatastore(ctx, []string{a, b}); err != nil {
		return err
	}
	l.fioSoFar("the expansion")
	return nil
}

func (l *lifecycle) remove(ctx context.Context, grown *plan.Plan, host string) error {
	// A host with the volume mapped is refused (its datastore would go):
	// unmap first, as the refusal says.
	err := l.engine().Shrink(ctx, grown, host)
	l.check(err != nil && strings.Contains(err.Error(), "are mapped to host"), "removing a host with %s mapped is refused: %v", volume, err)
	if err := l.ds().Unmap(ctx, datastore.HostsRequest{Datacenter: vcsimkit.Datacenter, Volume: volume, Hosts: []string{host}}); err != nil {
		return fmt.Errorf("unmap %s from %s: %w", volume, host, err)
	}
	if err := l.engine().Shrink(ctx, grown, host); err != nil {
		return err
	}
	vm, err := l.findSVM(ctx, grown.SVMName(host))
	l.check(err == nil && !vm, "the SVM of %s is deleted (%v)", host, err)
	_, err = l.api.GetSDS(ctx, deploy.SDSName(host))
	l.check(err != nil, "SDS %s left the cluster (%v)", deploy.SDSName(host), err)
	rest := grown.Without(host)
	l.sdsState(ctx, hostNames(rest))
	if _, err := waitHealthy(ctx, l.api, time.Minute); err != nil {
		return err
	}
	l.fioSoFar("the removal")
	return nil
}

func (l *lifecycle) replace(ctx context.Context, deployed *plan.Plan, failed string, spare plan.Host) error {
	// Not failed yet: refused, nothing changed.
	err := l.engine().Replace(ctx, deployed, failed, spare)
	l.check(err != nil && strings.Contains(err.Error(), "has not failed"), "replacing a host whose SDS is up is refused: %v", err)
	err = l.engine().Replace(ctx, deployed, deployed.Hosts[0].Name, spare)
	l.check(err != nil && strings.Contains(err.Error(), "MDM member"), "replacing an MDM member's host is refused: %v", err)

	// The failure: the SVM's processes die with its host, and vCenter
	// shows the host not responding.
	fh := hostOf(deployed, failed)
	if err := l.killSVM(deployed.SVMName(failed), fh.SVMIP); err != nil {
		return err
	}
	if err := l.kit.FailHost(failed); err != nil {
		return err
	}
	t0 := time.Now()
	if err := poll.Until(ctx, 90*time.Second, 500*time.Millisecond, "the cluster does not see the killed SDS down", func() (bool, string, error) {
		s, err := l.api.GetSDS(ctx, deploy.SDSName(failed))
		if err != nil {
			return false, err.Error(), nil
		}
		return !s.Up, "sds up", nil
	}); err != nil {
		return err
	}
	fmt.Printf("     SDS %s seen down %.1f s after its SVM was killed\n", deploy.SDSName(failed), time.Since(t0).Seconds())
	seq := l.lastSeq()
	if err := l.engine().Replace(ctx, deployed, failed, spare); err != nil {
		return err
	}
	var rebuilt, svm string
	for _, e := range l.log.Since(seq, deploy.ReplaceJob(system, failed)) {
		if strings.Contains(e.Message, "/rebuild: done") {
			rebuilt = e.Message
		}
		if strings.Contains(e.Message, "replace/"+failed+"/svm: done") {
			svm = e.Message
		}
	}
	l.check(rebuilt != "", "the failed SDS was removed and the rebuild awaited: %s", rebuilt)
	fmt.Printf("     old SVM: %s\n", svm)
	after, err := deploy.ReplacePlan(deployed, failed, spare)
	if err != nil {
		return err
	}
	l.sdsState(ctx, hostNames(after))
	if _, err := waitHealthy(ctx, l.api, time.Minute); err != nil {
		return err
	}
	if err := l.ds().Map(ctx, datastore.HostsRequest{Datacenter: vcsimkit.Datacenter, Volume: volume, Hosts: []string{spare.Name}}); err != nil {
		return fmt.Errorf("map %s to %s: %w", volume, spare.Name, err)
	}
	if err := l.mountsDatastore(ctx, []string{spare.Name}); err != nil {
		return err
	}
	l.fioSoFar("the replacement")
	return nil
}

func (l *lifecycle) findSVM(ctx context.Context, name string) (bool, error) {
	f := find.NewFinder(l.vc, true)
	dc, err := f.Datacenter(ctx, vcsimkit.Datacenter)
	if err != nil {
		return false, err
	}
	f.SetDatacenter(dc)
	_, err = f.VirtualMachine(ctx, name)
	if _, nf := err.(*find.NotFoundError); nf {
		return false, nil
	}
	return err == nil, err
}

// killSVM kills every process of a simulated SVM (its network namespace,
// tests/e2e/svm-hook.sh names it <prefix>-<last octet>) without its power
// off hook: the machine is gone as with its host.
func (l *lifecycle) killSVM(vm, ip string) error {
	prefix := os.Getenv("E2E_PREFIX")
	if prefix == "" {
		return fmt.Errorf("E2E_PREFIX is not set: the harness (tests/e2e/run.sh) sets it")
	}
	ns := prefix + "-" + ip[strings.LastIndex(ip, ".")+1:]
	if b, err := os.ReadFile(filepath.Join(l.state, "svm", vm, "machine.pid")); err == nil {
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 1 {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	// Until none is left: a unit supervisor may restart a daemon between
	// one look and the next.
	for i := 0; i < 50; i++ {
		out, err := exec.Command("ip", "netns", "pids", ns).Output()
		if err != nil {
			return fmt.Errorf("list the processes of namespace %s: %w", ns, err)
		}
		pids := strings.Fields(string(out))
		if len(pids) == 0 {
			return nil
		}
		for _, s := range pids {
			if pid, err := strconv.Atoi(s); err == nil && pid > 1 {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("processes of namespace %s survive SIGKILL", ns)
}
