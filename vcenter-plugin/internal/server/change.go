// Changing a deployed system through the API: expand it with new hosts,
// remove a host, replace a failed one, roll its SVMs to a new Cairn
// version. All are jobs of the deploy engine (deploy/expand.go,
// deploy/upgrade.go), resumable by sending the same request again.

package server

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"

	"github.com/cairn-storage/cairn/vcenter-plugin/internal/deploy"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/maintenance"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/plan"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/statefile"
)

// systemBusy names a running job that changes system (deploy, expand,
// host removal or replacement, rolling maintenance or upgrade), or "".
func (s *Server) systemBusy(system string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	for name, j := range s.jobs {
		if j.State != "running" {
			continue
		}
		if name == deploy.Job(system) || name == deploy.ExpandJob(system) || name == maintenance.Job(system) || name == deploy.UpgradeJob(system) ||
			strings.HasPrefix(name, deploy.ShrinkJob(system, "")) || strings.HasPrefix(name, deploy.ReplaceJob(system, "")) {
			return name
		}
	}
	return ""
}

// changeEngine is the deploy engine of a change: the system's plan file is
// rewritten when the change ends.
func (s *Server) changeEngine(us *userSession) *deploy.Engine {
	return &deploy.Engine{VC: us.client, Gateway: s.cfg.Gateway, StateDir: s.cfg.StateDir, Log: s.cfg.Log,
		ReadyTimeout: s.cfg.ReadyTimeout, PollInterval: s.cfg.PollInterval,
		SavePlan: func(p *plan.Plan) error { return statefile.WriteJSON(s.planPath(p.System), p) }}
}

// expand grows a deployed system: the body is the deployed plan with new
// hosts appended. Edits an expansion cannot make are answered 400 with
// every problem; the job does the rest (the inventory check included).
func (s *Server) expand(w http.ResponseWriter, r *http.Request, us *userSession) {
	system := r.PathValue("system")
	p := s.readPlan(w, r)
	if p == nil {
		return
	}
	if p.System != system {
		writeError(w, http.StatusBadRequest, "the plan is for system %q, the request for %q", p.System, system)
		return
	}
	deployed, err := s.savedPlan(system)
	if err != nil {
		writeError(w, http.StatusNotFound, "%v", err)
		return
	}
	// Adding hosts deploys SVMs and changes the system: as deploying it.
	if err := s.checkPrivilege(r.Context(), us, deployed, PrivAdminister, "expand system "+system); err != nil {
		writeRightsError(w, err)
		return
	}
	st, err := deploy.LoadState(s.cfg.StateDir, deployed)
	if err != nil {
		writeError(w, http.StatusConflict, "%v", err)
		return
	}
	if !st.Completed {
		writeError(w, http.StatusConflict, "system %s is not fully deployed: resume its deployment first, then expand it", system)
		return
	}
	// A plugin stopped after saving the new plan but before ending the
	// change: the saved plan is already the expanded one, and the resume
	// only ends the change.
	resumingSaved := st.Change != nil && st.Change.Kind == deploy.ChangeExpand && deploy.SameHash(st.Change.PlanSHA256, p)
	if !resumingSaved {
		if ps := plan.CheckExpand(deployed, p); ps.Err() != nil {
			writeJSON(w, http.StatusBadRequest, map[string]any{"error": fmt.Sprintf("expansion of system %s refused: %v", system, ps.Err()), "problems": ps})
			return
		}
	}
	if busy := s.systemBusy(system); busy != "" {
		writeError(w, http.StatusConflict, "job %s is running on system %s: wait for it to end, then send the expansion again", busy, system)
		return
	}
	eng := s.changeEngine(us)
	j, err := s.start(deploy.ExpandJob(system), func(ctx context.Context) error {
		if resumingSaved {
			return eng.EndChange(p)
		}
		return eng.Expand(ctx, deployed, p)
	})
	if err != nil {
		writeError(w, http.StatusConflict, "%v", err)
		return
	}
	writeJSON(w, http.StatusAccepted, j)
}

// removeHost removes a host from a deployed system (no body).
func (s *Server) removeHost(w http.ResponseWriter, r *http.Request, us *userSession) {
	system, host := r.PathValue("system"), r.PathValue("host")
	s.hostChange(w, r, us, system, host, hostChangeSpec{kind: deploy.ChangeShrink, job: deploy.ShrinkJob(system, host),
		what: "remove host " + host + " from system " + system, verb: "remove", noun: "removal",
		check: func(p *plan.Plan) error { return deploy.CheckShrink(p, host) },
		run:   func(ctx context.Context, eng *deploy.Engine, p *plan.Plan) error { return eng.Shrink(ctx, p, host) }})
}

// replaceHost replaces a failed host's SVM by one on a new host: the body
// is the new host as in a plan ({"name", "svm_ip", "devices", …}; roles
// and fault set default to the failed host's). What the plan alone
// refuses (an MDM member, the last gateway or target, a host already in
// the system) is answered 409 at once; the job does the rest.
func (s *Server) replaceHost(w http.ResponseWriter, r *http.Request, us *userSession) {
	system, failed := r.PathValue("system"), r.PathValue("host")
	var nh plan.Host
	if !decode(w, r, &nh) {
		return
	}
	s.hostChange(w, r, us, system, failed, hostChangeSpec{kind: deploy.ChangeReplace, job: deploy.ReplaceJob(system, failed),
		what: "replace host " + failed + " of system " + system, verb: "replace", noun: "replacement",
		check: func(p *plan.Plan) error { _, err := deploy.ReplacePlan(p, failed, nh); return err },
		run: func(ctx context.Context, eng *deploy.Engine, p *plan.Plan) error {
			return eng.Replace(ctx, p, failed, nh)
		}})
}

// hostChangeSpec is one kind of change of one host of a deployed system.
type hostChangeSpec struct {
	kind, job  string // deploy.ChangeShrink or ChangeReplace, and the job's name
	what       string // the action, for the rights check's refusal
	verb, noun string // "remove", "removal": for what to do next
	check      func(deployed *plan.Plan) error
	run        func(ctx context.Context, eng *deploy.Engine, deployed *plan.Plan) error
}

// hostChange is what a removal and a replacement share: the user's right on
// the system; a change stopped after saving its new plan but before ending
// (only its end is left); what the plan alone refuses (404 for a host not
// in the system, else 409); a system not fully deployed or busy with another
// job (409); then the job (202).
func (s *Server) hostChange(w http.ResponseWriter, r *http.Request, us *userSession, system, host string, c hostChangeSpec) {
	deployed, err := s.savedPlan(system)
	if err != nil {
		writeError(w, http.StatusNotFound, "%v", err)
		return
	}
	if err := s.checkPrivilege(r.Context(), us, deployed, PrivAdminister, c.what); err != nil {
		writeRightsError(w, err)
		return
	}
	eng := s.changeEngine(us)
	if st, err := deploy.LoadState(s.cfg.StateDir, deployed); err == nil && st.Change != nil && st.Change.Kind == c.kind &&
		st.Change.Host == host && deploy.SameHash(st.Change.PlanSHA256, deployed) {
		j, err := s.start(c.job, func(ctx context.Context) error { return eng.EndChange(deployed) })
		if err != nil {
			writeError(w, http.StatusConflict, "%v", err)
			return
		}
		writeJSON(w, http.StatusAccepted, j)
		return
	}
	if err := c.check(deployed); err != nil {
		status := http.StatusConflict
		if strings.Contains(err.Error(), "is not part of system") {
			status = http.StatusNotFound
		}
		writeError(w, status, "%v", err)
		return
	}
	if st, err := deploy.LoadState(s.cfg.StateDir, deployed); err != nil || !st.Completed {
		if err == nil {
			err = fmt.Errorf("resume its deployment first, then %s a host", c.verb)
		}
		writeError(w, http.StatusConflict, "system %s is not fully deployed: %v", system, err)
		return
	}
	if busy := s.systemBusy(system); busy != "" {
		writeError(w, http.StatusConflict, "job %s is running on system %s: wait for it to end, then send the %s again", busy, system, c.noun)
		return
	}
	j, err := s.start(c.job, func(ctx context.Context) error { return c.run(ctx, eng, deployed) })
	if err != nil {
		writeError(w, http.StatusConflict, "%v", err)
		return
	}
	writeJSON(w, http.StatusAccepted, j)
}

// upgrade rolls a deployed system's SVMs to the version of a bundle
// stored on its gateway: the body is {"version", "hosts"?}. A request the
// plan alone refuses (no version, a host not in the system) is answered
// 400 at once; the job checks the rest before it changes anything (the
// bundle, the updaters, the cluster's health) and resumes an upgrade in
// progress.
func (s *Server) upgrade(w http.ResponseWriter, r *http.Request, us *userSession) {
	system := r.PathValue("system")
	var req deploy.UpgradeRequest
	if !decode(w, r, &req) {
		return
	}
	deployed, err := s.savedPlan(system)
	if err != nil {
		writeError(w, http.StatusNotFound, "%v", err)
		return
	}
	// It restarts every Cairn daemon of the system: as deploying it.
	if err := s.checkPrivilege(r.Context(), us, deployed, PrivAdminister, "upgrade system "+system); err != nil {
		writeRightsError(w, err)
		return
	}
	if req.Version == "" {
		writeError(w, http.StatusBadRequest, `no version: send {"version":"X.Y.Z"}, the version of a bundle stored on the gateway (GET /api/v1/upgrade/bundles there lists them)`)
		return
	}
	if _, err := deploy.UpgradeUnits(deployed, req.Hosts); err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	if st, err := deploy.LoadState(s.cfg.StateDir, deployed); err != nil || !st.Completed {
		if err == nil {
			err = fmt.Errorf("resume its deployment first, then upgrade it")
		}
		writeError(w, http.StatusConflict, "system %s is not fully deployed: %v", system, err)
		return
	}
	if busy := s.systemBusy(system); busy != "" {
		writeError(w, http.StatusConflict, "job %s is running on system %s: wait for it to end, then send the upgrade again", busy, system)
		return
	}
	eng := s.changeEngine(us)
	stop := new(atomic.Bool)
	eng.UpgradeStop = stop.Load
	s.mu.Lock()
	s.upgradeStops[system] = stop
	s.mu.Unlock()
	j, err := s.start(deploy.UpgradeJob(system), func(ctx context.Context) error { return eng.Upgrade(ctx, deployed, req) })
	if err != nil {
		writeError(w, http.StatusConflict, "%v", err)
		return
	}
	writeJSON(w, http.StatusAccepted, j)
}

// upgradeStop flips the running upgrade's stop switch: the roll ends after
// the unit it is on (upgraded, out of maintenance, resynced), never in the
// middle of one, and the job ends "stopped".
func (s *Server) upgradeStop(w http.ResponseWriter, r *http.Request, us *userSession) {
	system := r.PathValue("system")
	deployed, err := s.savedPlan(system)
	if err != nil {
		writeError(w, http.StatusNotFound, "%v", err)
		return
	}
	if err := s.checkPrivilege(r.Context(), us, deployed, PrivAdminister, "stop the upgrade of system "+system); err != nil {
		writeRightsError(w, err)
		return
	}
	s.mu.Lock()
	j, stop := s.jobs[deploy.UpgradeJob(system)], s.upgradeStops[system]
	running := j != nil && j.State == "running" && stop != nil
	if running {
		stop.Store(true)
	}
	s.mu.Unlock()
	if !running {
		writeError(w, http.StatusConflict, "no upgrade is running on system %s: nothing to stop", system)
		return
	}
	writeJSON(w, http.StatusAccepted, map[string]any{"stopping": true,
		"message": "the roll stops once the SVM unit it is on is upgraded, out of maintenance and resynced; send the same upgrade request to go on"})
}
