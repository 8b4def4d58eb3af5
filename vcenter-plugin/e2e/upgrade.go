package main

// The upgrade phase: a new Cairn version delivered through the gateway to
// one SVM, whose updater (cairn-updater.service, run by the harness's
// systemctl like the other units) installs it, restarts the SVM's units
// one at a time and checks them; then a broken build ordered to another
// SVM, rolled back by its updater. fio keeps verifying throughout. The SVM's
// SDS is in instant maintenance while its units restart, as the plugin's
// rolling upgrade will do.

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/cairn-storage/cairn/vcenter-plugin/internal/deploy"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/gateway"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/plan"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/poll"
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

// orderAndWait orders svm to run version with its SDS in instant
// maintenance and waits for the updater's final state; after a done it
// also waits for the restarted updater to report the version it runs.
func (h *harness) orderAndWait(ctx context.Context, c *gateway.HTTPClient, host, svm, version string) (gateway.UpgradeSVM, error) {
	var last gateway.UpgradeSVM
	sds := deploy.SDSName(host)
	if err := c.EnterSDSMaintenance(ctx, sds, gateway.MaintenanceInstant); err != nil {
		return last, err
	}
	t0 := time.Now()
	at, err := c.OrderUpgrade(ctx, svm, version)
	if err != nil {
		return last, err
	}
	err = poll.Until(ctx, 90*time.Second, 500*time.Millisecond, "the updater's log is svm/*/sim/units/cairn-updater.service.log in the state directory", func() (bool, string, error) {
		all, err := c.ListUpgradeSVMs(ctx)
		if err != nil {
			return false, err.Error(), nil
		}
		for _, s := range all {
			if s.Name == svm {
				last = s
			}
		}
		final := last.Final() && last.Updated != at.Updated && last.Ordered == version
		if final && last.State == gateway.UpgradeDone {
			final = last.Running == version // the updater restarted on it
		}
		return final, fmt.Sprintf("%s: %s %s (running %s)", svm, last.State, last.Message, last.Running), nil
	})
	fmt.Printf("     %s ordered to %s: %s after %.1f s: %s\n", svm, version, last.State, time.Since(t0).Seconds(), last.Message)
	if xerr := c.ExitSDSMaintenance(ctx, sds); xerr != nil && err == nil {
		err = xerr
	}
	if err == nil {
		_, err = waitHealthy(ctx, h.api, 60*time.Second)
	}
	return last, err
}

func (h *harness) upgrade(ctx context.Context, p *plan.Plan, fio *fioLoop) error {
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

	// One SVM with every role (MDM, SDS, target, gateway) to the new version.
	good := p.Hosts[2].Name
	goodSVM := plan.SVMHostname(good)
	s, err := h.orderAndWait(ctx, c, good, goodSVM, next)
	if err != nil {
		return err
	}
	h.check(s.State == gateway.UpgradeDone && s.Running == next, "%s updated to %s by its updater: %s", goodSVM, next, s.Message)
	vs := h.unitVersions(filepath.Join(h.state, "svm", p.SVMName(good)))
	allNext := len(vs) >= 5
	for _, v := range vs {
		allNext = allNext && v == next
	}
	h.check(allNext, "every Cairn daemon of %s runs %s (read from each process's /proc/<pid>/exe): %v", goodSVM, next, vs)

	// A broken build to another SVM: its updater rolls back.
	bad := p.Hosts[0].Name
	badSVM := plan.SVMHostname(bad)
	s, err = h.orderAndWait(ctx, c, bad, badSVM, broken)
	if err != nil {
		return err
	}
	h.check(s.State == gateway.UpgradeRolledBack && s.Running == cur && strings.Contains(s.Message, "rolled back to "+cur),
		"the broken %s on %s was rolled back: %s", broken, badSVM, s.Message)
	vs = h.unitVersions(filepath.Join(h.state, "svm", p.SVMName(bad)))
	allCur := len(vs) >= 4
	for _, v := range vs {
		allCur = allCur && v == cur
	}
	h.check(allCur, "every Cairn daemon of %s still runs %s: %v", badSVM, cur, vs)
	h.check(fio.failures.Load() == 0, "fio during the upgrade: %d verified passes, %d failures so far", fio.passes.Load(), fio.failures.Load())
	return nil
}
