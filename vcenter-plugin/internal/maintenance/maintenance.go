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
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cairn-storage/cairn/vcenter-plugin/internal/deploy"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/gateway"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/inventory"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/plan"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/poll"
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
	r := &roll{Engine: e, api: api, p: p, st: st, job: Job(p.System), vc: progress.VCenter{C: vcc}}
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
		if err != nil {
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

// unit runs the steps for one host or fault set; each step is skipped when
// the state says it is done, and is itself safe to repeat.
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
	for _, s := range steps {
		if r.done(s.name) {
			continue
		}
		r.info(s.name, unit, "%s: started", s.name)
		if err := s.f(ctx, unit); err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
		if err := r.mark(s.name); err != nil {
			return err
		}
		r.info(s.name, unit, "%s: done", s.name)
	}
	return nil
}

func (r *roll) sdsOf(unit []string) []string {
	var out []string
	for _, h := range unit {
		if ph := r.planHost(h); ph != nil && ph.Has(plan.RoleSDS) {
			out = append(out, deploy.SDSName(h))
		}
	}
	return out
}

func (r *roll) svmsOf(ctx context.Context, unit []string) ([]*object.VirtualMachine, error) {
	var out []*object.VirtualMachine
	for _, h := range unit {
		ph := r.planHost(h)
		if ph == nil || !ph.HasSVM() {
			continue
		}
		vm, err := r.finder.VirtualMachine(ctx, r.p.SVMName(h))
		if err != nil {
			return nil, fmt.Errorf("SVM of %s: %w", h, err)
		}
		out = append(out, vm)
	}
	return out, nil
}

// health refuses to take anything away from a cluster that is not whole.
func (r *roll) health(ctx context.Context, unit []string) error {
	sys, err := r.api.System(ctx)
	if err != nil {
		return fmt.Errorf("cannot read cluster health: %w", err)
	}
	if sys.Health.Status != gateway.HealthOK {
		return fmt.Errorf("cluster health is %q (%s): wait until it is ok (or fix it), then resume", sys.Health.Status, strings.Join(sys.Health.Messages, "; "))
	}
	sdss, err := r.api.ListSDS(ctx)
	if err != nil {
		return err
	}
	for _, s := range sdss {
		if s.State != gateway.SDSNormal {
			return fmt.Errorf("sds %s is in state %s: take it out of maintenance first, then resume", s.Name, s.State)
		}
	}
	for name, hs := range r.hosts {
		var m mo.HostSystem
		if err := hs.Properties(ctx, hs.Reference(), []string{"runtime"}, &m); err != nil {
			return err
		}
		if m.Runtime.ConnectionState != types.HostSystemConnectionStateConnected {
			return fmt.Errorf("host %s is %s: reconnect it, then resume", name, m.Runtime.ConnectionState)
		}
		if m.Runtime.InMaintenanceMode {
			return fmt.Errorf("host %s is already in maintenance mode: exit it (or finish its work), then resume", name)
		}
	}
	return r.checkMultipath(ctx)
}

func (r *roll) enterSDS(ctx context.Context, unit []string) error {
	for _, name := range r.sdsOf(unit) {
		s, err := r.api.GetSDS(ctx, name)
		if err != nil {
			return err
		}
		if s.State != gateway.SDSNormal {
			continue // entered before a resume
		}
		if err := r.api.EnterSDSMaintenance(ctx, s.ID, r.mode); err != nil {
			return fmt.Errorf("sds %s: enter %s maintenance: %w", name, r.mode, err)
		}
	}
	// Protected maintenance copies data away first: wait for the gateway
	// to report the SDSs in maintenance.
	return poll.Until(ctx, r.ResyncTimeout, r.PollInterval, "check the gateway's events for why the SDS cannot leave", func() (bool, string, error) {
		for _, name := range r.sdsOf(unit) {
			s, err := r.api.GetSDS(ctx, name)
			if err != nil {
				return false, "", err
			}
			if s.State == gateway.SDSNormal {
				return false, "sds " + name + " has not entered maintenance", nil
			}
			// Shutting the SVM down is safe only once the leader has
			// moved every copy away from it (protected mode builds
			// extra copies first).
			if m := s.Maintenance; m != nil && m.Mode != "" && m.State != gateway.MaintIn {
				return false, fmt.Sprintf("sds %s is still %s maintenance (%s): its copies are being moved", name, m.State, m.Mode), nil
			}
		}
		return true, "", nil
	})
}

func (r *roll) shutdownSVM(ctx context.Context, unit []string) error {
	vms, err := r.svmsOf(ctx, unit)
	if err != nil {
		return err
	}
	for _, vm := range vms {
		g, err := deploy.ReadGuest(ctx, vm)
		if err != nil {
			return err
		}
		if g.PowerState == types.VirtualMachinePowerStatePoweredOff {
			continue
		}
		if err := vm.ShutdownGuest(ctx); err != nil {
			return fmt.Errorf("shut down %s: %w (are VMware Tools running in it?)", vm.Name(), err)
		}
	}
	for _, vm := range vms {
		if err := poll.Until(ctx, r.ShutdownTimeout, r.PollInterval, "power it off from vCenter once its guest is idle, then resume", func() (bool, string, error) {
			g, err := deploy.ReadGuest(ctx, vm)
			return g.PowerState == types.VirtualMachinePowerStatePoweredOff, vm.Name() + " is still " + string(g.PowerState), err
		}); err != nil {
			return err
		}
	}
	return nil
}

func (r *roll) enterHost(ctx context.Context, unit []string) error {
	for _, h := range unit {
		task, err := r.hosts[h].EnterMaintenanceMode(ctx, int32(r.ShutdownTimeout.Seconds()), false, nil)
		if err != nil {
			return err
		}
		if err := task.Wait(ctx); err != nil {
			return fmt.Errorf("host %s: enter maintenance mode: %w (move or power off its other VMs, then resume)", h, err)
		}
	}
	return nil
}

func (r *roll) patch(ctx context.Context, unit []string) error {
	switch {
	case r.Patch != nil:
		return r.Patch(ctx, unit)
	case len(r.st.Request.Hook) > 0:
		hctx, cancel := context.WithTimeout(ctx, r.HookTimeout)
		defer cancel()
		cmd := exec.CommandContext(hctx, r.st.Request.Hook[0], r.st.Request.Hook[1:]...)
		cmd.Env = append(os.Environ(), "CAIRN_HOSTS="+strings.Join(unit, " "), "CAIRN_SYSTEM="+r.p.System)
		out, err := cmd.CombinedOutput()
		if err != nil {
			tail := string(out)
			if len(tail) > 500 {
				tail = tail[len(tail)-500:]
			}
			return fmt.Errorf("patch hook %s failed: %v: %s — the hosts stay in maintenance mode; fix them, then resume", r.st.Request.Hook[0], err, strings.TrimSpace(tail))
		}
		return nil
	default:
		ch := make(chan struct{})
		r.mu.Lock()
		if r.continue_ == nil {
			r.continue_ = map[string]chan struct{}{}
		}
		r.continue_[r.p.System] = ch
		r.mu.Unlock()
		r.info("patch", unit, "waiting for the operator: patch and reboot %s, then press Continue", strings.Join(unit, ", "))
		select {
		case <-ch:
			return nil
		case <-ctx.Done():
			r.mu.Lock()
			delete(r.continue_, r.p.System)
			r.mu.Unlock()
			return ctx.Err()
		}
	}
}

func (r *roll) exitHost(ctx context.Context, unit []string) error {
	for _, h := range unit {
		var m mo.HostSystem
		if err := r.hosts[h].Properties(ctx, r.hosts[h].Reference(), []string{"runtime"}, &m); err != nil {
			return err
		}
		if m.Runtime.ConnectionState != types.HostSystemConnectionStateConnected {
			return fmt.Errorf("host %s is %s after patching: wait for it to reconnect to vCenter, then resume", h, m.Runtime.ConnectionState)
		}
		if !m.Runtime.InMaintenanceMode {
			continue
		}
		task, err := r.hosts[h].ExitMaintenanceMode(ctx, int32(r.ShutdownTimeout.Seconds()))
		if err != nil {
			return err
		}
		if err := task.Wait(ctx); err != nil {
			return fmt.Errorf("host %s: exit maintenance mode: %w", h, err)
		}
	}
	return nil
}

// powerOnSVM starts the SVMs and waits for them. Resuming after an SVM
// that did not come back resets it once, since the roll shut it down.
func (r *roll) powerOnSVM(ctx context.Context, unit []string) error {
	vms, err := r.svmsOf(ctx, unit)
	if err != nil {
		return err
	}
	resumed := r.st.LastError != ""
	for _, vm := range vms {
		g, err := deploy.ReadGuest(ctx, vm)
		if err != nil {
			return err
		}
		switch {
		case g.PowerState != types.VirtualMachinePowerStatePoweredOn:
			task, err := vm.PowerOn(ctx)
			if err != nil {
				return err
			}
			if err := task.Wait(ctx); err != nil {
				return fmt.Errorf("power on %s: %w", vm.Name(), err)
			}
		case resumed && g.Values[deploy.GuestReady] != deploy.ReadyValue:
			r.info("svm-power-on", unit, "resetting %s, which did not come back before", vm.Name())
			task, err := vm.Reset(ctx)
			if err != nil {
				return err
			}
			if err := task.Wait(ctx); err != nil {
				return fmt.Errorf("reset %s: %w", vm.Name(), err)
			}
		}
	}
	for _, vm := range vms {
		if _, err := deploy.WaitReady(ctx, vm, r.ReadyTimeout, r.PollInterval); err != nil {
			return fmt.Errorf("the SVM did not come back: %w (its SDS stays in maintenance, so no data moves meanwhile)", err)
		}
	}
	return nil
}

func (r *roll) exitSDS(ctx context.Context, unit []string) error {
	for _, name := range r.sdsOf(unit) {
		s, err := r.api.GetSDS(ctx, name)
		if err != nil {
			return err
		}
		if s.State == gateway.SDSNormal {
			continue
		}
		if err := r.api.ExitSDSMaintenance(ctx, s.ID); err != nil {
			return fmt.Errorf("sds %s: leave maintenance: %w", name, err)
		}
	}
	return nil
}

// resync waits until the cluster is whole again: health ok and every
// SDS up and normal. (The gateway does not report resync progress yet;
// health ok is its "all copies protected".)
func (r *roll) resync(ctx context.Context, unit []string) error {
	return poll.Until(ctx, r.ResyncTimeout, r.PollInterval, "check the SDSs of these hosts in the Cairn dashboard; resume once health is ok", func() (bool, string, error) {
		sys, err := r.api.System(ctx)
		if err != nil {
			return false, "", err
		}
		if sys.Health.Status != gateway.HealthOK {
			return false, fmt.Sprintf("cluster health %q (%s)", sys.Health.Status, strings.Join(sys.Health.Messages, "; ")), nil
		}
		sdss, err := r.api.ListSDS(ctx)
		if err != nil {
			return false, "", err
		}
		for _, s := range sdss {
			if s.State != gateway.SDSNormal || !s.Up {
				return false, fmt.Sprintf("sds %s is %s (up=%v)", s.Name, s.State, s.Up), nil
			}
		}
		return true, "", nil
	})
}
