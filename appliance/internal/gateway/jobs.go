package gateway

// Jobs: long operations answered 202 + Location: /api/v1/jobs/{id}. A job
// lives in etcd, so any gateway of the cluster (a restarted one included)
// carries it on: its progress is derived from the model each time the
// observer loop runs or a client reads it, never from memory.
//
// Layout v1: model.JobPrefix+"<id>" -> jobRecord (JSON; model/keys.go).
// Updates compare the record's mod revision, so two gateways refreshing one
// job write once.

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/cairn-storage/cairn/appliance/internal/model"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Job states and kinds.
const (
	JobQueued    = "queued"
	JobRunning   = "running"
	JobSucceeded = "succeeded"
	JobFailed    = "failed"

	JobSDSRemove        = "sds-remove"
	JobDeviceRemove     = "device-remove"
	JobMaintenanceEnter = "maintenance-enter"
	JobMaintenanceExit  = "maintenance-exit"
	// JobDeviceAdd: deviceadd.go.
)

// Retention of finished jobs.
const (
	jobKeep    = 7 * 24 * time.Hour
	jobMaxKept = 1000
)

// objectRef names an object in jobs, events and alerts.
type objectRef struct {
	Kind string `json:"kind"`
	ID   string `json:"id"`
	Name string `json:"name"`
}

// Job is the API's job object (docs/api.md section 4).
type Job struct {
	ID         string          `json:"id"`
	Kind       string          `json:"kind"`
	Object     objectRef       `json:"object"`
	State      string          `json:"state"`
	Percent    float64         `json:"percent"`
	ETASeconds *float64        `json:"eta_seconds"`
	Message    string          `json:"message"`
	Result     json.RawMessage `json:"result"`
	Error      *errorBody      `json:"error"`
	User       string          `json:"user"`
	Created    time.Time       `json:"created"`
	Updated    time.Time       `json:"updated"`
}

// jobRecord is what etcd holds: the job plus its bookkeeping.
type jobRecord struct {
	Job
	// TotalCopies: placement-group copies on the drained object when the
	// drain started (or the most seen since): the 0% mark.
	TotalCopies int `json:"total_copies"`
	// SDSIDs: the SDSs a maintenance job follows (one, or a fault set's).
	SDSIDs []string `json:"sds_ids,omitempty"`
	// Device: the device a device-add job prepares and records.
	Device *model.DevicePlan `json:"device,omitempty"`
}

// drainCopies counts the placement-group copies a drain still has to move.
func (w *world) drainCopies(j *Job) int {
	n := 0
	for _, m := range w.maps {
		for _, pg := range m.PGs {
			for _, c := range pg {
				if (j.Kind == JobSDSRemove && c.SDSID == j.Object.ID) || (j.Kind == JobDeviceRemove && c.DeviceID == j.Object.ID) {
					n++
				}
			}
		}
	}
	return n
}

// progress computes a running job's next state from the model.
func (w *world) progress(rec jobRecord, now time.Time) jobRecord {
	j := &rec.Job
	var state string
	var exists bool
	switch j.Kind {
	case JobSDSRemove:
		x, ok := w.sdss[j.Object.ID]
		state, exists = x.State, ok
	case JobDeviceRemove:
		d, ok := w.devices[j.Object.ID]
		state, exists = d.State, ok
	case JobMaintenanceEnter, JobMaintenanceExit:
		return w.maintenanceProgress(rec)
	default:
		return rec
	}
	switch {
	case !exists:
		zero := 0.0
		j.State, j.Percent, j.ETASeconds = JobSucceeded, 100, &zero
		j.Message = fmt.Sprintf("%s %s drained and removed", j.Object.Kind, j.Object.Name)
	case state != model.SDSRemoving: // DeviceRemoving is the same word
		j.State = JobFailed
		j.Message = fmt.Sprintf("%s %s is %s now, no longer removing: the removal stopped", j.Object.Kind, j.Object.Name, state)
		j.Error = &errorBody{Code: CodeConflict, Message: j.Message + "; start it again with POST .../remove"}
	default:
		left := w.drainCopies(j)
		rec.TotalCopies = max(rec.TotalCopies, left)
		j.State = JobRunning
		j.Percent, j.ETASeconds = 0, nil
		if rec.TotalCopies > 0 {
			moved := rec.TotalCopies - left
			// The object is deleted (100%) once nothing references it.
			j.Percent = math.Min(99.9, math.Round(1000*float64(moved)/float64(rec.TotalCopies))/10)
			if el := now.Sub(j.Created).Seconds(); moved > 0 && el > 0 {
				eta := math.Ceil(float64(left) / (float64(moved) / el))
				j.ETASeconds = &eta
			}
		}
		j.Message = fmt.Sprintf("draining: %d of %d placement-group copies still on %s %s", left, rec.TotalCopies, j.Object.Kind, j.Object.Name)
	}
	return rec
}

// maintenanceProgress follows SDSs into maintenance (done when none of
// their copies is ready or being filled: safe to shut down) or out of it
// (done when their copies have resynced).
func (w *world) maintenanceProgress(rec jobRecord) jobRecord {
	j := &rec.Job
	done := 0
	var waiting []string
	for _, id := range rec.SDSIDs {
		x, ok := w.sdss[id]
		inMaint := ok && model.MaintenanceMode(x.State) != ""
		if !ok || (j.Kind == JobMaintenanceEnter) != inMaint {
			j.State, j.Percent = JobFailed, 0
			j.Message = fmt.Sprintf("SDS %s left the requested state (now %q): the maintenance request was undone or the SDS removed", x.Name, x.State)
			j.Error = &errorBody{Code: CodeConflict, Message: j.Message}
			return rec
		}
		st := w.maintenanceOf(x).State
		if (j.Kind == JobMaintenanceEnter && st == MaintIn) || (j.Kind == JobMaintenanceExit && st == "") {
			done++
		} else {
			waiting = append(waiting, fmt.Sprintf("%s (%s)", x.Name, st))
		}
	}
	j.Percent = math.Round(1000*float64(done)/float64(max(1, len(rec.SDSIDs)))) / 10
	switch {
	case done == len(rec.SDSIDs) && j.Kind == JobMaintenanceEnter:
		j.State, j.Message = JobSucceeded, fmt.Sprintf("%s %s in maintenance: safe to shut down", j.Object.Kind, j.Object.Name)
	case done == len(rec.SDSIDs):
		j.State, j.Message = JobSucceeded, fmt.Sprintf("%s %s back from maintenance, resync done", j.Object.Kind, j.Object.Name)
	default:
		j.State, j.Message = JobRunning, "waiting for "+strings.Join(waiting, ", ")
	}
	return rec
}

// startJob stores a new running job and answers 202 with it.
func (s *Server) startJob(c *call, kind string, obj objectRef) (int, any, error) {
	rec, err := s.createJob(c, kind, obj, nil)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusAccepted, rec.Job, nil
}

// createJob stores a new running job (or finds the running one of the same
// kind on the same object: a repeat) and sets Location to it.
func (s *Server) createJob(c *call, kind string, obj objectRef, sdsIDs []string) (jobRecord, error) {
	w, err := c.world()
	if err != nil {
		return jobRecord{}, err
	}
	jobs, err := s.loadJobs(c.ctx)
	if err != nil {
		return jobRecord{}, err
	}
	for _, r := range jobs {
		if r.Kind == kind && r.Object.ID == obj.ID && (r.State == JobRunning || r.State == JobQueued) {
			c.w.Header().Set("Location", APIPrefix+"/jobs/"+r.ID)
			return r, nil
		}
	}
	now := time.Now().UTC()
	rec := jobRecord{Job: Job{ID: model.NewID(), Kind: kind, Object: obj, State: JobRunning, User: c.user.Name, Created: now, Updated: now}, SDSIDs: sdsIDs}
	rec = w.progress(rec, now)
	b, _ := json.Marshal(rec)
	if _, err := s.cfg.Etcd.Put(c.ctx, model.JobKey(rec.ID), string(b)); err != nil {
		return jobRecord{}, fmt.Errorf("store job: %v: %w", err, model.ErrUnavailable)
	}
	c.w.Header().Set("Location", APIPrefix+"/jobs/"+rec.ID)
	return rec, nil
}

// loadJobs reads every job with its mod revision.
func (s *Server) loadJobs(ctx context.Context) (map[int64]jobRecord, error) {
	r, err := s.cfg.Etcd.Get(ctx, model.JobPrefix, clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("read jobs: %v: %w", err, model.ErrUnavailable)
	}
	out := map[int64]jobRecord{}
	for _, kv := range r.Kvs {
		var rec jobRecord
		if err := json.Unmarshal(kv.Value, &rec); err != nil {
			return nil, fmt.Errorf("decode %s: %w", kv.Key, err)
		}
		out[kv.ModRevision] = rec
	}
	return out, nil
}

// refreshJobs brings every running job up to date with w and prunes old
// finished ones; it returns the jobs as they are now.
func (s *Server) refreshJobs(ctx context.Context, w *world) ([]Job, error) {
	jobs, err := s.loadJobs(ctx)
	if err != nil {
		return nil, err
	}
	now := time.Now().UTC()
	var out []Job
	var finished []jobRecord
	for rev, rec := range jobs {
		if rec.State == JobRunning || rec.State == JobQueued {
			next := w.progress(rec, now)
			if next.State != rec.State || next.Percent != rec.Percent || next.Message != rec.Message {
				next.Updated = now
				if ok, err := s.writeJob(ctx, next, rev); err != nil {
					return nil, err
				} else if ok {
					rec = next
				}
			}
		}
		out = append(out, rec.Job)
		if rec.State == JobSucceeded || rec.State == JobFailed {
			finished = append(finished, rec)
		}
	}
	sort.Slice(finished, func(i, j int) bool { return finished[i].Updated.After(finished[j].Updated) })
	for i, rec := range finished {
		if i >= jobMaxKept || now.Sub(rec.Updated) > jobKeep {
			s.cfg.Etcd.Delete(ctx, model.JobKey(rec.ID))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Created.After(out[j].Created) })
	return out, nil
}

// writeJob stores rec unless the job changed since rev (then another
// gateway did it: false). A job's end is an event, in the same transaction.
// extra ops go into the same transaction.
func (s *Server) writeJob(ctx context.Context, rec jobRecord, rev int64, extra ...clientv3.Op) (bool, error) {
	b, _ := json.Marshal(rec)
	cmps := []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(model.JobKey(rec.ID)), "=", rev)}
	ops := append([]clientv3.Op{clientv3.OpPut(model.JobKey(rec.ID), string(b))}, extra...)
	if rec.State == JobSucceeded || rec.State == JobFailed {
		sev := SeverityInfo
		if rec.State == JobFailed {
			sev = SeverityWarning
		}
		obj := rec.Object
		return s.commitEvent(ctx, Event{Severity: sev, Kind: EventState, Object: &obj, Message: fmt.Sprintf("job %s (%s): %s", rec.ID, rec.Kind, rec.Message)}, cmps, ops)
	}
	r, err := s.cfg.Etcd.Txn(ctx).If(cmps...).Then(ops...).Commit()
	if err != nil {
		return false, fmt.Errorf("update job %s: %v: %w", rec.ID, err, model.ErrUnavailable)
	}
	return r.Succeeded, nil
}

func (s *Server) listJobs(c *call) (int, any, error) {
	q := c.r.URL.Query()
	for p := range q {
		if p != "state" && p != "kind" && p != "object" {
			return 0, nil, model.WithField(errorf(http.StatusBadRequest, "unknown filter %q on /jobs; it accepts: kind, object, state", p), queryField(p))
		}
	}
	w, err := c.world()
	if err != nil {
		return 0, nil, err
	}
	jobs, err := s.refreshJobs(c.ctx, w)
	if err != nil {
		return 0, nil, err
	}
	out := []Job{}
	for _, j := range jobs {
		if (q.Has("state") && j.State != q.Get("state")) || (q.Has("kind") && j.Kind != q.Get("kind")) ||
			(q.Has("object") && j.Object.ID != q.Get("object") && j.Object.Name != q.Get("object")) {
			continue
		}
		out = append(out, j)
	}
	return http.StatusOK, out, nil
}

func (s *Server) getJob(c *call) (int, any, error) {
	id := c.r.PathValue("id")
	w, err := c.world()
	if err != nil {
		return 0, nil, err
	}
	jobs, err := s.refreshJobs(c.ctx, w)
	if err != nil {
		return 0, nil, err
	}
	for _, j := range jobs {
		if j.ID == id {
			return http.StatusOK, j, nil
		}
	}
	return 0, nil, model.WithField(errorf(http.StatusNotFound, "job %q not found (finished jobs are kept 7 days); list them with GET /api/v1/jobs", id), "id")
}

// removeSDS starts the drain-and-remove of an SDS (a job).
func (s *Server) removeSDS(c *call) (int, any, error) {
	return s.drainJob(c, JobSDSRemove, model.KindSDS, func() (string, string, error) {
		x, err := s.store.RemoveSDS(c.ctx, c.ref())
		return x.ID, x.Name, err
	})
}

// removeDevice starts the drain-and-remove of a device (a job).
func (s *Server) removeDevice(c *call) (int, any, error) {
	return s.drainJob(c, JobDeviceRemove, model.KindDevice, func() (string, string, error) {
		d, err := s.store.RemoveDevice(c.ctx, c.ref())
		return d.ID, d.Name, err
	})
}

// drainJob takes an optional empty body, sets the object removing and
// answers the job that follows its drain.
func (s *Server) drainJob(c *call, kind, objKind string, remove func() (id, name string, err error)) (int, any, error) {
	if err := c.decodeOptional(&struct{}{}); err != nil {
		return 0, nil, err
	}
	id, name, err := remove()
	if err != nil {
		return 0, nil, err
	}
	c.object = &objectRef{Kind: objKind, ID: id, Name: name}
	return s.startJob(c, kind, *c.object)
}
