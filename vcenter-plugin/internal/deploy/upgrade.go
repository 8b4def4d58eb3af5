// The rolling upgrade: Upgrade rolls a deployed system's SVMs to a Cairn
// version stored on the gateway (docs/architecture.md, "Upgrade"), one
// unit at a time. A unit is a fault set's SVMs (an SVM alone when its host
// has no fault set); the SVMs of MDM members come last, one per unit, so
// the MDM keeps its quorum. For each unit: its SDSs enter instant
// maintenance, each of its SVMs is ordered to the version (POST
// /upgrade/svms/{name}) and awaited until its updater reports done on it,
// the SDSs leave maintenance, and the cluster's resync is awaited before
// the next unit. An updater that fails or rolls back stops the roll: the
// unit leaves maintenance, the resync is awaited, the change ends, and the
// error names the SVM, its updater's message and what to do.
//
// Step keys (stored; never renamed), <v> the version, <unit> the unit's
// SVM names joined by ",": upgrade/<v>/<unit>/{maintenance,exit,resync},
// upgrade/<v>/<svm>/{order,await}; the order's detail is the updater's
// Updated stamp the order answered (an order is carried out when a final
// state carries another stamp). All upgrade/ keys are deleted when the
// change ends. State.Change holds the version and the hosts asked for: a
// restarted plugin resumes with the same request, and an SVM that already
// runs the version is skipped (a unit whose SVMs all do is not entered).

package deploy

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cairn-storage/cairn/vcenter-plugin/internal/gateway"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/plan"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/poll"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/progress"
)

// ChangeUpgrade is the change kind of a rolling upgrade.
const ChangeUpgrade = "upgrade"

// UpgradeJob is the progress job name of the rolling upgrade of a system.
func UpgradeJob(system string) string { return "upgrade:" + system }

// UpgradeRequest is what to roll (JSON of the plugin's REST API).
type UpgradeRequest struct {
	Version string `json:"version"` // a stored bundle's, MAJOR.MINOR.PATCH
	// Hosts whose SVMs to upgrade; default every host with an SVM. The
	// roll's order does not depend on theirs (UpgradeUnits).
	Hosts []string `json:"hosts,omitempty"`
}

// ErrUpgradeStopped marks a roll an updater stopped (failed or rolled
// back): the system is out of maintenance and no change is in progress.
var ErrUpgradeStopped = errors.New("rolling upgrade stopped")

// ErrUpgradeStoppedByOperator marks a roll the operator stopped
// (Engine.UpgradeStop): it ended after a unit that was done and whole, no
// SDS in maintenance, no change in progress; the same request resumes it
// (the SVMs on the version are skipped).
var ErrUpgradeStoppedByOperator = errors.New("rolling upgrade stopped by the operator")

// UpgradeUnits groups the hosts (default: every host with an SVM) into the
// roll's units, in order: the fault sets of the hosts without an MDM
// member, in plan order (a host without a fault set alone), then each MDM
// member's (or tie-breaker's) host alone.
func UpgradeUnits(p *plan.Plan, hosts []string) ([][]string, error) {
	want := map[string]bool{}
	for _, h := range hosts {
		i := slices.IndexFunc(p.Hosts, func(x plan.Host) bool { return x.Name == h })
		if i < 0 {
			return nil, fmt.Errorf("host %s is not part of system %s", h, p.System)
		}
		if !p.Hosts[i].HasSVM() {
			return nil, fmt.Errorf("host %s has no SVM of system %s to upgrade", h, p.System)
		}
		want[h] = true
	}
	var units, mdms [][]string
	byFaultSet := map[string]int{}
	for _, h := range p.Hosts {
		if !h.HasSVM() || (len(want) > 0 && !want[h.Name]) {
			continue
		}
		switch {
		case h.Has(plan.RoleMDM) || h.Has(plan.RoleTieBreaker):
			mdms = append(mdms, []string{h.Name})
		case h.FaultSet == "":
			units = append(units, []string{h.Name})
		default:
			if i, ok := byFaultSet[h.FaultSet]; ok {
				units[i] = append(units[i], h.Name)
				continue
			}
			byFaultSet[h.FaultSet] = len(units)
			units = append(units, []string{h.Name})
		}
	}
	if len(units)+len(mdms) == 0 {
		return nil, fmt.Errorf("system %s has no SVM to upgrade", p.System)
	}
	return append(units, mdms...), nil
}

// Upgrade rolls the SVMs of the deployed system (plan deployed) to
// req.Version, unit by unit (UpgradeUnits). Before it changes anything it
// refuses a version no bundle is stored for, an SVM whose updater has not
// reported or is busy, and a cluster that is not whole. Sent again after a
// failure (or a plugin restart), it resumes; a roll an updater stopped
// returns ErrUpgradeStopped (wrapped) and leaves no change in progress.
func (e *Engine) Upgrade(ctx context.Context, deployed *plan.Plan, req UpgradeRequest) (err error) {
	if e.StateDir == "" {
		return errors.New("upgrade: no state directory configured")
	}
	if req.Version == "" {
		return errors.New(`upgrade: no version: give the version of a stored bundle ({"version":"X.Y.Z"}; GET /api/v1/upgrade/bundles on the gateway lists them)`)
	}
	units, err := UpgradeUnits(deployed, req.Hosts)
	if err != nil {
		return err
	}
	r := e.newRun(deployed, UpgradeJob(deployed.System))
	r.upgrade = req
	resuming, err := e.loadChange(r, deployed, deployed, ChangeUpgrade)
	if err != nil {
		return err
	}
	if c := r.st.Change; resuming && (c.Version != req.Version || !slices.Equal(c.Hosts, req.Hosts)) {
		return fmt.Errorf("system %s has an upgrade to %s of hosts %v in progress (since %s): send that request again to finish it (it resumes), then this one",
			deployed.System, c.Version, c.Hosts, c.Started.Format(time.RFC3339))
	}
	if err := r.locate(ctx); err != nil {
		return err
	}
	if err := r.connectGateway(ctx); err != nil {
		return err
	}
	if !resuming {
		todo, err := r.upgradePreflight(ctx, req.Version, units)
		if err != nil {
			return err
		}
		if todo == 0 {
			r.info("upgrade", "", "every SVM to upgrade of system %s already runs %s", deployed.System, req.Version)
			return nil
		}
	}
	if err := r.beginChange(deployed, ChangeUpgrade, "", resuming); err != nil {
		return err
	}
	defer func() { err = r.finish("upgrade", err) }()
	vc := progress.VCenter{C: e.VC}
	if t, terr := vc.StartTask(ctx, r.hosts[units[0][0]].Reference(), progress.TaskDeploy); terr == nil {
		defer func() { progress.EndTask(context.WithoutCancel(ctx), t, err) }()
	}
	for i, unit := range units {
		if i > 0 && e.UpgradeStop != nil && e.UpgradeStop() {
			// Between units: the last one is upgraded, out of maintenance
			// and resynced, so stopping here leaves nothing half done.
			if eerr := r.endChange(deployed, ""); eerr != nil {
				return eerr
			}
			r.info("upgrade", "", "stopped by the operator after %d of %d units; %s still to do", i, len(units), strings.Join(r.svmNames(slices.Concat(units[i:]...)), ", "))
			return fmt.Errorf("%w after %d of %d SVM units (no SDS in maintenance): send the same upgrade request to go on with %s",
				ErrUpgradeStoppedByOperator, i, len(units), strings.Join(r.svmNames(slices.Concat(units[i:]...)), ", "))
		}
		r.info("upgrade", "", "unit %d of %d: %s", i+1, len(units), strings.Join(r.svmNames(unit), ", "))
		if err := r.upgradeUnit(ctx, req.Version, unit); err != nil {
			if errors.Is(err, ErrUpgradeStopped) {
				// Nothing is half done: the unit is back and whole.
				if eerr := r.endChange(deployed, ""); eerr != nil {
					return errors.Join(err, eerr)
				}
			}
			return err
		}
	}
	if err := r.endChange(deployed, ""); err != nil {
		return err
	}
	_ = vc.Event(ctx, r.hosts[units[0][0]].Reference(), fmt.Sprintf("system %s: %d SVM unit(s) upgraded to %s", deployed.System, len(units), req.Version))
	return nil
}

func (r *run) svmNames(unit []string) []string {
	var out []string
	for _, h := range unit {
		out = append(out, plan.SVMHostname(h))
	}
	return out
}

func (r *run) sdsNames(unit []string) []string {
	var out []string
	for _, h := range unit {
		if i := slices.IndexFunc(r.p.Hosts, func(x plan.Host) bool { return x.Name == h }); i >= 0 && r.p.Hosts[i].Has(plan.RoleSDS) {
			out = append(out, SDSName(h))
		}
	}
	return out
}

func upgrading(s gateway.UpgradeSVM) bool {
	return s.State == gateway.UpgradeDownloading || s.State == gateway.UpgradeInstalling
}

// updaters reads every SVM's updater, by name.
func (r *run) updaters(ctx context.Context) (map[string]gateway.UpgradeSVM, error) {
	all, err := r.api.ListUpgradeSVMs(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]gateway.UpgradeSVM{}
	for _, s := range all {
		out[s.Name] = s
	}
	return out, nil
}

// upgradePreflight refuses a roll that cannot start; todo counts the SVMs
// that do not run version yet.
func (r *run) upgradePreflight(ctx context.Context, version string, units [][]string) (todo int, err error) {
	bundles, err := r.api.ListBundles(ctx)
	if err != nil {
		return 0, fmt.Errorf("read the gateway's stored bundles: %w", err)
	}
	if !slices.ContainsFunc(bundles, func(b gateway.Bundle) bool { return b.Version == version }) {
		var have []string
		for _, b := range bundles {
			have = append(have, b.Version)
		}
		return 0, fmt.Errorf("no bundle of version %s is stored on system %s (stored: %v): upload it first (cairnctl upgrade upload FILE), then send the upgrade again", version, r.p.System, have)
	}
	ups, err := r.updaters(ctx)
	if err != nil {
		return 0, fmt.Errorf("read the SVMs' updaters: %w", err)
	}
	for _, unit := range units {
		for _, svm := range r.svmNames(unit) {
			s, ok := ups[svm]
			switch {
			case !ok || s.Running == "":
				return 0, fmt.Errorf("the updater of SVM %s has not reported to the gateway: check that cairn-updater.service runs there (cairnctl upgrade ls lists those that reported), then send the upgrade again", svm)
			case upgrading(s):
				return 0, fmt.Errorf("SVM %s is %s %s: wait until its updater is done (cairnctl upgrade ls), then send the upgrade again", svm, s.State, s.Ordered)
			case s.Running != version:
				todo++
			}
		}
	}
	if ok, why, err := gateway.Whole(ctx, r.api); err != nil {
		return 0, fmt.Errorf("read the cluster's health: %w", err)
	} else if !ok {
		return 0, fmt.Errorf("system %s is not whole (%s): an upgrade takes one fault set's SDSs away at a time, so wait until the cluster is healthy with nothing rebuilding or resyncing (cairnctl system info), then send the upgrade again", r.p.System, why)
	}
	return todo, nil
}

// upgradeUnit runs the steps of one unit. A unit none of whose steps ran
// and whose SVMs all run version already is skipped whole.
func (r *run) upgradeUnit(ctx context.Context, version string, unit []string) error {
	svms, sdss := r.svmNames(unit), r.sdsNames(unit)
	base := "upgrade/" + version + "/" + strings.Join(svms, ",")
	r.mu.Lock()
	started := r.st.Steps[base+"/maintenance"].Done
	r.mu.Unlock()
	if !started {
		ups, err := r.updaters(ctx)
		if err != nil {
			return fmt.Errorf("read the SVMs' updaters: %w", err)
		}
		if !slices.ContainsFunc(svms, func(n string) bool { return ups[n].Running != version || upgrading(ups[n]) }) {
			r.info("upgrade", unit[0], "%s already run %s: skipped", strings.Join(svms, ", "), version)
			return nil
		}
	}
	steps := []step{{key: base + "/maintenance", event: "maintenance", host: unit[0], do: func(ctx context.Context) (string, error) {
		if len(sdss) == 0 {
			return "no SDS", nil
		}
		if err := gateway.EnterMaintenance(ctx, r.api, sdss, gateway.MaintenanceInstant, r.ReadyTimeout, r.PollInterval); err != nil {
			return "", err
		}
		return "instant maintenance: " + strings.Join(sdss, ", "), nil
	}}}
	for i, svm := range svms {
		orderKey := "upgrade/" + version + "/" + svm + "/order"
		steps = append(steps,
			step{key: orderKey, event: "upgrade", host: unit[i], do: func(ctx context.Context) (string, error) { return r.orderUpgrade(ctx, svm, version) }},
			step{key: "upgrade/" + version + "/" + svm + "/await", event: "upgrade", host: unit[i], do: func(ctx context.Context) (string, error) {
				r.mu.Lock()
				at := r.st.Steps[orderKey].Detail
				r.mu.Unlock()
				return r.awaitUpgrade(ctx, unit[i], svm, version, at)
			}})
	}
	steps = append(steps,
		step{key: base + "/exit", event: "maintenance", host: unit[0], do: func(ctx context.Context) (string, error) { return r.exitMaintenance(ctx, sdss) }},
		step{key: base + "/resync", event: "resync", host: unit[0], do: r.awaitWhole})
	err := r.runSteps(ctx, steps)
	if errors.Is(err, ErrUpgradeStopped) {
		// The updater put the SVM back on its old version: bring the unit
		// back and whole before the change ends.
		if _, xerr := r.exitMaintenance(ctx, sdss); xerr != nil {
			return errors.Join(err, fmt.Errorf("and its SDSs did not leave maintenance: %w (take them out: cairnctl sds maintenance exit NAME)", xerr))
		}
		if _, werr := r.awaitWhole(ctx); werr != nil {
			return errors.Join(err, werr)
		}
	}
	return err
}

// Order stamps (the order step's detail) that are not the updater's.
const (
	orderAlreadyRunning = "already-running" // the SVM ran the version: nothing ordered
	orderInProgress     = "in-progress"     // an earlier run's order was being carried out
)

// orderUpgrade orders svm to version unless it runs it or is carrying out
// that order (a run stopped between its order and saving the step); the
// detail is what the await step compares the updater's stamp with.
func (r *run) orderUpgrade(ctx context.Context, svm, version string) (string, error) {
	ups, err := r.updaters(ctx)
	if err != nil {
		return "", fmt.Errorf("read the SVMs' updaters: %w", err)
	}
	s := ups[svm]
	switch {
	case upgrading(s) && s.Ordered == version:
		return orderInProgress, nil
	case !upgrading(s) && s.Running == version:
		return orderAlreadyRunning, nil
	}
	at, err := r.api.OrderUpgrade(ctx, svm, version)
	if err != nil {
		return "", fmt.Errorf("order SVM %s to %s: %w", svm, version, err)
	}
	return at.Updated, nil
}

// awaitUpgrade waits (at most UpgradeTimeout) until svm's updater has
// carried the order out. Done counts once the restarted updater reports
// the version it runs; failed or rolled-back stops the roll. A gateway
// that does not answer is waited for: the SVM's own gateway restarts.
func (r *run) awaitUpgrade(ctx context.Context, host, svm, version, at string) (string, error) {
	start := time.Now()
	var last gateway.UpgradeSVM
	lastState := ""
	err := poll.Until(ctx, r.UpgradeTimeout, r.PollInterval,
		"its updater's log tells why (journalctl -u cairn-updater on the SVM; cairnctl upgrade ls); its SDS stays in maintenance: send the upgrade again to wait on, or take the SDS out of maintenance", func() (bool, string, error) {
			ups, err := r.updaters(ctx)
			if err != nil {
				return false, fmt.Sprintf("the gateway does not answer (%v)", err), nil
			}
			s, ok := ups[svm]
			if !ok {
				return false, "SVM " + svm + "'s updater is not listed", nil
			}
			last = s
			if s.State != lastState {
				lastState = s.State
				r.info("upgrade", host, "%s: %s %s (running %s) %s", svm, s.State, s.Ordered, s.Running, s.Message)
			}
			if at == orderAlreadyRunning {
				return s.Running == version && !upgrading(s), fmt.Sprintf("SVM %s is %s (running %s)", svm, s.State, s.Running), nil
			}
			final := s.Final() && s.Ordered == version && (at == orderInProgress || s.Updated != at)
			if final && s.State == gateway.UpgradeDone {
				final = s.Running == version // the restarted updater reports it
			}
			return final, fmt.Sprintf("SVM %s is %s %s (running %s)", svm, s.State, s.Ordered, s.Running), nil
		})
	if err != nil {
		return "", fmt.Errorf("SVM %s did not finish its upgrade to %s: %w", svm, version, err)
	}
	if last.State == gateway.UpgradeFailed || last.State == gateway.UpgradeRolledBack {
		return "", fmt.Errorf("%w at SVM %s: its updater reports %s (running %s): %s — the roll takes its SDSs out of maintenance and stops; the SVMs it upgraded before this one stay on %s. Fix the bundle (or the SVM: journalctl -u cairn-updater there), then send the upgrade again: SVMs on %s are skipped",
			ErrUpgradeStopped, svm, last.State, last.Running, last.Message, version, version)
	}
	if h, ok := r.hosts[host]; ok {
		_ = progress.VCenter{C: r.VC}.Event(ctx, h.Reference(), fmt.Sprintf("system %s: SVM %s upgraded to %s", r.p.System, svm, version))
	}
	return fmt.Sprintf("running %s after %s", version, time.Since(start).Round(time.Second)), nil
}

// exitMaintenance takes the SDSs out of maintenance, retrying while the
// gateway does not answer (one that just restarted on the new version).
func (r *run) exitMaintenance(ctx context.Context, sdss []string) (string, error) {
	if len(sdss) == 0 {
		return "no SDS", nil
	}
	var last error
	err := poll.Until(ctx, r.ReadyTimeout, r.PollInterval, "take them out by hand (cairnctl sds maintenance exit NAME), then send the upgrade again", func() (bool, string, error) {
		last = gateway.ExitMaintenance(ctx, r.api, sdss)
		if last != nil {
			return false, fmt.Sprintf("sds %s not out of maintenance (%v)", strings.Join(sdss, ", "), last), nil
		}
		return true, "", nil
	})
	if err != nil {
		return "", err
	}
	return "out of maintenance: " + strings.Join(sdss, ", "), nil
}

// awaitWhole waits (at most DataTimeout) until the cluster is whole again
// (gateway.Whole): the next unit's SDSs may then go.
func (r *run) awaitWhole(ctx context.Context) (string, error) {
	start := time.Now()
	err := poll.Until(ctx, r.DataTimeout, r.PollInterval, "the resync goes on in the cluster by itself (cairnctl system info shows it); send the upgrade again to wait for its end", func() (bool, string, error) {
		ok, why, err := gateway.Whole(ctx, r.api)
		if err != nil {
			return false, fmt.Sprintf("the gateway does not answer (%v)", err), nil
		}
		return ok, why, nil
	})
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("whole after %s", time.Since(start).Round(time.Second)), nil
}
