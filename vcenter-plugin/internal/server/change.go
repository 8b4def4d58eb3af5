// Changing a deployed system through the API: expand it with new hosts,
// remove a host, replace a failed one. All are jobs of the deploy engine (deploy/expand.go),
// resumable by sending the same request again.

package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/cairn-storage/cairn/vcenter-plugin/internal/deploy"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/maintenance"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/plan"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/statefile"
)

// systemBusy names a running job that changes system (deploy, expand,
// host removal or replacement, rolling maintenance), or "".
func (s *Server) systemBusy(system string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	for name, j := range s.jobs {
		if j.State != "running" {
			continue
		}
		if name == deploy.Job(system) || name == deploy.ExpandJob(system) || name == maintenance.Job(system) ||
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
	deployed, err := s.savedPlan(system)
	if err != nil {
		writeError(w, http.StatusNotFound, "%v", err)
		return
	}
	if err := s.checkPrivilege(r.Context(), us, deployed, PrivAdminister, "remove host "+host+" from system "+system); err != nil {
		writeRightsError(w, err)
		return
	}
	eng := s.changeEngine(us)
	// The plugin stopped after saving the plan without the host but before
	// ending the change: only the end is left.
	if st, err := deploy.LoadState(s.cfg.StateDir, deployed); err == nil && st.Change != nil && st.Change.Kind == deploy.ChangeShrink &&
		st.Change.Host == host && deploy.SameHash(st.Change.PlanSHA256, deployed) {
		j, err := s.start(deploy.ShrinkJob(system, host), func(ctx context.Context) error { return eng.EndChange(deployed) })
		if err != nil {
			writeError(w, http.StatusConflict, "%v", err)
			return
		}
		writeJSON(w, http.StatusAccepted, j)
		return
	}
	if err := deploy.CheckShrink(deployed, host); err != nil {
		status := http.StatusConflict
		if strings.Contains(err.Error(), "is not part of system") {
			status = http.StatusNotFound
		}
		writeError(w, status, "%v", err)
		return
	}
	if st, err := deploy.LoadState(s.cfg.StateDir, deployed); err != nil || !st.Completed {
		if err == nil {
			err = errors.New("resume its deployment first, then remove a host")
		}
		writeError(w, http.StatusConflict, "system %s is not fully deployed: %v", system, err)
		return
	}
	if busy := s.systemBusy(system); busy != "" {
		writeError(w, http.StatusConflict, "job %s is running on system %s: wait for it to end, then send the removal again", busy, system)
		return
	}
	j, err := s.start(deploy.ShrinkJob(system, host), func(ctx context.Context) error { return eng.Shrink(ctx, deployed, host) })
	if err != nil {
		writeError(w, http.StatusConflict, "%v", err)
		return
	}
	writeJSON(w, http.StatusAccepted, j)
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
	deployed, err := s.savedPlan(system)
	if err != nil {
		writeError(w, http.StatusNotFound, "%v", err)
		return
	}
	if err := s.checkPrivilege(r.Context(), us, deployed, PrivAdminister, "replace host "+failed+" of system "+system); err != nil {
		writeRightsError(w, err)
		return
	}
	eng := s.changeEngine(us)
	// The plugin stopped after saving the plan with the new host but
	// before ending the change: only the end is left.
	if st, err := deploy.LoadState(s.cfg.StateDir, deployed); err == nil && st.Change != nil && st.Change.Kind == deploy.ChangeReplace &&
		st.Change.Host == failed && deploy.SameHash(st.Change.PlanSHA256, deployed) {
		j, err := s.start(deploy.ReplaceJob(system, failed), func(ctx context.Context) error { return eng.EndChange(deployed) })
		if err != nil {
			writeError(w, http.StatusConflict, "%v", err)
			return
		}
		writeJSON(w, http.StatusAccepted, j)
		return
	}
	if _, err := deploy.ReplacePlan(deployed, failed, nh); err != nil {
		status := http.StatusConflict
		if strings.Contains(err.Error(), "is not part of system") {
			status = http.StatusNotFound
		}
		writeError(w, status, "%v", err)
		return
	}
	if st, err := deploy.LoadState(s.cfg.StateDir, deployed); err != nil || !st.Completed {
		if err == nil {
			err = errors.New("resume its deployment first, then replace a host")
		}
		writeError(w, http.StatusConflict, "system %s is not fully deployed: %v", system, err)
		return
	}
	if busy := s.systemBusy(system); busy != "" {
		writeError(w, http.StatusConflict, "job %s is running on system %s: wait for it to end, then send the replacement again", busy, system)
		return
	}
	j, err := s.start(deploy.ReplaceJob(system, failed), func(ctx context.Context) error { return eng.Replace(ctx, deployed, failed, nh) })
	if err != nil {
		writeError(w, http.StatusConflict, "%v", err)
		return
	}
	writeJSON(w, http.StatusAccepted, j)
}
