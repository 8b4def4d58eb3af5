// Package deploy executes a Cairn deployment plan through vCenter and the
// gateway: one SVM per host cloned from the template onto the host's local
// datastore with its vApp properties and devices, powered on and awaited;
// the cluster bootstrapped through the gateway; every host's software
// iSCSI wired to every SVM. It is idempotent and resumable: each step
// checks what exists, and a state file keeps the secrets and progress.
//
// Files: engine.go runs steps and holds their order (Deploy);
// svmsteps.go, clustersteps.go and iscsistep.go are the steps, one
// method each; svm.go reads and edits VMs; state.go is the state file.
package deploy

import (
	"context"
	"errors"
	"fmt"
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
)

// GatewayFactory returns a client for the gateway described by cfg. The
// production factory is gateway.NewHTTPClient; tests return a fake.
type GatewayFactory func(cfg gateway.Config) (gateway.API, error)

// HTTPGateway is the production GatewayFactory.
func HTTPGateway(cfg gateway.Config) (gateway.API, error) { return gateway.NewHTTPClient(cfg) }

// Engine deploys plans. Fields with zero values get the defaults noted.
type Engine struct {
	VC       *vim25.Client
	Gateway  GatewayFactory // default HTTPGateway
	StateDir string         // where deploy-<system>.json lives; required
	Log      *progress.Log  // default: a private log
	// ReadyTimeout bounds the wait for one SVM, and for the gateway to answer.
	ReadyTimeout time.Duration // default 15 min
	PollInterval time.Duration // default 2 s
	GatewayPort  int           // default 8443
	SDSPort      int           // SDS data-path port; default 7100 (cairn sds --listen)
	// DevicePath maps a plan device to the path the SDS opens in the SVM.
	// Default: an RDM shows the disk's own identity, so
	// /dev/disk/by-id/wwn-0x<naa>; a passthrough device's path is what
	// the SVM publishes as guestinfo.cairn.passthrough.<pci id>.
	DevicePath func(host string, d plan.Device, guest map[string]string) (string, error)
	// Parallel bounds the new hosts an expansion deploys at once; default 4.
	Parallel int
	// DataTimeout bounds the wait for the cluster to move data: the
	// rebalance after an expansion, an SDS drain; default 12 h.
	DataTimeout time.Duration
	// UpgradeTimeout bounds the wait for one SVM's updater to carry out an
	// upgrade order (install, restart every unit, check it); default 15 min.
	UpgradeTimeout time.Duration
	// UpgradeStop, when set and true, stops a rolling upgrade before its
	// next unit (ErrUpgradeStoppedByOperator): the operator's stop switch.
	UpgradeStop func() bool
	// RebalanceQuiet is how long nothing may move before a rebalance counts
	// as done; default 6 s: longer than the MDM leader's periodic reconcile
	// (5 s), which starts the next wave of moves if any is left.
	RebalanceQuiet time.Duration
	// SavePlan, when set, records a deployed system's plan after an
	// expansion or a host removal (the plugin server's plan-<system>.json),
	// just before the state file ends the change.
	SavePlan func(*plan.Plan) error
}

func (e *Engine) defaults() {
	if e.Gateway == nil {
		e.Gateway = HTTPGateway
	}
	if e.Log == nil {
		e.Log = progress.NewLog(1000, nil)
	}
	if e.ReadyTimeout == 0 {
		e.ReadyTimeout = 15 * time.Minute
	}
	if e.PollInterval == 0 {
		e.PollInterval = 2 * time.Second
	}
	if e.GatewayPort == 0 {
		e.GatewayPort = 8443
	}
	if e.SDSPort == 0 {
		e.SDSPort = 7100
	}
	if e.DevicePath == nil {
		e.DevicePath = DefaultDevicePath
	}
	if e.Parallel <= 0 {
		e.Parallel = 4
	}
	if e.DataTimeout == 0 {
		e.DataTimeout = 12 * time.Hour
	}
	if e.UpgradeTimeout == 0 {
		e.UpgradeTimeout = 15 * time.Minute
	}
	if e.RebalanceQuiet == 0 {
		e.RebalanceQuiet = 6 * time.Second
	}
}

// DefaultDevicePath is Engine.DevicePath's default.
func DefaultDevicePath(host string, d plan.Device, guest map[string]string) (string, error) {
	if d.Mode == plan.ModePassthrough {
		p := guest[GuestPassthroughPrefix+d.PCI]
		if p == "" {
			return "", fmt.Errorf("the SVM on %s did not publish the guest path of passthrough device %s (%s%s): update the SVM image", host, d.PCI, GuestPassthroughPrefix, d.PCI)
		}
		return p, nil
	}
	return "/dev/disk/by-id/wwn-0x" + strings.TrimPrefix(d.Disk, "naa."), nil
}

// Job is the progress job name of a deployment.
func Job(system string) string { return "deploy:" + system }

// run carries one Deploy call.
type run struct {
	*Engine
	p       *plan.Plan
	st      *State
	job     string
	finder  *find.Finder
	dc      *object.Datacenter
	inv     *inventory.Inventory
	hosts   map[string]*object.HostSystem
	guest   map[string]GuestInfo // SVM guest info by ESXi host
	api     gateway.API          // set by connectGateway
	upgrade UpgradeRequest       // an upgrade's request (upgrade.go), recorded in its Change
	// mu guards st and guest when steps of several hosts run at once
	// (expand.go); a pointer, so per-host copies of the run share it.
	mu *sync.Mutex
}

// A step is one idempotent unit of the deployment: it checks what exists
// before it changes anything, so it is safe to repeat. Once it succeeds
// the state file records it under key and later runs skip it.
type step struct {
	// key names the step in the state file ("steps": {key: …}). Keys are
	// stored, so they never change: a renamed key would make an old state
	// file redo (or, for clone, re-find) that step. They are
	// svm/<host>/{clone,configure,power-on}, cluster/{admin,system,pd,pool},
	// cluster/faultset/<fault set>, cluster/{sds,devices}/<host> and
	// iscsi/<host>.
	key   string
	event string // the progress step the UI shows: clone, bootstrap, iscsi…
	host  string // the ESXi host the step works on; "" for the cluster
	do    func(context.Context) (detail string, err error)
	// resume, if set, runs instead of do when an earlier run did the
	// step: it re-reads what the later steps need (the cloned VM).
	resume func(context.Context) error
}

func (r *run) info(step, host, format string, args ...any) {
	r.Log.Emit(r.job, progress.Info, step, host, format, args...)
}

// runSteps runs steps in order and stops at the first that fails.
func (r *run) runSteps(ctx context.Context, steps []step) error {
	for _, s := range steps {
		if err := r.runStep(ctx, s); err != nil {
			return err
		}
	}
	return nil
}

// runStep runs s unless the state says it is done; marks it done and saves.
func (r *run) runStep(ctx context.Context, s step) error {
	r.mu.Lock()
	st, ok := r.st.Steps[s.key]
	r.mu.Unlock()
	if ok && st.Done {
		r.info(s.event, s.host, "%s: already done", s.key)
		if s.resume != nil {
			if err := s.resume(ctx); err != nil {
				return fmt.Errorf("%s: %w", s.key, err)
			}
		}
		return nil
	}
	r.info(s.event, s.host, "%s: started", s.key)
	detail, err := s.do(ctx)
	if err != nil {
		return fmt.Errorf("%s: %w", s.key, err)
	}
	r.mu.Lock()
	r.st.Steps[s.key] = StepState{Done: true, Time: time.Now().UTC(), Detail: detail}
	err = r.st.Save(r.StateDir)
	r.mu.Unlock()
	if err != nil {
		return err
	}
	r.info(s.event, s.host, "%s: done %s", s.key, detail)
	return nil
}

// Deploy runs (or resumes) the deployment of p. The order: for each host
// with an SVM, its steps (svmSteps) and then its readiness, checked on
// every run (awaitSVM); the gateway, once its admin password is set
// (connectGateway); the cluster's objects (clusterSteps); each host's
// iSCSI (iscsiSteps).
func (e *Engine) Deploy(ctx context.Context, p *plan.Plan) (err error) {
	e.defaults()
	if e.StateDir == "" {
		return errors.New("deploy: no state directory configured")
	}
	r := &run{Engine: e, p: p, job: Job(p.System), guest: map[string]GuestInfo{}, mu: &sync.Mutex{}}
	r.st, err = LoadState(e.StateDir, p)
	if err != nil {
		return err
	}
	if r.st.Completed {
		r.info("deploy", "", "system %s is already deployed", p.System)
		return nil
	}
	defer func() {
		if err != nil {
			r.st.LastError = err.Error()
			r.Log.Emit(r.job, progress.Error, "deploy", "", "deployment stopped: %v — fix the cause and run the deployment again: it resumes", err)
		} else {
			r.st.LastError = ""
			r.st.Completed = true
			r.info("deploy", "", "system %s deployed", p.System)
		}
		if serr := r.st.Save(e.StateDir); serr != nil && err == nil {
			err = serr
		}
	}()
	if err := r.st.Save(e.StateDir); err != nil {
		return err
	}
	vc := progress.VCenter{C: e.VC}

	r.inv, err = inventory.Collect(ctx, e.VC)
	if err != nil {
		return err
	}
	if err := plan.Validate(p, r.inv).Err(); err != nil {
		return err
	}
	loc, err := inventory.Locate(ctx, e.VC, p.Datacenter, hostNames(p))
	if err != nil {
		return err
	}
	r.finder, r.hosts, r.dc = loc.Finder, loc.Hosts, loc.Datacenter
	if t, terr := vc.StartTask(ctx, r.hosts[p.Hosts[0].Name].Reference(), progress.TaskDeploy); terr == nil {
		defer func() { progress.EndTask(context.WithoutCancel(ctx), t, err) }()
	}

	for i := range p.Hosts {
		h := &p.Hosts[i]
		if !h.HasSVM() {
			continue
		}
		s := r.newSVM(h)
		if err := r.runSteps(ctx, r.svmSteps(s)); err != nil {
			return err
		}
		if err := r.awaitSVM(ctx, s); err != nil {
			return err
		}
	}
	if err := r.connectGateway(ctx); err != nil {
		return err
	}
	if err := r.runSteps(ctx, r.clusterSteps()); err != nil {
		return err
	}
	if err := r.runSteps(ctx, r.iscsiSteps()); err != nil {
		return err
	}
	_ = vc.Event(ctx, r.hosts[p.Hosts[0].Name].Reference(), fmt.Sprintf("system %s deployed on %d hosts", p.System, len(p.Hosts)))
	return nil
}

func hostNames(p *plan.Plan) []string {
	var out []string
	for _, h := range p.Hosts {
		out = append(out, h.Name)
	}
	return out
}
