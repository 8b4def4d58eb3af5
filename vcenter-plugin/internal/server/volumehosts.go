// Volume map, unmap and delete: jobs of the datastore engine, refused at
// once (400/404/409) when the request cannot work, so the dialog shows why.

package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/cairn-storage/cairn/vcenter-plugin/internal/datastore"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/gateway"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/plan"
)

// Access modes of a map request.
const (
	AccessReadWrite = "read_write"
	AccessReadOnly  = "read_only"
)

// volumeJobs are the jobs that change one volume's hosts or size: one at a
// time per volume.
func volumeJobs(volume string) []string {
	return []string{datastore.MapJob(volume), datastore.UnmapJob(volume), datastore.DeleteJob(volume), datastore.GrowJob(volume)}
}

// startVolumeJob starts job name unless a job on the same volume runs.
func (s *Server) startVolumeJob(volume, name string, f func(ctx context.Context) error) (*Job, error) {
	s.mu.Lock()
	for _, n := range volumeJobs(volume) {
		if j := s.jobs[n]; j != nil && j.State == "running" && n != name {
			s.mu.Unlock()
			return nil, fmt.Errorf("job %s is running on volume %s: wait for it to end", n, volume)
		}
	}
	s.mu.Unlock()
	return s.start(name, f)
}

// volumeTarget resolves the system and the volume of the path, answering
// the error itself (409 system not deployed, 404 no such volume).
func (s *Server) volumeTarget(w http.ResponseWriter, r *http.Request, us *userSession, action string) (gateway.API, *plan.Plan, *gateway.Volume, bool) {
	// The signed-in user's rights: Cairn.Operate on the system's cluster.
	api, p, err := s.systemFor(r.Context(), us, r.PathValue("system"), PrivOperate, action+" on system "+r.PathValue("system"))
	if err != nil {
		writeRightsError(w, err)
		return nil, nil, nil, false
	}
	v, err := api.GetVolume(r.Context(), r.PathValue("volume"))
	if err != nil {
		if errors.Is(err, gateway.ErrNotFound) {
			writeError(w, http.StatusNotFound, "volume %s does not exist in system %s: refresh the page", r.PathValue("volume"), p.System)
			return nil, nil, nil, false
		}
		writeGatewayError(w, err)
		return nil, nil, nil, false
	}
	return api, p, v, true
}

func planHosts(p *plan.Plan) []string {
	var out []string
	for _, h := range p.Hosts {
		out = append(out, h.Name)
	}
	return out
}

// checkHosts answers 400 unless hosts is a non-empty list of the system's
// hosts.
func checkHosts(w http.ResponseWriter, p *plan.Plan, hosts []string, verb string) bool {
	if len(hosts) == 0 {
		writeError(w, http.StatusBadRequest, "choose at least one host to %s (hosts)", verb)
		return false
	}
	known := planHosts(p)
	for _, h := range hosts {
		if !slices.Contains(known, h) {
			writeError(w, http.StatusBadRequest, "host %q is not a host of system %s (its hosts: %s)", h, p.System, strings.Join(known, ", "))
			return false
		}
	}
	return true
}

// mapVolume maps a volume to hosts, as a job: the mapping in Cairn, then
// each host rescans and mounts the datastore.
func (s *Server) mapVolume(w http.ResponseWriter, r *http.Request, us *userSession) {
	var req struct {
		Hosts     []string `json:"hosts"`
		Access    string   `json:"access"`
		Datastore string   `json:"datastore"`
	}
	if !decode(w, r, &req) {
		return
	}
	if req.Access == "" {
		req.Access = AccessReadWrite
	}
	if req.Access != AccessReadWrite && req.Access != AccessReadOnly {
		writeError(w, http.StatusBadRequest, "access %q: give %q or %q", req.Access, AccessReadWrite, AccessReadOnly)
		return
	}
	api, p, v, ok := s.volumeTarget(w, r, us, "map volumes")
	if !ok || !checkHosts(w, p, req.Hosts, "map the volume to") {
		return
	}
	hr := datastore.HostsRequest{Datacenter: p.Datacenter, Volume: v.Name, Datastore: req.Datastore, Hosts: req.Hosts, ReadOnly: req.Access == AccessReadOnly}
	eng := &datastore.Engine{VC: us.client, API: api, Log: s.cfg.Log, PollInterval: s.cfg.PollInterval}
	j, err := s.startVolumeJob(v.Name, datastore.MapJob(v.Name), func(ctx context.Context) error { return eng.Map(ctx, hr) })
	if err != nil {
		writeError(w, http.StatusConflict, "%v", err)
		return
	}
	writeJSON(w, http.StatusAccepted, j)
}

// unmapVolume unmaps a volume from hosts, as a job: unmount, detach,
// unmap, rescan.
func (s *Server) unmapVolume(w http.ResponseWriter, r *http.Request, us *userSession) {
	var req struct {
		Hosts     []string `json:"hosts"`
		Datastore string   `json:"datastore"`
	}
	if !decode(w, r, &req) {
		return
	}
	api, p, v, ok := s.volumeTarget(w, r, us, "unmap volumes")
	if !ok || !checkHosts(w, p, req.Hosts, "unmap the volume from") {
		return
	}
	hr := datastore.HostsRequest{Datacenter: p.Datacenter, Volume: v.Name, Datastore: req.Datastore, Hosts: req.Hosts}
	eng := &datastore.Engine{VC: us.client, API: api, Log: s.cfg.Log, PollInterval: s.cfg.PollInterval}
	j, err := s.startVolumeJob(v.Name, datastore.UnmapJob(v.Name), func(ctx context.Context) error { return eng.Unmap(ctx, hr) })
	if err != nil {
		writeError(w, http.StatusConflict, "%v", err)
		return
	}
	writeJSON(w, http.StatusAccepted, j)
}

// deleteVolume deletes a volume and its datastore, as a job. The caller
// types the volume's name in "confirm": the data is destroyed.
func (s *Server) deleteVolume(w http.ResponseWriter, r *http.Request, us *userSession) {
	var req struct {
		Confirm   string `json:"confirm"`
		Datastore string `json:"datastore"`
	}
	if !decode(w, r, &req) {
		return
	}
	if req.Confirm != r.PathValue("volume") {
		writeError(w, http.StatusBadRequest, "type the volume's name in confirm to delete it and its data (got %q)", req.Confirm)
		return
	}
	api, p, v, ok := s.volumeTarget(w, r, us, "delete volumes")
	if !ok {
		return
	}
	dr := datastore.DeleteRequest{Datacenter: p.Datacenter, Volume: v.Name, Datastore: req.Datastore, Hosts: planHosts(p)}
	eng := &datastore.Engine{VC: us.client, API: api, Log: s.cfg.Log, PollInterval: s.cfg.PollInterval}
	j, err := s.startVolumeJob(v.Name, datastore.DeleteJob(v.Name), func(ctx context.Context) error { return eng.Delete(ctx, dr) })
	if err != nil {
		writeError(w, http.StatusConflict, "%v", err)
		return
	}
	writeJSON(w, http.StatusAccepted, j)
}
