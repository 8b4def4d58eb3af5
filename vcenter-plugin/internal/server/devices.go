// Day-2 devices: the disks an SDS's SVM could take, adding one (attach it
// to the SVM as an RDM when it is not yet, then the gateway's device-add
// job), and removing one (the gateway's drain job, followed with its
// progress). Maintenance stop lives here too, next to its route.

package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/cairn-storage/cairn/vcenter-plugin/internal/deploy"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/gateway"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/inventory"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/plan"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/progress"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/statefile"
)

// DeviceAddJob and DeviceRemoveJob name the device jobs (GET /api/v1/jobs,
// the events' job): one per device at a time.
func DeviceAddJob(system, sds, device string) string {
	return "device-add:" + system + "/" + sds + "/" + device
}
func DeviceRemoveJob(system, device string) string { return "device-remove:" + system + "/" + device }

// CandidateDisk is one disk of an SDS's host in GET .../sds/{sds}/disks.
type CandidateDisk struct {
	inventory.Disk
	Mode string `json:"mode"` // rdm
	// Attached: the SVM maps it already (it sees it now); else adding it
	// attaches it as an RDM first.
	Attached bool `json:"attached"`
	// CairnDevice: the Cairn device already on it ("" if none).
	CairnDevice string `json:"cairn_device,omitempty"`
	// Available: it can be added; otherwise Reason says why not.
	Available bool   `json:"available"`
	Reason    string `json:"reason,omitempty"`
	Path      string `json:"path"` // what the SDS opens in the SVM
}

// CandidatePCI is a passthrough device of the SDS's SVM.
type CandidatePCI struct {
	inventory.PCIDevice
	Mode        string `json:"mode"` // passthrough
	CairnDevice string `json:"cairn_device,omitempty"`
	Available   bool   `json:"available"`
	Reason      string `json:"reason,omitempty"`
}

// SDSDisks is GET /api/v1/systems/{system}/sds/{sds}/disks.
type SDSDisks struct {
	SDS   string          `json:"sds"`
	Host  string          `json:"host"`
	SVM   string          `json:"svm"`
	Pool  string          `json:"pool"` // the plan's pool: the default
	Disks []CandidateDisk `json:"disks"`
	PCI   []CandidatePCI  `json:"pci"`
}

// sdsHost finds the plan host whose SDS is sds (its name, or the host's).
func sdsHost(p *plan.Plan, sds string) *plan.Host {
	for i := range p.Hosts {
		h := &p.Hosts[i]
		if h.Has(plan.RoleSDS) && (deploy.SDSName(h.Name) == sds || h.Name == sds) {
			return h
		}
	}
	return nil
}

// sdsDisks lists what the SVM of sds could take, from vCenter's view of
// its host and the gateway's devices.
func (s *Server) sdsDisks(ctx context.Context, us *userSession, system, sds, need, action string) (*SDSDisks, *plan.Plan, *plan.Host, gateway.API, int, error) {
	// The signed-in user's rights on the system's cluster.
	api, p, err := s.systemFor(ctx, us, system, need, action+" on system "+system)
	if err != nil {
		if errors.As(err, new(*Forbidden)) {
			return nil, nil, nil, nil, http.StatusForbidden, err
		}
		return nil, nil, nil, nil, http.StatusConflict, err
	}
	h := sdsHost(p, sds)
	if h == nil {
		return nil, nil, nil, nil, http.StatusNotFound, fmt.Errorf("system %s has no SDS %q: pick one of its SDSs (Cairn > SDSs and devices)", system, sds)
	}
	inv, err := inventory.Collect(ctx, us.client)
	if err != nil {
		return nil, nil, nil, nil, http.StatusBadGateway, err
	}
	ih, _ := inv.Host(h.Name)
	if ih == nil {
		return nil, nil, nil, nil, http.StatusConflict, fmt.Errorf("host %s of system %s is not in vCenter's inventory: reconnect it", h.Name, system)
	}
	devs, err := api.ListDevices(ctx)
	if err != nil {
		return nil, nil, nil, nil, http.StatusBadGateway, fmt.Errorf("%w (check that the system's gateways are up: Cairn > Dashboard)", err)
	}
	gs, err := api.GetSDS(ctx, deploy.SDSName(h.Name))
	if err != nil {
		return nil, nil, nil, nil, http.StatusBadGateway, err
	}
	onPath := map[string]string{}
	for _, d := range devs {
		if d.SDSID == gs.ID {
			onPath[d.Path] = d.Name + " (" + d.State + ")"
		}
	}
	svm := p.SVMName(h.Name)
	out := &SDSDisks{SDS: gs.Name, Host: h.Name, SVM: svm, Pool: p.StoragePool.Name, Disks: []CandidateDisk{}, PCI: []CandidatePCI{}}
	for _, d := range ih.Disks {
		dev := plan.Device{Disk: d.CanonicalName, Mode: plan.ModeRDM}
		path, _ := deploy.DefaultDevicePath(h.Name, dev, nil)
		c := CandidateDisk{Disk: d, Mode: plan.ModeRDM, Attached: d.UsedBy == "vm "+svm, Path: path, CairnDevice: onPath[path]}
		switch {
		case c.CairnDevice != "":
			c.Reason = "already Cairn device " + c.CairnDevice
		case c.Attached:
			c.Available = true
		case d.UsedBy != "":
			c.Reason = "in use by " + d.UsedBy + ": free it in vSphere first"
		case !d.Local:
			c.Reason = "not a local disk: Cairn pools the hosts' own disks"
		case !d.RDMCapable:
			c.Reason = "ESXi does not offer it for raw mapping (no unique serial, or it holds VMFS): pass its controller through instead"
		default:
			c.Available = true
		}
		out.Disks = append(out.Disks, c)
	}
	for _, pd := range ih.PCIDevices {
		if pd.UsedBy != "vm "+svm {
			continue // only what the SVM has: passthrough is attached by the deploy
		}
		c := CandidatePCI{PCIDevice: pd, Mode: plan.ModePassthrough, Available: true}
		for _, d := range p.Hosts {
			for _, pdv := range d.Devices {
				if d.Name == h.Name && pdv.PCI == pd.ID {
					c.Available, c.Reason = false, "already in the plan (a Cairn device)"
				}
			}
		}
		out.PCI = append(out.PCI, c)
	}
	return out, p, h, api, 0, nil
}

func (s *Server) listSDSDisks(w http.ResponseWriter, r *http.Request, us *userSession) {
	out, _, _, _, code, err := s.sdsDisks(r.Context(), us, r.PathValue("system"), r.PathValue("sds"), PrivMonitor, "list the disks of an SDS")
	if code == http.StatusForbidden {
		writeRightsError(w, err)
		return
	}
	if err != nil {
		writeError(w, code, "%v", err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// addDevice: {"sds","disk"|"pci","pool"?,"name"?} -> 202 job.
func (s *Server) addDevice(w http.ResponseWriter, r *http.Request, us *userSession) {
	var req struct {
		SDS  string `json:"sds"`
		Disk string `json:"disk"`
		PCI  string `json:"pci"`
		Pool string `json:"pool"`
		Name string `json:"name"`
	}
	if !decode(w, r, &req) {
		return
	}
	system := r.PathValue("system")
	if req.SDS == "" || (req.Disk == "") == (req.PCI == "") {
		writeError(w, http.StatusBadRequest, "give the SDS (sds) and one disk (disk: its canonical name, e.g. naa.…) or passthrough device (pci)")
		return
	}
	cands, p, h, api, code, err := s.sdsDisks(r.Context(), us, system, req.SDS, PrivAdminister, "add devices")
	if code == http.StatusForbidden {
		writeRightsError(w, err)
		return
	}
	if err != nil {
		writeError(w, code, "%v", err)
		return
	}
	dev := plan.Device{Disk: req.Disk, Mode: plan.ModeRDM}
	var size int64
	ok, reason := false, ""
	if req.PCI != "" {
		dev = plan.Device{PCI: req.PCI, Mode: plan.ModePassthrough}
		reason = fmt.Sprintf("PCI device %s is not passed through to SVM %s: ESXi adds passthrough devices only to a powered-off VM; add it to the plan and run the deploy again", req.PCI, cands.SVM)
		for _, c := range cands.PCI {
			if c.ID == req.PCI {
				ok, reason = c.Available, c.Reason
			}
		}
	} else {
		reason = fmt.Sprintf("host %s has no disk %s: pick one of GET /api/v1/systems/%s/sds/%s/disks", h.Name, req.Disk, system, req.SDS)
		for _, c := range cands.Disks {
			if c.CanonicalName == req.Disk {
				ok, reason, size = c.Available, c.Reason, c.Size
			}
		}
	}
	if !ok {
		writeError(w, http.StatusConflict, "cannot add %s to sds %s: %s", req.Disk+req.PCI, cands.SDS, reason)
		return
	}
	if req.Pool == "" {
		req.Pool = p.StoragePool.Name
	}
	key := req.Disk + req.PCI
	job := DeviceAddJob(system, cands.SDS, key)
	log := s.cfg.Log
	j, err := s.start(job, func(ctx context.Context) error {
		log.Emit(job, progress.Info, "attach", h.Name, "making %s visible to SVM %s", key, cands.SVM)
		path, changed, err := deploy.AttachDevice(ctx, us.client, p, h, dev, size)
		if err != nil {
			log.Emit(job, progress.Error, "attach", h.Name, "%v", err)
			return err
		}
		if changed {
			log.Emit(job, progress.Info, "attach", h.Name, "disk %s attached to SVM %s as a raw device mapping; the SDS opens %s", key, cands.SVM, path)
		} else {
			log.Emit(job, progress.Info, "attach", h.Name, "SVM %s has %s already; the SDS opens %s", cands.SVM, key, path)
		}
		if err := s.planDevice(system, h.Name, dev, true); err != nil {
			log.Emit(job, progress.Error, "plan", h.Name, "%v", err)
			return err
		}
		log.Emit(job, progress.Info, "device-add", h.Name, "sds %s prepares %s (checks it is free, clears it, writes its superblock)", cands.SDS, path)
		d, err := api.AddDevice(ctx, gateway.DeviceSpec{SDS: cands.SDS, Path: path, Pool: req.Pool, Name: req.Name})
		if err != nil {
			err = fmt.Errorf("sds %s: add device %s: %w (the disk stays attached to the SVM: fix the cause and add it again)", cands.SDS, path, err)
			log.Emit(job, progress.Error, "device-add", h.Name, "%v", err)
			return err
		}
		log.Emit(job, progress.Info, "device-add", h.Name, "device %s added to sds %s, pool %s: %.1f GiB", d.Name, cands.SDS, req.Pool, float64(d.Capacity)/(1<<30))
		return nil
	})
	if err != nil {
		writeError(w, http.StatusConflict, "%v", err)
		return
	}
	writeJSON(w, http.StatusAccepted, j)
}

// planDevice adds dev to (or removes it from) host's devices in the saved
// plan, so the plan keeps describing the system.
func (s *Server) planDevice(system, host string, dev plan.Device, add bool) error {
	s.planMu.Lock()
	defer s.planMu.Unlock()
	old, err := s.savedPlan(system)
	if err != nil {
		return err
	}
	p, _ := s.savedPlan(system)
	for i := range p.Hosts {
		h := &p.Hosts[i]
		if h.Name != host {
			continue
		}
		kept := h.Devices[:0:0]
		found := false
		for _, d := range h.Devices {
			same := d.Mode == dev.Mode && d.Disk == dev.Disk && d.PCI == dev.PCI
			found = found || same
			if !same || add {
				kept = append(kept, d)
			}
		}
		if add && !found {
			kept = append(kept, dev)
		}
		h.Devices = kept
	}
	// The deploy state names its plan by hash: it moves first, and back
	// if the plan cannot be written.
	if err := deploy.RecordPlanChange(s.cfg.StateDir, old, p); err != nil {
		return fmt.Errorf("record the device in the deploy state: %w", err)
	}
	if err := statefile.WriteJSON(s.planPath(system), p); err != nil {
		_ = deploy.RecordPlanChange(s.cfg.StateDir, p, old)
		return fmt.Errorf("save plan: %w", err)
	}
	return nil
}

// removeDevice starts the gateway's drain at once (so a refusal answers
// this request with its reason), then follows it as a job. A repeat while
// the device is removing follows the running drain (after a plugin
// restart, too).
func (s *Server) removeDevice(w http.ResponseWriter, r *http.Request, us *userSession) {
	system, ref := r.PathValue("system"), r.PathValue("device")
	api, p, err := s.systemFor(r.Context(), us, system, PrivAdminister, "remove devices on system "+system)
	if err != nil {
		writeRightsError(w, err)
		return
	}
	devs, err := api.ListDevices(r.Context())
	if err != nil {
		writeGatewayError(w, err)
		return
	}
	var dev *gateway.Device
	for i := range devs {
		if devs[i].ID == ref || (devs[i].Name != "" && devs[i].Name == ref) {
			dev = &devs[i]
		}
	}
	if dev == nil {
		writeError(w, http.StatusNotFound, "system %s has no device %q: refresh the list", system, ref)
		return
	}
	name := dev.Name
	if name == "" {
		name = dev.ID
	}
	job := DeviceRemoveJob(system, name)
	s.mu.Lock()
	running := s.jobs[job] != nil && s.jobs[job].State == "running"
	s.mu.Unlock()
	if running {
		writeError(w, http.StatusConflict, "job %s is already running: follow it", job)
		return
	}
	gj, err := api.RemoveDevice(r.Context(), dev.ID)
	if err != nil {
		writeGatewayError(w, err)
		return
	}
	host := ""
	for _, h := range p.Hosts {
		if ss, err := api.GetSDS(r.Context(), deploy.SDSName(h.Name)); err == nil && ss.ID == dev.SDSID {
			host = h.Name
		}
	}
	log := s.cfg.Log
	poll := s.cfg.PollInterval
	if poll == 0 {
		poll = time.Second
	}
	j, err := s.start(job, func(ctx context.Context) error {
		log.Emit(job, progress.Info, "drain", host, "device %s (%s): removal started, gateway job %s; its copies move to the pool's other devices, two copies all the time", name, dev.Path, gj.ID)
		last := ""
		for {
			msg := fmt.Sprintf("%.1f|%s", gj.Percent, gj.Message)
			if msg != last && gj.State == gateway.JobRunning {
				log.EmitProgress(job, "drain", host, gj.Percent, gj.ETASeconds, "%s", gj.Message)
				last = msg
			}
			switch gj.State {
			case gateway.JobSucceeded:
				log.EmitProgress(job, "drain", host, 100, gj.ETASeconds, "%s", gj.Message)
				if err := s.planDevice(system, host, planDeviceOf(dev.Path), false); err != nil {
					log.Emit(job, progress.Warn, "plan", host, "%v", err)
				}
				log.Emit(job, progress.Info, "done", host, "device %s removed; its disk stays attached to the SVM (add it again, or detach it in vSphere to reuse it)", name)
				return nil
			case gateway.JobFailed:
				msg := gj.Message
				if gj.Error != nil {
					msg = gj.Error.Message
				}
				err := fmt.Errorf("drain of device %s stopped: %s", name, msg)
				log.Emit(job, progress.Error, "drain", host, "%v", err)
				return err
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(poll):
			}
			next, err := api.GetJob(ctx, gj.ID)
			if err != nil {
				if errors.Is(err, context.Canceled) {
					return err
				}
				// The gateway carries the drain on by itself: keep asking.
				log.Emit(job, progress.Warn, "drain", host, "cannot read gateway job %s: %v (the drain goes on; retrying)", gj.ID, err)
				continue
			}
			gj = next
		}
	})
	if err != nil {
		writeError(w, http.StatusConflict, "%v", err)
		return
	}
	writeJSON(w, http.StatusAccepted, j)
}

// planDeviceOf is the plan device an SDS path stands for (an RDM's
// by-id path); a passthrough path matches no plan entry.
func planDeviceOf(path string) plan.Device {
	if naa, ok := strings.CutPrefix(path, "/dev/disk/by-id/wwn-0x"); ok {
		return plan.Device{Disk: "naa." + naa, Mode: plan.ModeRDM}
	}
	return plan.Device{Mode: "none"}
}

// maintenanceStop asks the running roll to stop safely: 202 with what it
// will do; the job then ends "stopped".
func (s *Server) maintenanceStop(w http.ResponseWriter, r *http.Request, us *userSession) {
	system := r.PathValue("system")
	p, err := s.savedPlan(system)
	if err != nil {
		writeError(w, http.StatusConflict, "%v", err)
		return
	}
	if err := s.checkPrivilege(r.Context(), us, p, PrivOperate, "stop maintenance on system "+system); err != nil {
		writeRightsError(w, err)
		return
	}
	sp, err := s.maint.Stop(system)
	if err != nil {
		writeError(w, http.StatusConflict, "%v", err)
		return
	}
	writeJSON(w, http.StatusAccepted, sp)
}
