package gatewayfake

// Growing and shrinking the array like the gateway does it: the leader
// rebalances a pool that holds volumes when a device joins it (GET /system
// "rebuild" shows the groups still moving); an SDS leaves by a drain job,
// refused when a pool holding volumes would be left on one fault domain or
// without room for its thick volumes (model.checkDrain in the appliance).

import (
	"context"
	"fmt"
	"maps"
	"net/http"

	"github.com/cairn-storage/cairn/vcenter-plugin/internal/gateway"
)

// drain is a running sds-remove job.
type drain struct {
	job   gateway.Job
	sdsID string
	reads int
}

// startRebalance sets RebalanceGroups groups of pool moving if it holds
// volumes (a pool without volumes has no data to move). Callers hold a.mu.
func (a *Array) startRebalance(poolID string) {
	for _, v := range a.vols {
		if v.PoolID == poolID {
			a.rebalancing += a.RebalanceGroups
			a.rebalanceTotal += a.RebalanceGroups
			return
		}
	}
}

// rebalanceStep moves a rebalance on by one placement group: it advances
// when GET /system is read. Callers hold a.mu.
func (a *Array) rebalanceStep() {
	if a.rebalancing > 0 {
		a.rebalancing--
	} else {
		a.rebalanceTotal = 0
	}
}

// Rebalancing reports the placement groups still moving.
func (a *Array) Rebalancing() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.rebalancing
}

// checkDrain refuses removing sds when a pool holding volumes would be
// left on fewer than two fault domains (fault sets, or SDSs without them)
// or with less usable capacity (after spare, two copies) than its thick
// volumes. Callers hold a.mu.
func (a *Array) checkDrain(x *gateway.SDS) error {
	for _, p := range a.pools {
		var thick int64
		hasVols := false
		for _, v := range a.vols {
			if v.PoolID == p.ID {
				hasVols = true
				if !v.Thin {
					thick += v.Size
				}
			}
		}
		affected := false
		domains := map[string]bool{}
		var raw int64
		for _, d := range a.devs {
			if d.PoolID != p.ID {
				continue
			}
			if d.SDSID == x.ID {
				affected = true
				continue
			}
			s := find(a.sdss, d.SDSID, sdsID, sdsName)
			if s == nil || s.State == "removing" {
				continue
			}
			dom := "sds:" + s.ID
			if s.FaultSetID != "" {
				dom = "fs:" + s.FaultSetID
			}
			domains[dom] = true
			raw += d.Capacity
		}
		if !affected || !hasVols {
			continue
		}
		refuse := func(msg string) error {
			return &gateway.StatusError{Method: http.MethodPost, Path: "/api/v1/sds/" + x.ID + "/remove", Status: http.StatusConflict, Message: msg}
		}
		if len(domains) < 2 {
			return refuse(fmt.Sprintf("removing SDS %s would leave pool %q (which holds volumes) on %d fault domain; add devices on another SDS/fault set first: two copies need two", x.Name, p.Name, len(domains)))
		}
		usable := raw * int64(100-p.SparePercent) / 100 / 2
		if thick > usable {
			return refuse(fmt.Sprintf("removing SDS %s would leave pool %q %d GiB usable, less than its thick reservations (%d GiB); add devices or remove volumes first", x.Name, p.Name, usable>>30, thick>>30))
		}
	}
	return nil
}

// RemoveSDS starts draining sds; a repeat while it drains answers the
// running job.
func (a *Array) RemoveSDS(ctx context.Context, sds string) (*gateway.Job, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	x := find(a.sdss, sds, sdsID, sdsName)
	if x == nil {
		return nil, notFound("sds", sds)
	}
	if x.State == "removing" {
		for _, d := range a.jobs {
			if d.sdsID == x.ID && !d.job.Done() {
				j := d.job
				return &j, nil
			}
		}
	} else {
		if x.State != gateway.SDSNormal {
			return nil, &gateway.StatusError{Method: http.MethodPost, Path: "/api/v1/sds/" + x.ID + "/remove", Status: http.StatusConflict,
				Message: fmt.Sprintf("SDS %q is in %s; exit maintenance first, then remove it", x.Name, x.State)}
		}
		if err := a.checkDrain(x); err != nil {
			return nil, err
		}
	}
	if err := a.call("RemoveSDS", x.Name); err != nil {
		return nil, err
	}
	x.State = "removing"
	d := &drain{sdsID: x.ID, job: gateway.Job{ID: a.id("job"), Kind: "sds-remove", State: gateway.JobRunning,
		Message: fmt.Sprintf("draining: copies still on sds %s", x.Name)}}
	a.jobs[d.job.ID] = d
	j := d.job
	return &j, nil
}

// GetJob reads a job; each read of a running drain moves it one step on,
// and its last step deletes the SDS with its devices.
func (a *Array) GetJob(ctx context.Context, id string) (*gateway.Job, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	d := a.jobs[id]
	if d == nil {
		return a.deviceJob(id)
	}
	if !d.job.Done() {
		d.reads++
		steps := max(a.DrainSteps, 1)
		d.job.Percent = 100 * float64(min(d.reads, steps)) / float64(steps)
		if d.reads >= steps {
			var keep []*gateway.Device
			for _, dev := range a.devs {
				if dev.SDSID != d.sdsID {
					keep = append(keep, dev)
				}
			}
			a.devs = keep
			var name string
			var sdss []*gateway.SDS
			for _, s := range a.sdss {
				if s.ID == d.sdsID {
					name = s.Name
					continue
				}
				sdss = append(sdss, s)
			}
			a.sdss = sdss
			d.job.State, d.job.Message = gateway.JobSucceeded, fmt.Sprintf("sds %s drained and removed", name)
		}
	}
	j := d.job
	return &j, nil
}

// PutSVM stores an SVM record as the gateway does (the path's name).
func (a *Array) PutSVM(ctx context.Context, rec gateway.SVMRecord) error {
	if len(rec.Addresses) == 0 {
		return &gateway.StatusError{Method: "PUT", Path: "/api/v1/svms/" + rec.Name, Status: http.StatusBadRequest, Message: "give 1-8 addresses"}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.svms == nil {
		a.svms = map[string]gateway.SVMRecord{}
	}
	a.svms[rec.Name] = rec
	return nil
}

// DeleteSVM deletes an SVM record; a missing one is no error.
func (a *Array) DeleteSVM(ctx context.Context, name string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.svms, name)
	return nil
}

// SVMs returns the SVM records, for tests.
func (a *Array) SVMs() map[string]gateway.SVMRecord {
	a.mu.Lock()
	defer a.mu.Unlock()
	return maps.Clone(a.svms)
}

// DeleteHost removes a host record unless volumes are mapped to it.
func (a *Array) DeleteHost(ctx context.Context, key string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	h := find(a.hosts, key, hostID, hostName)
	if h == nil {
		return notFound("host", key)
	}
	for _, v := range a.vols {
		for _, m := range v.Mappings {
			if m.HostID == h.ID {
				return &gateway.StatusError{Method: http.MethodDelete, Path: "/api/v1/hosts/" + h.ID, Status: http.StatusConflict,
					Message: fmt.Sprintf("host %q has volumes mapped (%s): unmap them first", h.Name, v.Name)}
			}
		}
	}
	if err := a.call("DeleteHost", h.Name); err != nil {
		return err
	}
	var keep []*gateway.Host
	for _, o := range a.hosts {
		if o != h {
			keep = append(keep, o)
		}
	}
	a.hosts = keep
	return nil
}
