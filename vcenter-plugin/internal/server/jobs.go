// Background jobs (deploy, volume, maintenance: one of a name at a time)
// and their progress, listed and streamed as server-sent events.

package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"time"

	"github.com/cairn-storage/cairn/vcenter-plugin/internal/deploy"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/maintenance"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/progress"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/statefile"
)

// Job is a background operation's status (JSON in the API).
type Job struct {
	Name    string    `json:"name"`
	State   string    `json:"state"` // running | succeeded | failed | stopped (a maintenance roll or upgrade stopped by the operator) | interrupted (the server stopped)
	Error   string    `json:"error,omitempty"`
	Started time.Time `json:"started"`
	Ended   time.Time `json:"ended,omitzero"`
}

// The job list survives the plugin server (jobs.json in the state
// directory, written like every state file): a job that was running when
// the server stopped, or died, is listed as interrupted. Every engine
// keeps its steps in its own state file, so the same request resumes it.
const (
	jobsFileName   = "jobs.json"
	maxSavedJobs   = 200 // the newest; older ones are dropped from the file
	JobInterrupted = "interrupted"
	interruptedWhy = "the plugin server stopped while this job ran: start it again to resume it (the steps done are kept)"
)

// loadJobs reads the saved job list; a job still running in it was cut
// short. A missing file is an empty list; a damaged one is reported and
// set aside (the engines' own state files are what resume work).
func loadJobs(dir string, log *slog.Logger) map[string]*Job {
	out := map[string]*Job{}
	path := filepath.Join(dir, jobsFileName)
	data, err := os.ReadFile(path)
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			log.Warn("job list not read", "path", path, "err", err)
		}
		return out
	}
	var jobs []*Job
	if err := json.Unmarshal(data, &jobs); err != nil {
		log.Warn("job list damaged: starting an empty one", "path", path, "err", err)
		return out
	}
	for _, j := range jobs {
		if j == nil || j.Name == "" {
			continue
		}
		if j.State == "running" {
			j.State, j.Error = JobInterrupted, interruptedWhy
		}
		out[j.Name] = j
	}
	return out
}

// saveJobsLocked writes the job list, newest maxSavedJobs. Callers hold s.mu.
func (s *Server) saveJobsLocked() {
	jobs := make([]*Job, 0, len(s.jobs))
	for _, j := range s.jobs {
		jobs = append(jobs, j)
	}
	sort.Slice(jobs, func(a, b int) bool { return jobs[a].Started.After(jobs[b].Started) })
	if len(jobs) > maxSavedJobs {
		jobs = jobs[:maxSavedJobs]
	}
	if err := statefile.WriteJSON(filepath.Join(s.cfg.StateDir, jobsFileName), jobs); err != nil {
		s.cfg.Logger.Warn("job list not saved", "err", err)
	}
}

// start runs f as job name unless one of that name is running.
func (s *Server) start(name string, f func(ctx context.Context) error) (*Job, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if j := s.jobs[name]; j != nil && j.State == "running" {
		return nil, fmt.Errorf("job %s is already running", name)
	}
	j := &Job{Name: name, State: "running", Started: time.Now().UTC()}
	s.jobs[name] = j
	s.wg.Add(1)
	s.saveJobsLocked()
	go func() {
		defer s.wg.Done()
		err := f(s.ctx)
		s.mu.Lock()
		defer s.mu.Unlock()
		j.Ended = time.Now().UTC()
		switch {
		case errors.Is(err, maintenance.ErrStopped), errors.Is(err, deploy.ErrUpgradeStoppedByOperator):
			j.State, j.Error = "stopped", err.Error()
		case err != nil && s.ctx.Err() != nil:
			j.State, j.Error = JobInterrupted, interruptedWhy
		case err != nil:
			j.State, j.Error = "failed", err.Error()
		default:
			j.State = "succeeded"
		}
		s.saveJobsLocked()
	}()
	c := *j
	return &c, nil
}
func (s *Server) listJobs(w http.ResponseWriter, r *http.Request, us *userSession) {
	s.mu.Lock()
	out := make([]Job, 0, len(s.jobs))
	for _, j := range s.jobs {
		out = append(out, *j)
	}
	s.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Started.Before(out[j].Started) })
	writeJSON(w, http.StatusOK, out)
}

// events streams progress as server-sent events: first the buffered
// events after ?after=SEQ (or Last-Event-ID), then live ones, until the
// client goes away or the server closes. Each event's id is its Seq.
func (s *Server) events(w http.ResponseWriter, r *http.Request, us *userSession) {
	fl, ok := w.(http.Flusher)
	if !ok {
		writeError(w, http.StatusInternalServerError, "streaming unsupported")
		return
	}
	after, _ := strconv.ParseInt(r.URL.Query().Get("after"), 10, 64)
	if id := r.Header.Get("Last-Event-ID"); id != "" {
		after, _ = strconv.ParseInt(id, 10, 64)
	}
	job := r.URL.Query().Get("job")
	ch, cancel := s.cfg.Log.Subscribe()
	defer cancel()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	send := func(e progress.Event) {
		if e.Seq <= after || (job != "" && e.Job != job) {
			return
		}
		after = e.Seq
		b, _ := json.Marshal(e)
		fmt.Fprintf(w, "id: %d\nevent: progress\ndata: %s\n\n", e.Seq, b)
	}
	for _, e := range s.cfg.Log.Since(after, job) {
		send(e)
	}
	fl.Flush()
	keepalive := time.NewTicker(15 * time.Second)
	defer keepalive.Stop()
	for {
		select {
		case e := <-ch:
			send(e)
			fl.Flush()
		case <-keepalive.C:
			_, _ = io.WriteString(w, ": keepalive\n\n")
			fl.Flush()
		case <-r.Context().Done():
			return
		case <-s.ctx.Done():
			return
		}
	}
}
