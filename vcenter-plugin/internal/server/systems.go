package server

import (
	"context"
	"errors"
	"net/http"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/cairn-storage/cairn/vcenter-plugin/internal/deploy"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/gateway"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/maintenance"
)

// SystemView is one system in GET /api/v1/systems: what the plugin knows
// of its deployment, and, once deployed, what its gateway reports. A part
// the gateway could not give is absent and Unavailable says why; the UI
// shows that instead of inventing figures.
type SystemView struct {
	Name       string   `json:"name"`
	Datacenter string   `json:"datacenter"`
	Pool       string   `json:"pool"`
	Hosts      []string `json:"hosts"`
	Deploy     struct {
		Completed bool   `json:"completed"`
		StepsDone int    `json:"steps_done"`
		LastError string `json:"last_error,omitempty"`
	} `json:"deploy"`
	Health *gateway.System `json:"health,omitempty"`
	// Rebuild is Health's copy work with the ETA this server observed (as
	// GET .../rebuild answers it), from the same gateway answer as Health:
	// a screen that shows both never shows a healthy system beside
	// degraded groups, or the other way round.
	Rebuild     *RebuildProgress `json:"rebuild,omitempty"`
	SDSs        []gateway.SDS    `json:"sdss,omitempty"`
	Devices     []gateway.Device `json:"devices,omitempty"`
	Volumes     []gateway.Volume `json:"volumes,omitempty"`
	Unavailable string           `json:"unavailable,omitempty"`
	// NeedsPrivilege is set when the user may not read the system: the
	// privilege (Cairn.Monitor) and the object it is needed on.
	NeedsPrivilege *NeededPrivilege `json:"needs_privilege,omitempty"`
	// Maintenance is the system's last rolling maintenance (nil if none):
	// stopped, the unit a resume starts with, units left unpatched.
	Maintenance *maintenance.State `json:"maintenance,omitempty"`
}

// NeededPrivilege is what a refused user needs, and where.
type NeededPrivilege struct {
	Privilege string `json:"privilege"`
	Object    string `json:"object"`
}

// systems lists the systems this plugin deployed (or is deploying). The
// gateway of a system is read for users with Cairn.Monitor on its
// clusters, as its monitor service user naming them (rights.go).
func (s *Server) systems(w http.ResponseWriter, r *http.Request, us *userSession) {
	names, _ := filepath.Glob(filepath.Join(s.cfg.StateDir, "plan-*.json"))
	sort.Strings(names)
	out := []SystemView{}
	for _, n := range names {
		system := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(n), "plan-"), ".json")
		p, err := s.savedPlan(system)
		if err != nil {
			continue
		}
		v := SystemView{Name: p.System, Datacenter: p.Datacenter, Pool: p.StoragePool.Name}
		for _, h := range p.Hosts {
			v.Hosts = append(v.Hosts, h.Name)
		}
		if st, err := deploy.LoadState(s.cfg.StateDir, p); err == nil {
			v.Deploy.Completed, v.Deploy.LastError = st.Completed, st.LastError
			for _, step := range st.Steps {
				if step.Done {
					v.Deploy.StepsDone++
				}
			}
		}
		v.Maintenance, _ = maintenance.LoadState(s.cfg.StateDir, p.System)
		if !v.Deploy.Completed {
			v.Unavailable = "the deployment has not finished: finish or resume it in the deployment wizard"
			out = append(out, v)
			continue
		}
		s.readGateway(r.Context(), us, &v)
		out = append(out, v)
	}
	writeJSON(w, http.StatusOK, out)
}

// readGateway fills v from the system's gateway, bounded in time.
func (s *Server) readGateway(ctx context.Context, us *userSession, v *SystemView) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	api, _, err := s.systemFor(ctx, us, v.Name, PrivMonitor, "see system "+v.Name)
	var f *Forbidden
	if errors.As(err, &f) {
		v.Unavailable = f.Error()
		v.NeedsPrivilege = &NeededPrivilege{Privilege: f.Privilege, Object: f.Object}
		return
	}
	if err == nil {
		v.Health, err = api.System(ctx)
	}
	if err == nil {
		rb := s.progress.observe(v.Name, v.Health.Rebuild)
		v.Rebuild = &rb
	}
	if err == nil {
		v.SDSs, err = api.ListSDS(ctx)
	}
	if err == nil {
		v.Devices, err = api.ListDevices(ctx)
	}
	if err == nil {
		v.Volumes, err = api.ListVolumes(ctx)
	}
	if err != nil {
		v.Unavailable = "the system's gateway did not answer (" + err.Error() + "): check that the gateway SVM is powered on and reachable from the plugin server"
	}
}
