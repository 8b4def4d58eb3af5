package main

// The upgrade phase: the plugin's rolling upgrade (deploy.Upgrade) rolls
// every SVM of the system to a new Cairn version stored on the gateway,
// fault set by fault set, the MDM members last, one at a time. Each SVM's
// updater (cairn-updater.service, run by the harness's systemctl like the
// other units) installs it, restarts the SVM's units one at a time and
// checks them, its SDS in instant maintenance meanwhile. Then a broken
// build rolled to two MDM members: the first one's updater rolls back, and
// the roll stops there, out of maintenance, the second never ordered. fio
// keeps verifying throughout.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cairn-storage/cairn/vcenter-plugin/internal/deploy"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/gateway"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/plan"
)

// bumpPatch returns v with its patch number raised by n.
func bumpPatch(v string, n int) (string, error) {
	f := strings.Split(v, ".")
	if len(f) != 3 {
		return "", fmt.Errorf("version %q is not MAJOR.MINOR.PATCH", v)
	}
	p, err := strconv.Atoi(f[2])
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s.%s.%d", f[0], f[1], p+n), nil
}

func output(dir, name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out)), nil
}

// unitVersions reads, from outside the SVM, the version each running unit's
// main process runs (/proc/<pid>/exe version), for the units the simulated
// systemd supervises in the SVM's state directory.
func (h *harness) unitVersions(svmDir string) map[string]string {
	out := map[string]string{}
	mains, _ := filepath.Glob(filepath.Join(svmDir, "sim", "units", "*.main"))
	for _, m := range mains {
		u := strings.TrimSuffix(filepath.Base(m), ".main")
		st, _ := os.ReadFile(filepath.Join(filepath.Dir(m), u+".state"))
		b, _ := os.ReadFile(m)
		pid := strings.TrimSpace(string(b))
		if strings.TrimSpace(string(st)) != "active" || pid == "" {
			continue
		}
		if _, err := os.Stat("/proc/" + pid); err != nil {
			continue // a oneshot that ran (RemainAfterExit)
		}
		v, err := output("/", "/proc/"+pid+"/exe", "version")
		if err != nil {
			v = "?"
		}
		out[u] = v
	}
	return out
}

func (h *harness) upgrade(ctx context.Context, p *plan.Plan, fio *fioLoop, eng *deploy.Engine) error {
	c, ok := h.api.(*gateway.HTTPClient)
	if !ok {
		return fmt.Errorf("the gateway client is a %T, not the HTTP client", h.api)
	}
	cur, err := output("/", filepath.Join(h.bin, "cairn"), "version")
	if err != nil {
		return err
	}
	next, _ := bumpPatch(cur, 1)
	broken, _ := bumpPatch(cur, 2)

	// The new version: the same source built as release next, by
	// tests/e2e/run.sh's build phase (E2E_UPGRADE_BIN) or here.
	t0 := time.Now()
	dir := filepath.Join(h.state, "upgrade")
	newBin := os.Getenv("E2E_UPGRADE_BIN")
	if newBin == "" {
		newBin = filepath.Join(dir, "bin-"+next)
		if _, err := output(filepath.Dir(h.bin), "go", "build", "-ldflags",
			"-X github.com/cairn-storage/cairn/appliance/internal/buildinfo.override="+next, "-o", newBin+"/", "./cmd/..."); err != nil {
			return err
		}
	}
	if v, err := output("/", filepath.Join(newBin, "cairn"), "version"); err != nil || v != next {
		return fmt.Errorf("%s/cairn is version %q (%v), want %s", newBin, v, err, next)
	}
	// The broken one: a cairn that answers `version` and fails as a daemon.
	brokenBin := filepath.Join(dir, "bin-"+broken)
	os.MkdirAll(brokenBin, 0o755)
	os.WriteFile(filepath.Join(brokenBin, "cairn"), []byte("#!/bin/sh\n[ \"$1\" = version ] && { echo "+broken+"; exit 0; }\necho 'broken build' >&2\nexit 1\n"), 0o755)
	if ctl, err := os.ReadFile(filepath.Join(newBin, "cairnctl")); err == nil {
		os.WriteFile(filepath.Join(brokenBin, "cairnctl"), ctl, 0o755)
	}
	var bundles [][]byte
	for _, b := range []string{newBin, brokenBin} {
		file := b + ".tgz"
		if _, err := output("/", filepath.Join(newBin, "cairn"), "bundle", "--bin", b, "--out", file); err != nil {
			return err
		}
		data, err := os.ReadFile(file)
		if err != nil {
			return err
		}
		bundles = append(bundles, data)
	}
	fmt.Printf("     bundled %s (%d bytes) and a broken %s: %.1f s\n", next, len(bundles[0]), broken, time.Since(t0).Seconds())

	t1 := time.Now()
	for i, v := range []string{next, broken} {
		b, err := c.UploadBundle(ctx, bundles[i])
		if err != nil {
			return fmt.Errorf("upload %s: %w", v, err)
		}
		h.check(b.Version == v && b.Size == int64(len(bundles[i])), "bundle %s uploaded through the gateway: %d bytes, sha256 %.12s…", b.Version, b.Size, b.SHA256)
	}
	fmt.Printf("     uploaded both bundles: %.1f s\n", time.Since(t1).Seconds())
	svms, err := c.ListUpgradeSVMs(ctx)
	if err != nil {
		return err
	}
	onCur := 0
	for _, s := range svms {
		if s.Running == cur && s.State == gateway.UpgradeIdle {
			onCur++
		}
	}
	h.check(onCur == len(p.Hosts), "every SVM's updater reported, idle on %s: %d of %d", cur, onCur, len(p.Hosts))

	// Every SVM to the new version, by the plugin's engine (no hosts: all).
	eng.UpgradeTimeout = 3 * time.Minute
	job := deploy.UpgradeJob(p.System)
	seq := h.lastSeq()
	t2 := time.Now()
	if err := eng.Upgrade(ctx, p, deploy.UpgradeRequest{Version: next}); err != nil {
		return err
	}
	fmt.Printf("     rolled all %d SVMs to %s: %.1f s\n", len(p.Hosts), next, time.Since(t2).Seconds())
	// One SVM at a time, each ordered after the previous one was done, the
	// MDM members after every other SVM.
	type span struct {
		host       string
		mdm        bool
		order, end int64
	}
	var spans []span
	for _, x := range p.Hosts {
		sp := span{host: plan.SVMHostname(x.Name), mdm: x.Has(plan.RoleMDM) || x.Has(plan.RoleTieBreaker), order: -1, end: -1}
		for _, e := range h.log.Since(seq, job) {
			switch {
			case strings.Contains(e.Message, "/"+sp.host+"/order: started"):
				sp.order = e.Seq
			case strings.Contains(e.Message, "/"+sp.host+"/await: done"):
				sp.end = e.Seq
			}
		}
		spans = append(spans, sp)
	}
	slices.SortFunc(spans, func(a, b span) int { return int(a.order - b.order) })
	inOrder, seen := true, []string{}
	for i, sp := range spans {
		inOrder = inOrder && sp.order > 0 && sp.end > sp.order && (i == 0 || sp.order > spans[i-1].end) && (i == 0 || !spans[i-1].mdm || sp.mdm)
		seen = append(seen, sp.host)
	}
	h.check(inOrder, "the roll upgraded one SVM at a time, each ordered after the previous one was done, the MDM members last: %v", seen)
	ups, err := c.ListUpgradeSVMs(ctx)
	if err != nil {
		return err
	}
	done := 0
	for _, s := range ups {
		if s.State == gateway.UpgradeDone && s.Running == next {
			done++
		}
	}
	h.check(done == len(p.Hosts), "%d of %d SVMs updated to %s by their updaters", done, len(p.Hosts), next)
	for _, x := range p.Hosts {
		vs := h.unitVersions(filepath.Join(h.state, "svm", p.SVMName(x.Name)))
		allNext := len(vs) >= 3
		for _, v := range vs {
			allNext = allNext && v == next
		}
		h.check(allNext, "every Cairn daemon of %s runs %s (read from each process's /proc/<pid>/exe): %v", plan.SVMHostname(x.Name), next, vs)
	}
	st, err := deploy.LoadState(eng.StateDir, p)
	h.check(err == nil && st.Change == nil, "the upgrade's change ended in the deploy state (%v)", err)

	// A broken build to two MDM members: the first one's updater rolls
	// back, the roll stops there.
	bad, spared := p.Hosts[0].Name, p.Hosts[1].Name
	badSVM := plan.SVMHostname(bad)
	t3 := time.Now()
	err = eng.Upgrade(ctx, p, deploy.UpgradeRequest{Version: broken, Hosts: []string{bad, spared}})
	fmt.Printf("     rolled to the broken %s: stopped after %.1f s: %v\n", broken, time.Since(t3).Seconds(), err)
	h.check(errors.Is(err, deploy.ErrUpgradeStopped) && err != nil && strings.Contains(err.Error(), "SVM "+badSVM) && strings.Contains(err.Error(), "rolled back to "+next),
		"the roll to the broken %s stopped at %s, rolled back by its updater", broken, badSVM)
	ups, err = c.ListUpgradeSVMs(ctx)
	if err != nil {
		return err
	}
	for _, s := range ups {
		switch s.Name {
		case badSVM:
			h.check(s.State == gateway.UpgradeRolledBack && s.Running == next, "%s: %s, running %s", badSVM, s.State, s.Running)
		case plan.SVMHostname(spared):
			h.check(s.Ordered != broken && s.Running == next, "%s, next in the roll, was never ordered to %s (ordered %q, running %s)", s.Name, broken, s.Ordered, s.Running)
		}
	}
	vs := h.unitVersions(filepath.Join(h.state, "svm", p.SVMName(bad)))
	allNext := len(vs) >= 4
	for _, v := range vs {
		allNext = allNext && v == next
	}
	h.check(allNext, "every Cairn daemon of %s still runs %s: %v", badSVM, next, vs)
	sys, err := waitHealthy(ctx, h.api, 30*time.Second)
	if err != nil {
		return err
	}
	sdss, err := h.api.ListSDS(ctx)
	if err != nil {
		return err
	}
	inMaint := 0
	for _, s := range sdss {
		if s.State != gateway.SDSNormal {
			inMaint++
		}
	}
	h.check(inMaint == 0 && sys.Health.Status == gateway.HealthOK, "after the stopped roll: health %s, %d SDSs in maintenance", sys.Health.Status, inMaint)
	st, err = deploy.LoadState(eng.StateDir, p)
	h.check(err == nil && st.Change == nil, "the stopped roll left no change in progress (%v)", err)
	h.check(fio.failures.Load() == 0, "fio during the upgrade: %d verified passes, %d failures so far", fio.passes.Load(), fio.failures.Load())
	return nil
}
