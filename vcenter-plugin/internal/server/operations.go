// The API's work: inventory and plans (suggest, validate), and the jobs
// that change things: deploy a plan, a volume to a datastore, rolling
// maintenance of a deployed system.

package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"

	"github.com/cairn-storage/cairn/vcenter-plugin/internal/datastore"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/deploy"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/gateway"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/inventory"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/maintenance"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/plan"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/statefile"
)

func (s *Server) inventory(w http.ResponseWriter, r *http.Request, us *userSession) {
	inv, err := inventory.Collect(r.Context(), us.client)
	if err != nil {
		writeError(w, http.StatusBadGateway, "%v", err)
		return
	}
	writeJSON(w, http.StatusOK, inv)
}

func (s *Server) suggest(w http.ResponseWriter, r *http.Request, us *userSession) {
	var req struct {
		Datacenter string `json:"datacenter"`
		System     string `json:"system"`
		Template   string `json:"template"`
		SVMCIDR    string `json:"svm_cidr"`
		ISCSICIDR  string `json:"iscsi_cidr"`
	}
	if !decode(w, r, &req) {
		return
	}
	inv, err := inventory.Collect(r.Context(), us.client)
	if err != nil {
		writeError(w, http.StatusBadGateway, "%v", err)
		return
	}
	p, err := plan.Suggest(inv, req.Datacenter, req.System, req.Template, req.SVMCIDR, req.ISCSICIDR)
	if err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	writeJSON(w, http.StatusOK, p)
}

func (s *Server) readPlan(w http.ResponseWriter, r *http.Request) *plan.Plan {
	p, err := plan.Parse(http.MaxBytesReader(w, r.Body, plan.MaxSize))
	if err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return nil
	}
	return p
}

func (s *Server) validate(w http.ResponseWriter, r *http.Request, us *userSession) {
	p := s.readPlan(w, r)
	if p == nil {
		return
	}
	inv, err := inventory.Collect(r.Context(), us.client)
	if err != nil {
		writeError(w, http.StatusBadGateway, "%v", err)
		return
	}
	ps := plan.Validate(p, inv)
	if ps == nil {
		ps = plan.Problems{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"valid": ps.Err() == nil, "problems": ps})
}
func (s *Server) planPath(system string) string {
	return filepath.Join(s.cfg.StateDir, "plan-"+system+".json")
}

func (s *Server) savedPlan(system string) (*plan.Plan, error) {
	f, err := os.Open(s.planPath(system))
	if err != nil {
		return nil, fmt.Errorf("no deployment of system %q known to this plugin: deploy it first", system)
	}
	defer f.Close()
	return plan.Parse(f)
}

func (s *Server) deploy(w http.ResponseWriter, r *http.Request, us *userSession) {
	p := s.readPlan(w, r)
	if p == nil {
		return
	}
	// Deploying creates the system's gateway admin: Cairn.Administer on
	// the clusters of the plan's hosts (vCenter checks the VM work itself).
	if err := s.checkPrivilege(r.Context(), us, p, PrivAdminister, "deploy system "+p.System); err != nil {
		writeRightsError(w, err)
		return
	}
	if old, err := s.savedPlan(p.System); err == nil {
		// A deployed system's plan is changed by an expansion or a host
		// removal, never overwritten here (its state would no longer load).
		if st, err := deploy.LoadState(s.cfg.StateDir, old); err == nil && (st.Completed || st.Change != nil) && !deploy.SameHash(st.PlanSHA256, p) {
			writeError(w, http.StatusConflict, "system %s is deployed with another plan: add hosts with POST /api/v1/systems/%s/expand, remove one with POST /api/v1/systems/%s/hosts/{host}/remove", p.System, p.System, p.System)
			return
		}
	}
	if err := statefile.WriteJSON(s.planPath(p.System), p); err != nil {
		writeError(w, http.StatusInternalServerError, "save plan: %v", err)
		return
	}
	eng := &deploy.Engine{VC: us.client, Gateway: s.cfg.Gateway, StateDir: s.cfg.StateDir, Log: s.cfg.Log,
		ReadyTimeout: s.cfg.ReadyTimeout, PollInterval: s.cfg.PollInterval}
	j, err := s.start(deploy.Job(p.System), func(ctx context.Context) error { return eng.Deploy(ctx, p) })
	if err != nil {
		writeError(w, http.StatusConflict, "%v", err)
		return
	}
	writeJSON(w, http.StatusAccepted, j)
}

func (s *Server) volume(w http.ResponseWriter, r *http.Request, us *userSession) {
	var req struct {
		System string `json:"system"`
		datastore.Request
	}
	if !decode(w, r, &req) {
		return
	}
	api, p, err := s.systemFor(r.Context(), us, req.System, PrivOperate, "create volumes on system "+req.System)
	if err != nil {
		writeRightsError(w, err)
		return
	}
	if req.Datacenter == "" {
		req.Datacenter = p.Datacenter
	}
	if req.Pool == "" {
		req.Pool = p.StoragePool.Name
	}
	if len(req.Hosts) == 0 {
		for _, h := range p.Hosts {
			req.Hosts = append(req.Hosts, h.Name)
		}
	}
	eng := &datastore.Engine{VC: us.client, API: api, Log: s.cfg.Log, PollInterval: s.cfg.PollInterval}
	j, err := s.start(datastore.Job(req.Volume), func(ctx context.Context) error {
		_, err := eng.Create(ctx, req.Request)
		return err
	})
	if err != nil {
		writeError(w, http.StatusConflict, "%v", err)
		return
	}
	writeJSON(w, http.StatusAccepted, j)
}

func (s *Server) maintenance(w http.ResponseWriter, r *http.Request, us *userSession) {
	system := r.PathValue("system")
	var req maintenance.Request
	if !decode(w, r, &req) {
		return
	}
	if len(req.Hook) > 0 {
		// A hook runs a command on the plugin's machine: only the
		// operator who starts the plugin may configure it (flag), not an API caller.
		writeError(w, http.StatusBadRequest, "patch hooks are configured on the plugin server, not through the API")
		return
	}
	api, p, err := s.systemFor(r.Context(), us, system, PrivOperate, "run maintenance on system "+system)
	if err != nil {
		writeRightsError(w, err)
		return
	}
	req.Hook = s.cfg.PatchHook
	run := func(ctx context.Context) error { return s.maint.RunWith(ctx, us.client, api, p, req) }
	j, err := s.start(maintenance.Job(system), run)
	if err != nil {
		writeError(w, http.StatusConflict, "%v", err)
		return
	}
	writeJSON(w, http.StatusAccepted, j)
}

func (s *Server) maintenanceContinue(w http.ResponseWriter, r *http.Request, us *userSession) {
	system := r.PathValue("system")
	p, err := s.savedPlan(system)
	if err != nil {
		writeError(w, http.StatusConflict, "%v", err)
		return
	}
	if err := s.checkPrivilege(r.Context(), us, p, PrivOperate, "run maintenance on system "+system); err != nil {
		writeRightsError(w, err)
		return
	}
	if err := s.maint.Continue(system); err != nil {
		writeError(w, http.StatusConflict, "%v", err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// volumeSettings changes a volume's QoS limits (live: the frontends apply
// them within a second). The gateway's answer is passed on with its status,
// so a refused value reaches the form with the gateway's reason.
func (s *Server) volumeSettings(w http.ResponseWriter, r *http.Request, us *userSession) {
	// The QoS fields only: a size goes through the grow job, which grows
	// the datastore too.
	var q struct {
		IOPSLimit      *int64 `json:"iops_limit"`
		BandwidthLimit *int64 `json:"bandwidth_limit"`
	}
	if !decode(w, r, &q) {
		return
	}
	up := gateway.VolumeUpdate{IOPSLimit: q.IOPSLimit, BandwidthLimit: q.BandwidthLimit}
	if up.IOPSLimit == nil && up.BandwidthLimit == nil {
		writeError(w, http.StatusBadRequest, "nothing to change: give iops_limit and/or bandwidth_limit (0 removes a limit)")
		return
	}
	api, _, err := s.systemFor(r.Context(), us, r.PathValue("system"), PrivOperate, "change QoS limits on system "+r.PathValue("system"))
	if err != nil {
		writeRightsError(w, err)
		return
	}
	v, err := api.UpdateVolume(r.Context(), r.PathValue("volume"), up)
	if err != nil {
		writeGatewayError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

// writeGatewayError answers with the gateway's own status and message for
// what it refused (bad value, missing or changed object) and 502 for a
// gateway that could not be asked.
func writeGatewayError(w http.ResponseWriter, err error) {
	var se *gateway.StatusError
	switch {
	case errors.As(err, &se) && se.Status >= 400 && se.Status < 500 && se.Status != http.StatusUnauthorized && se.Status != http.StatusForbidden:
		writeError(w, se.Status, "%s", se.Message)
	case errors.Is(err, gateway.ErrNotFound):
		writeError(w, http.StatusNotFound, "%v", err)
	default:
		writeError(w, http.StatusBadGateway, "%v (check that the system's gateways are up: Cairn > Dashboard)", err)
	}
}

// growVolume grows a volume and the VMFS datastore on it, as a job: the
// hosts rescan, one expands the VMFS, the others check the new capacity.
func (s *Server) growVolume(w http.ResponseWriter, r *http.Request, us *userSession) {
	var req struct {
		SizeGiB   int64  `json:"size_gib"`
		Datastore string `json:"datastore"`
	}
	if !decode(w, r, &req) {
		return
	}
	if req.SizeGiB <= 0 {
		writeError(w, http.StatusBadRequest, "give the volume's new size in GiB (size_gib), larger than it is now")
		return
	}
	system, volume := r.PathValue("system"), r.PathValue("volume")
	api, p, err := s.systemFor(r.Context(), us, system, PrivOperate, "grow volumes on system "+system)
	if err != nil {
		writeRightsError(w, err)
		return
	}
	v, err := api.GetVolume(r.Context(), volume)
	if err != nil {
		writeGatewayError(w, err)
		return
	}
	if req.SizeGiB<<30 < v.Size {
		writeError(w, http.StatusBadRequest, "volume %s is %d GiB: a volume only grows (asked %d GiB)", v.Name, v.Size>>30, req.SizeGiB)
		return
	}
	g := datastore.GrowRequest{Datacenter: p.Datacenter, Volume: v.Name, Datastore: req.Datastore, SizeGiB: req.SizeGiB}
	for _, h := range p.Hosts {
		g.Hosts = append(g.Hosts, h.Name)
	}
	eng := &datastore.Engine{VC: us.client, API: api, Log: s.cfg.Log, PollInterval: s.cfg.PollInterval}
	j, err := s.startVolumeJob(v.Name, datastore.GrowJob(v.Name), func(ctx context.Context) error {
		_, err := eng.Grow(ctx, g)
		return err
	})
	if err != nil {
		writeError(w, http.StatusConflict, "%v", err)
		return
	}
	writeJSON(w, http.StatusAccepted, j)
}
