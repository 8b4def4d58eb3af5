// Package maintenance rolls ESXi hosts through maintenance without losing
// Cairn's redundancy: one host (or one fault set) at a time, check health →
// SDS maintenance → shut down the SVM → host maintenance mode → patch
// (a hook command or the operator) → exit → power on the SVM → leave SDS
// maintenance → wait for resync → next. It stops at the first anomaly with
// a message that says what to do, and resumes from where it stopped.
package maintenance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25"

	"github.com/cairn-storage/cairn/vcenter-plugin/internal/gateway"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/inventory"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/plan"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/progress"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/statefile"
)

// Grouping of hosts into maintenance units.
const (
	ByHost     = "host"
	ByFaultSet = "faultset"
)

// Request describes one roll (JSON of the plugin's REST API).
type Request struct {
	By    string   `json:"by"`              // host | faultset
	Mode  string   `json:"mode,omitempty"`  // instant | protected; default: the plan's, else instant
	Hosts []string `json:"hosts,omitempty"` // hosts to roll, in order; default: every plan host
	// Hook, when set, is the patch command run for each unit with
	// CAIRN_HOSTS (space-separated ESXi hosts) in its environment; without
	// it the roll waits for the operator to Continue.
	Hook []string `json:"hook,omitempty"`
}

// Patcher patches the hosts of one unit while they are in maintenance mode.
type Patcher func(ctx context.Context, hosts []string) error

// Engine runs rolls. One roll per system at a time.
type Engine struct {
	VC       *vim25.Client
	API      gateway.API
	Log      *progress.Log
	StateDir string
	// Patch overrides Request.Hook and the operator step (tests, Go callers).
	Patch           Patcher
	ShutdownTimeout time.Duration // guest shutdown; default 10 min
	ReadyTimeout    time.Duration // SVM back and ready; default 15 min
	ResyncTimeout   time.Duration // health ok after leaving SDS maintenance; default 6 h
	HookTimeout     time.Duration // default 4 h
	PollInterval    time.Duration // default 5 s

	mu        sync.Mutex
	continue_ map[string]chan struct{} // job -> operator confirmation
	running   map[string]*stopper      // system -> the running roll's stop switch
}

func (e *Engine) defaults() {
	if e.Log == nil {
		e.Log = progress.NewLog(1000, nil)
	}
	if e.ShutdownTimeout == 0 {
		e.ShutdownTimeout = 10 * time.Minute
	}
	if e.ReadyTimeout == 0 {
		e.ReadyTimeout = 15 * time.Minute
	}
	if e.ResyncTimeout == 0 {
		e.ResyncTimeout = 6 * time.Hour
	}
	if e.HookTimeout == 0 {
		e.HookTimeout = 4 * time.Hour
	}
	if e.PollInterval == 0 {
		e.PollInterval = 5 * time.Second
	}
}

// Job is the progress job name of a roll.
func Job(system string) string { return "maintenance:" + system }

// StateVersion of the roll state file <StateDir>/maintenance-<system>.json:
//
//	{"version":1,"system":"cairn1","request":{…},"units":[["esx-01"],["esx-02"]],
//	 "done_units":1,"done_steps":["health","sds-maintenance"],"completed":false,"last_error":"…"}
//
// done_steps are the finished steps of unit done_units (the current one).
const StateVersion = 1

type State struct {
	Version   int        `json:"version"`
	System    string     `json:"system"`
	Request   Request    `json:"request"`
	Units     [][]string `json:"units"`
	DoneUnits int        `json:"done_units"`
	DoneSteps []string   `json:"done_steps"`
	Completed bool       `json:"completed"`
	LastError string     `json:"last_error,omitempty"`
	// Stopped: the operator stopped the roll (Stop); a run with the same
	// request resumes it at unit done_units.
	Stopped bool `json:"stopped,omitempty"`
	// Unpatched lists the units a stop brought back before their patch
	// step: the roll counts them as done, so roll them again later.
	Unpatched [][]string `json:"unpatched,omitempty"`
	// Stopping: a stop is bringing unit done_units back; a resume
	// carries on with that, never with the unit's remaining steps.
	Stopping bool `json:"stopping,omitempty"`
}

func statePath(dir, system string) string { return filepath.Join(dir, "maintenance-"+system+".json") }

func (s *State) save(dir string) error {
	if err := statefile.WriteJSON(statePath(dir, s.System), s); err != nil {
		return fmt.Errorf("write maintenance state: %w", err)
	}
	return nil
}

// LoadState returns the roll state of system (nil if none).
func LoadState(dir, system string) (*State, error) {
	b, err := os.ReadFile(statePath(dir, system))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var s State
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("maintenance state %s is damaged: %w", statePath(dir, system), err)
	}
	if s.Version != StateVersion {
		return nil, fmt.Errorf("maintenance state %s has version %d, this plugin reads %d", statePath(dir, system), s.Version, StateVersion)
	}
	return &s, nil
}

// Units groups the plan's hosts as req asks, in order.
func Units(p *plan.Plan, req Request) ([][]string, error) {
	hosts := req.Hosts
	if len(hosts) == 0 {
		for _, h := range p.Hosts {
			hosts = append(hosts, h.Name)
		}
	}
	byName := map[string]*plan.Host{}
	for i := range p.Hosts {
		byName[p.Hosts[i].Name] = &p.Hosts[i]
	}
	var units [][]string
	index := map[string]int{}
	for _, name := range hosts {
		h := byName[name]
		if h == nil {
			return nil, fmt.Errorf("host %s is not part of system %s", name, p.System)
		}
		switch req.By {
		case ByHost, "":
			units = append(units, []string{name})
		case ByFaultSet:
			if h.FaultSet == "" {
				return nil, fmt.Errorf("host %s has no fault set: roll by host", name)
			}
			if i, ok := index[h.FaultSet]; ok {
				units[i] = append(units[i], name)
				continue
			}
			index[h.FaultSet] = len(units)
			units = append(units, []string{name})
		default:
			return nil, fmt.Errorf("group by %q: use host or faultset", req.By)
		}
	}
	return units, nil
}

// Continue confirms the operator's patch step of the running roll.
func (e *Engine) Continue(system string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	ch := e.continue_[system]
	if ch == nil {
		return fmt.Errorf("the roll of %s is not waiting for the operator", system)
	}
	close(ch)
	delete(e.continue_, system)
	return nil
}

type roll struct {
	*Engine
	api    gateway.API
	p      *plan.Plan
	st     *State
	job    string
	mode   string
	finder *find.Finder
	hosts  map[string]*object.HostSystem
	vc     progress.VCenter
	stop   *stopper
}

// Run starts or resumes the roll of p's system. A finished roll's state
// is replaced by req; an unfinished one is resumed (req must match).
func (e *Engine) Run(ctx context.Context, p *plan.Plan, req Request) error {
	return e.RunWith(ctx, e.VC, e.API, p, req)
}

// RunWith is Run with the vCenter session and gateway of one caller (the
// plugin server runs each roll under the session of the user who asked).
func (e *Engine) RunWith(ctx context.Context, vcc *vim25.Client, api gateway.API, p *plan.Plan, req Request) (err error) {
	e.defaults()
	if e.StateDir == "" {
		return errors.New("maintenance: no state directory configured")
	}
	st, err := LoadState(e.StateDir, p.System)
	if err != nil {
		return err
	}
	if st == nil || st.Completed {
		units, err := Units(p, req)
		if err != nil {
			return err
		}
		st = &State{Version: StateVersion, System: p.System, Request: req, Units: units}
	} else {
		a, _ := json.Marshal(st.Request)
		b, _ := json.Marshal(req)
		if string(a) != string(b) {
			return fmt.Errorf("an unfinished roll of %s exists with other settings: resume it with the same request, or remove %s", p.System, statePath(e.StateDir, p.System))
		}
	}
	stop, err := e.register(p.System)
	if err != nil {
		return err
	}
	defer e.unregister(p.System)
	st.Stopped = false
	r := &roll{Engine: e, api: api, p: p, st: st, job: Job(p.System), vc: progress.VCenter{C: vcc}, stop: stop}
	r.mode = req.Mode
	if r.mode == "" {
		r.mode = p.MaintenanceMode
	}
	if r.mode == "" {
		r.mode = gateway.MaintenanceInstant
	}
	var names []string
	for _, h := range p.Hosts {
		names = append(names, h.Name)
	}
	loc, err := inventory.Locate(ctx, vcc, p.Datacenter, names)
	if err != nil {
		return err
	}
	r.finder, r.hosts = loc.Finder, loc.Hosts
	if t, terr := r.vc.StartTask(ctx, r.hosts[p.Hosts[0].Name].Reference(), progress.TaskMaintenance); terr == nil {
		defer func() { progress.EndTask(context.WithoutCancel(ctx), t, err) }()
	}
	defer func() {
		if errors.Is(err, ErrStopped) {
			st.LastError, st.Stopped = "", true
			e.Log.Emit(r.job, progress.Warn, "roll", "", "%v", err)
		} else if err != nil {
			st.LastError = err.Error()
			e.Log.Emit(r.job, progress.Error, "roll", "", "rolling maintenance stopped: %v", err)
		} else {
			st.LastError = ""
		}
		if serr := st.save(e.StateDir); serr != nil && err == nil {
			err = serr
		}
	}()
	for st.DoneUnits < len(st.Units) {
		unit := st.Units[st.DoneUnits]
		if err := r.unit(ctx, unit); err != nil {
			return fmt.Errorf("hosts %s: %w", strings.Join(unit, ", "), err)
		}
		st.DoneUnits++
		st.DoneSteps = nil
		if err := st.save(e.StateDir); err != nil {
			return err
		}
		if r.stop.requested() {
			st.Completed = st.DoneUnits == len(st.Units)
			return r.stopped(unit)
		}
	}
	st.Completed = true
	e.Log.Emit(r.job, progress.Info, "roll", "", "rolling maintenance of %d unit(s) complete", len(st.Units))
	return nil
}

func (r *roll) info(step string, hosts []string, f string, a ...any) {
	msg := fmt.Sprintf(f, a...)
	r.Log.Emit(r.job, progress.Info, step, strings.Join(hosts, ","), "%s", msg)
	for _, h := range hosts {
		_ = r.vc.Event(context.Background(), r.hosts[h].Reference(), "maintenance: "+msg)
	}
}

func (r *roll) done(step string) bool {
	for _, s := range r.st.DoneSteps {
		if s == step {
			return true
		}
	}
	return false
}

func (r *roll) mark(step string) error {
	r.st.DoneSteps = append(r.st.DoneSteps, step)
	return r.st.save(r.StateDir)
}

func (r *roll) planHost(name string) *plan.Host {
	for i := range r.p.Hosts {
		if r.p.Hosts[i].Name == name {
			return &r.p.Hosts[i]
		}
	}
	return nil
}

// unit runs the steps for one host or fault set (one method each, in
// steps.go); each step is skipped when the state says it is done, and is
// itself safe to repeat. Step names are stored (done_steps): they never
// change.
func (r *roll) unit(ctx context.Context, unit []string) error {
	steps := []struct {
		name string
		f    func(context.Context, []string) error
	}{
		{"health", r.health},
		{"sds-maintenance", r.enterSDS},
		{"svm-shutdown", r.shutdownSVM},
		{"host-maintenance", r.enterHost},
		{"patch", r.patch},
		{"host-exit", r.exitHost},
		{"svm-power-on", r.powerOnSVM},
		{"sds-exit", r.exitSDS},
		{"resync", r.resync},
	}
	if r.st.Stopping {
		return r.stopUnit(ctx, unit, "")
	}
	for _, s := range steps {
		if r.done(s.name) {
			continue
		}
		if r.stop.requested() {
			return r.stopUnit(ctx, unit, "")
		}
		cut := r.interruptible(s.name)
		r.stop.at(unit, s.name, r.st.DoneSteps, cut)
		r.info(s.name, unit, "%s: started", s.name)
		sctx, cancel := ctx, context.CancelFunc(func() {})
		if cut {
			sctx, cancel = r.stop.context(ctx)
		}
		err := s.f(sctx, unit)
		cancel()
		if err != nil && cut && r.stop.requested() && ctx.Err() == nil {
			return r.stopUnit(ctx, unit, s.name)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
		if err := r.mark(s.name); err != nil {
			return err
		}
		r.info(s.name, unit, "%s: done", s.name)
	}
	return nil
}
