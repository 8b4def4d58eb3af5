package gateway

// Adding a device is a job (device-add). The request is checked at once
// (a bad path, an unknown SDS or pool, a taken name or path: answered
// 400/404/409 before anything starts), then answered 202 with the job. The
// SDS prepares the device in the background (checks that it is free,
// clears its data area, writes the superblock: seconds on a small disk,
// minutes on a large one) and the device is recorded, state normal, when
// it is ready; the job's result is the device.
//
// The job record holds the model.DevicePlan (the device's id and name are
// chosen at the request). The gateway that runs it holds a claim key under
// a short lease; if that gateway dies, the claim expires and the next
// observer pass of any gateway (the restarted one included) takes the job
// over and prepares the same device again: preparing is idempotent for one
// device id (sds/prepare.go). A repeated request while the job runs finds
// it through an index key written in the job's transaction, so two
// requests for one path never start two preparations.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cairn-storage/cairn/appliance/internal/model"
)

// JobDeviceAdd is the kind of a device-add job.
const JobDeviceAdd = "device-add"

const (
	// claimTTL bounds how long a device-add job waits for a dead gateway's
	// claim to expire before another gateway takes it over.
	claimTTL = 10 // seconds
	// prepareTimeout bounds one preparation on the SDS (clearing the data
	// area of a large device punches holes, or writes zeroes where the
	// device cannot punch them).
	prepareTimeout = 10 * time.Minute
)

// jobIndexKey names the device-add job of one path on one SDS.
func jobIndexKey(sdsID, path string) string {
	h := sha256.Sum256([]byte(path))
	return model.JobIndexPrefix + sdsID + "/" + hex.EncodeToString(h[:12])
}

// addDevice answers POST /devices: a repeat of a recorded device is 200
// with it; a repeat while its job runs is 202 with that job; otherwise a
// new device-add job, 202.
func (s *Server) addDevice(c *call) (int, any, error) {
	var spec model.DeviceSpec
	if err := c.decode(&spec); err != nil {
		return 0, nil, err
	}
	if s.cfg.Devices == nil {
		return 0, nil, fmt.Errorf("no SDS device prober configured in this gateway; devices cannot be added: %w", model.ErrUnavailable)
	}
	plan, err := s.store.PlanDevice(c.ctx, spec)
	if errors.Is(err, model.ErrExists) {
		if w, werr := c.world(); werr == nil {
			if id := sameDevice(w, spec); id != "" {
				return s.viewResponse(c, s.kindOf(model.KindDevice), id, http.StatusOK)
			}
		}
	}
	if err != nil {
		return 0, nil, err
	}
	d := plan.Device
	c.object = &objectRef{Kind: model.KindDevice, ID: d.ID, Name: d.Name}
	now := time.Now().UTC()
	rec := jobRecord{Job: Job{ID: model.NewID(), Kind: JobDeviceAdd, Object: *c.object, State: JobRunning, User: c.user.Name, Created: now, Updated: now,
		Message: fmt.Sprintf("preparing device %s on SDS %s", d.Path, plan.SDSName)}, Device: &plan}
	b, _ := json.Marshal(rec)
	idx := jobIndexKey(d.SDSID, d.Path)
	r, err := s.cfg.Etcd.Txn(c.ctx).If(clientv3.Compare(clientv3.CreateRevision(idx), "=", 0)).
		Then(clientv3.OpPut(model.JobKey(rec.ID), string(b)), clientv3.OpPut(idx, rec.ID)).
		Else(clientv3.OpGet(idx)).Commit()
	if err != nil {
		return 0, nil, fmt.Errorf("store job: %v: %w", err, model.ErrUnavailable)
	}
	if !r.Succeeded {
		// A repeat while the first request's job runs: that job.
		kvs := r.Responses[0].GetResponseRange().Kvs
		if len(kvs) == 0 {
			return 0, nil, fmt.Errorf("device %s on SDS %s: a job for it just ended; retry: %w", d.Path, plan.SDSName, model.ErrConflict)
		}
		rec, _, err = s.loadJob(c.ctx, string(kvs[0].Value))
		if err != nil {
			return 0, nil, err
		}
		c.object = &rec.Object
	} else {
		go s.runDeviceAdd(s.life, rec.ID)
	}
	c.w.Header().Set("Location", APIPrefix+"/jobs/"+rec.ID)
	return http.StatusAccepted, rec.Job, nil
}

// sameDevice finds a recorded device that spec asks for again.
func sameDevice(w *world, spec model.DeviceSpec) string {
	x, p := w.resolve(model.KindSDS, spec.SDS), w.resolve(model.KindPool, spec.Pool)
	for _, d := range w.devices {
		if d.SDSID == x && d.Path == spec.Path && d.PoolID == p && (spec.Name == "" || spec.Name == d.Name) {
			return d.ID
		}
	}
	return ""
}

// loadJob reads one job with its mod revision.
func (s *Server) loadJob(ctx context.Context, id string) (jobRecord, int64, error) {
	r, err := s.cfg.Etcd.Get(ctx, model.JobKey(id))
	if err != nil {
		return jobRecord{}, 0, fmt.Errorf("read job %s: %v: %w", id, err, model.ErrUnavailable)
	}
	if len(r.Kvs) == 0 {
		return jobRecord{}, 0, fmt.Errorf("job %s: %w", id, model.ErrNotFound)
	}
	var rec jobRecord
	if err := json.Unmarshal(r.Kvs[0].Value, &rec); err != nil {
		return jobRecord{}, 0, fmt.Errorf("decode job %s: %w", id, err)
	}
	return rec, r.Kvs[0].ModRevision, nil
}

// takeOverDeviceAdds starts every running device-add job nobody holds
// (its gateway died, or stopped before it finished). The claim in
// runDeviceAdd decides who runs it when several gateways see it at once.
func (s *Server) takeOverDeviceAdds(ctx context.Context, jobs []Job) {
	var claimed map[string]bool
	for _, rec := range jobs {
		if rec.Kind != JobDeviceAdd || rec.State != JobRunning {
			continue
		}
		if claimed == nil {
			r, err := s.cfg.Etcd.Get(ctx, model.JobClaimPrefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
			if err != nil {
				return
			}
			claimed = map[string]bool{}
			for _, kv := range r.Kvs {
				claimed[string(kv.Key)] = true
			}
		}
		if !claimed[model.JobClaimPrefix+rec.ID] {
			s.log.Info("device-add job has no running gateway; taking it over", "job", rec.ID, "device", rec.Object.Name)
			go s.runDeviceAdd(s.life, rec.ID)
		}
	}
}

// runDeviceAdd claims a device-add job and runs it to its end: prepare on
// the SDS, record the device, store the job's result. It returns at once
// when another gateway holds the job.
func (s *Server) runDeviceAdd(ctx context.Context, id string) {
	lease, err := s.cfg.Etcd.Grant(ctx, claimTTL)
	if err != nil {
		s.log.Warn("device-add job not started: no lease; the observer retries", "job", id, "err", err)
		return
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		s.cfg.Etcd.Revoke(rctx, lease.ID) // drops the claim
		cancel()
	}()
	claim := model.JobClaimPrefix + id
	r, err := s.cfg.Etcd.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(claim), "=", 0)).
		Then(clientv3.OpPut(claim, s.instance, clientv3.WithLease(lease.ID))).Commit()
	if err != nil || !r.Succeeded {
		return // another gateway runs it (or etcd is away: the observer retries)
	}
	kctx, stop := context.WithCancel(ctx)
	defer stop()
	ka, err := s.cfg.Etcd.KeepAlive(kctx, lease.ID)
	if err != nil {
		return
	}
	go func() {
		for range ka { // drain the keep-alive answers
		}
	}()
	rec, _, err := s.loadJob(ctx, id)
	if err != nil || rec.State != JobRunning || rec.Device == nil {
		return
	}
	plan := *rec.Device
	d, err := s.prepareAndCommit(ctx, plan)
	if ctx.Err() != nil {
		return // this gateway stops: the job stays running for a takeover
	}
	// Finish: the record may have been refreshed meanwhile; take its
	// latest revision (this gateway holds the claim, nobody else runs it).
	rec, rev, lerr := s.loadJob(ctx, id)
	if lerr != nil {
		s.log.Warn("device-add job: cannot read it to finish; the observer retries", "job", id, "err", lerr)
		return
	}
	now := time.Now().UTC()
	rec.Updated = now
	zero := 0.0
	rec.ETASeconds = &zero
	if err != nil {
		_, code := classify(err)
		rec.State, rec.Percent = JobFailed, 0
		rec.Message = err.Error()
		rec.Error = &errorBody{Code: code, Message: err.Error() + "; fix it and add the device again", Field: model.FieldOf(err)}
	} else {
		rec.State, rec.Percent = JobSucceeded, 100
		rec.Message = fmt.Sprintf("device %s added: %s on SDS %s, %s", d.Name, d.Path, plan.SDSName, model.FormatSize(d.Capacity))
		if w, werr := s.loadWorld(ctx); werr == nil {
			rec.Result, _ = json.Marshal(w.deviceView(d))
		}
	}
	if _, err := s.writeJob(ctx, rec, rev, clientv3.OpDelete(jobIndexKey(plan.Device.SDSID, plan.Device.Path))); err != nil {
		s.log.Warn("device-add job: result not stored; the observer retries", "job", id, "err", err)
	}
}

// prepareAndCommit asks the device's SDS to prepare it and records it.
func (s *Server) prepareAndCommit(ctx context.Context, plan model.DevicePlan) (model.Device, error) {
	x, err := s.store.GetSDS(ctx, plan.Device.SDSID)
	if err != nil {
		return model.Device{}, model.WithField(err, "sds")
	}
	pctx, cancel := context.WithTimeout(ctx, prepareTimeout)
	defer cancel()
	capacity, err := s.cfg.Devices.PrepareDevice(pctx, x.Address, plan.ClusterID, plan.Device.ID, plan.Device.Path, plan.Force)
	if err != nil {
		return model.Device{}, model.PrepareError(plan, err)
	}
	return s.store.CommitDevice(ctx, plan, capacity)
}
