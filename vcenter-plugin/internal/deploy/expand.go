// Changing a deployed system: Expand adds hosts (their SVMs deployed in
// parallel, each SDS with its devices, iSCSI wired everywhere, then the
// cluster's rebalance awaited); Shrink removes one host (its SDS drained
// by the gateway, its iSCSI unwired, its SVM deleted). Both are resumable
// like Deploy: every step is recorded in the state file and skipped once
// done, and State.Change holds the change until it ends.
//
// Step keys (stored; never renamed): a new host's steps are the deploy
// keys (svm/<host>/…, cluster/sds/<host>, cluster/devices/<host>,
// iscsi/<host>), so an expanded system's state reads like a deployment of
// its new plan; the change's own steps are expand/<id>/iscsi/<host> (a
// deployed host given the new targets), expand/<id>/svmrecord/<host> (a
// new host's SVM recorded in the model before it is deployed), expand/<id>/rebalance (<id>: the
// first 12 hex digits of the new plan's SHA-256), and
// shrink/<host>/{drain,svm,svmrecord} and shrink/<host>/iscsi/<host> (each host
// unwired). They are deleted when the change ends; a removed host's deploy
// keys too.
//
// Peer sync (docs/architecture.md): a new host's SVM is recorded in the
// system model (PUT /svms/{name}, step expand/<id>/svmrecord/<host>) before it
// is deployed, so the older SVMs' firewalls admit it and their targets list
// its port; a removed host's record is deleted after its SVM
// (shrink/<host>/svmrecord).

package deploy

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cairn-storage/cairn/vcenter-plugin/internal/gateway"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/hoststorage"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/inventory"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/plan"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/poll"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/progress"
)

// Change kinds.
const (
	ChangeExpand = "expand"
	ChangeShrink = "shrink"
)

// ExpandJob is the progress job name of an expansion.
func ExpandJob(system string) string { return "expand:" + system }

// ShrinkJob is the progress job name of a host removal.
func ShrinkJob(system, host string) string { return "shrink:" + system + ":" + host }

// loadChange loads the state of the deployed system into r and checks
// that no other change is in progress; resuming says the same change is.
func (e *Engine) loadChange(r *run, deployed, target *plan.Plan, kind string) (resuming bool, err error) {
	st, err := LoadState(e.StateDir, deployed)
	if err != nil {
		return false, err
	}
	if !st.Completed {
		return false, fmt.Errorf("system %s is not fully deployed: resume its deployment first, then change it", deployed.System)
	}
	r.st = st
	switch c := st.Change; {
	case c == nil:
		return false, nil
	case c.Kind == kind && c.PlanSHA256 == planHash(target):
		return true, nil
	default:
		what := "an expansion"
		switch c.Kind {
		case ChangeShrink:
			what = "the removal of host " + c.Host
		case ChangeReplace:
			what = "the replacement of failed host " + c.Host
		case ChangeUpgrade:
			what = "an upgrade to " + c.Version
		}
		return false, fmt.Errorf("system %s has %s in progress (since %s): send that request again to finish it (it resumes), then this one", deployed.System, what, c.Started.Format(time.RFC3339))
	}
}

// beginChange records the change to target in the state, or says it resumes.
func (r *run) beginChange(target *plan.Plan, kind, host string, resuming bool) error {
	if resuming {
		r.info(kind, host, "resuming the %s of system %s started %s", kind, r.st.System, r.st.Change.Started.Format(time.RFC3339))
		return nil
	}
	r.st.Change = &Change{Kind: kind, Host: host, PlanSHA256: planHash(target), Started: time.Now().UTC()}
	if kind == ChangeUpgrade {
		r.st.Change.Version, r.st.Change.Hosts = r.upgrade.Version, slices.Clone(r.upgrade.Hosts)
	}
	r.info(kind, host, "%s of system %s started", kind, r.st.System)
	return r.save()
}

func (r *run) save() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.st.Save(r.StateDir)
}

// endChange records target as the system's plan (SavePlan, then the
// state) and forgets the change's steps and, for a removal, the removed
// host's.
func (r *run) endChange(target *plan.Plan, removed string) error {
	if r.SavePlan != nil {
		if err := r.SavePlan(target); err != nil {
			return fmt.Errorf("save the plan of system %s: %w", target.System, err)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for k := range r.st.Steps {
		if strings.HasPrefix(k, ChangeExpand+"/") || strings.HasPrefix(k, ChangeShrink+"/") || strings.HasPrefix(k, ChangeReplace+"/") || strings.HasPrefix(k, ChangeUpgrade+"/") ||
			(removed != "" && (strings.HasPrefix(k, "svm/"+removed+"/") || k == "cluster/sds/"+removed || k == "cluster/devices/"+removed || k == "iscsi/"+removed)) {
			delete(r.st.Steps, k)
		}
	}
	if removed != "" {
		delete(r.st.GatewayThumbprints, removed)
	}
	r.st.PlanSHA256, r.st.Change, r.st.LastError, r.st.JoinTokenIDs = planHash(target), nil, "", nil
	return r.st.Save(r.StateDir)
}

// finish records how a change run ended.
func (r *run) finish(what string, err error) error {
	if r.st == nil {
		return err
	}
	if err != nil {
		r.mu.Lock()
		r.st.LastError = err.Error()
		if serr := r.st.Save(r.StateDir); serr != nil {
			err = errors.Join(err, serr)
		}
		r.mu.Unlock()
		r.Log.Emit(r.job, progress.Error, what, "", "%s stopped: %v — fix the cause and send the same request again: it resumes where it stopped", what, err)
		return err
	}
	r.info(what, "", "%s of system %s done", what, r.p.System)
	return nil
}

// fork is a copy of r for one host's steps run beside others': its own
// finder (a Finder caches lazily and is not safe for concurrent use), the
// state and guest info shared under r.mu.
func (r *run) fork() *run {
	c := *r
	c.finder = find.NewFinder(r.VC, true)
	c.finder.SetDatacenter(r.dc)
	return &c
}

func (e *Engine) newRun(p *plan.Plan, job string) *run {
	e.defaults()
	return &run{Engine: e, p: p, job: job, guest: map[string]GuestInfo{}, mu: &sync.Mutex{}}
}

// locate collects the inventory and finds the datacenter and p's hosts.
func (r *run) locate(ctx context.Context) error {
	var err error
	if r.inv, err = inventory.Collect(ctx, r.VC); err != nil {
		return err
	}
	loc, err := inventory.Locate(ctx, r.VC, r.p.Datacenter, hostNames(r.p))
	if err != nil {
		return err
	}
	r.finder, r.hosts, r.dc = loc.Finder, loc.Hosts, loc.Datacenter
	return nil
}

// targets are the iSCSI send targets of every target SVM of p.
func targets(p *plan.Plan) []string {
	var out []string
	for _, o := range p.Hosts {
		if o.Has(plan.RoleTarget) {
			out = append(out, fmt.Sprintf("%s:%d", hostPort(o.DataAddress()), hoststorage.DefaultISCSIPort))
		}
	}
	sort.Strings(out)
	return out
}

// Expand grows the deployed system (plan deployed) to p: the deployed plan
// with new hosts appended (plan.CheckExpand says what else is refused).
// The new hosts' SVMs are deployed Parallel at a time, each joining the
// cluster through its vApp properties (MDM members, gateways; new hosts
// are neither MDM members nor gateways, so they need no bootstrap token);
// their SDSs and devices are added, every host's iSCSI is given the new
// targets, and the rebalance the gateway's leader starts is awaited. On
// success the system's plan is p (SavePlan).
func (e *Engine) Expand(ctx context.Context, deployed, p *plan.Plan) (err error) {
	r := e.newRun(p, ExpandJob(p.System))
	if e.StateDir == "" {
		return errors.New("expand: no state directory configured")
	}
	if err := plan.CheckExpand(deployed, p).Err(); err != nil {
		return fmt.Errorf("expansion of system %s refused: %w", deployed.System, err)
	}
	resuming, err := e.loadChange(r, deployed, p, ChangeExpand)
	if err != nil {
		return err
	}
	if err := r.beginChange(p, ChangeExpand, "", resuming); err != nil {
		return err
	}
	defer func() { err = r.finish("expand", err) }()
	if err := r.locate(ctx); err != nil {
		return err
	}
	if err := plan.Validate(p, r.inv).Err(); err != nil {
		return err
	}
	vc := progress.VCenter{C: e.VC}
	added := plan.NewHosts(deployed, p)
	if t, terr := vc.StartTask(ctx, r.hosts[added[0].Name].Reference(), progress.TaskDeploy); terr == nil {
		defer func() { progress.EndTask(context.WithoutCancel(ctx), t, err) }()
	}
	if err := r.connectGateway(ctx); err != nil {
		return err
	}
	var fsSteps []step
	for _, fs := range p.FaultSets() {
		fsSteps = append(fsSteps, step{key: "cluster/faultset/" + fs, event: "bootstrap",
			do: func(ctx context.Context) (string, error) { return r.createFaultSet(ctx, fs) }})
	}
	if err := r.runSteps(ctx, fsSteps); err != nil {
		return err
	}

	// The new hosts, Parallel at a time; one failing does not stop the
	// others (their work is kept), and the run stops after all ended.
	r.info("expand", "", "adding %d host(s), %d at a time", len(added), e.Parallel)
	sem := make(chan struct{}, e.Parallel)
	errs := make([]error, len(added))
	var wg sync.WaitGroup
	for i, h := range added {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				errs[i] = ctx.Err()
				return
			}
			defer func() { <-sem }()
			errs[i] = r.fork().addHost(ctx, h)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}

	// iSCSI: the new hosts wired to every target; the deployed hosts given
	// the new targets (and rescanned, round robin on what they see).
	ts := targets(p)
	id := r.st.Change.PlanSHA256[:12]
	var steps []step
	for _, h := range added {
		steps = append(steps, step{key: "iscsi/" + h.Name, event: "iscsi", host: h.Name,
			do: func(ctx context.Context) (string, error) { return r.wireHost(ctx, h, ts) }})
	}
	for i := range deployed.Hosts {
		h := &p.Hosts[i]
		steps = append(steps, step{key: "expand/" + id + "/iscsi/" + h.Name, event: "iscsi", host: h.Name,
			do: func(ctx context.Context) (string, error) { return r.wireHost(ctx, h, ts) }})
	}
	steps = append(steps, step{key: "expand/" + id + "/rebalance", event: "rebalance", do: r.awaitRebalance})
	if err := r.runSteps(ctx, steps); err != nil {
		return err
	}
	if err := r.endChange(p, ""); err != nil {
		return err
	}
	_ = vc.Event(ctx, r.hosts[added[0].Name].Reference(), fmt.Sprintf("system %s expanded to %d hosts", p.System, len(p.Hosts)))
	return nil
}

// svmRecord is what the new SVM's own `cairn peersync` records at its start
// (peersync.Self): its host name, addresses, roles and target port.
func svmRecord(p *plan.Plan, h *plan.Host) gateway.SVMRecord {
	rec := gateway.SVMRecord{Name: plan.SVMHostname(h.Name), Addresses: []string{h.SVMIP}, Roles: slices.Clone(h.Roles),
		TargetPort: p.TargetPorts()[h.Name]}
	if h.DataIP != "" && h.DataIP != h.SVMIP {
		rec.Addresses = append(rec.Addresses, h.DataIP)
	}
	return rec
}

// addHost deploys one new host's SVM and adds its SDS and devices. The SVM is
// recorded in the system model first: the older SVMs' peer sync then admits it
// (firewall, target port group) before its daemons first connect.
func (r *run) addHost(ctx context.Context, h *plan.Host) error {
	if h.HasSVM() {
		rec := svmRecord(r.p, h)
		key := "expand/" + r.st.Change.PlanSHA256[:12] + "/svmrecord/" + h.Name
		if err := r.runSteps(ctx, []step{{key: key, event: "bootstrap", host: h.Name,
			do: func(ctx context.Context) (string, error) {
				return "recorded " + strings.Join(rec.Addresses, ","), r.api.PutSVM(ctx, rec)
			}}}); err != nil {
			return err
		}
		s := r.newSVM(h)
		s.joins = true
		if err := r.runSteps(ctx, r.svmSteps(s)); err != nil {
			return err
		}
		if err := r.awaitSVM(ctx, s); err != nil {
			return err
		}
	}
	if !h.Has(plan.RoleSDS) {
		return nil
	}
	return r.runSteps(ctx, []step{
		{key: "cluster/sds/" + h.Name, event: "bootstrap", host: h.Name,
			do: func(ctx context.Context) (string, error) { return r.createSDS(ctx, h) }},
		{key: "cluster/devices/" + h.Name, event: "bootstrap", host: h.Name,
			do: func(ctx context.Context) (string, error) { return r.addDevices(ctx, h) }},
	})
}

// awaitRebalance follows the rebalance the leader runs after devices
// joined, until no placement group moves and no copy work is pending, for
// longer than the leader takes to start another wave (Engine.RebalanceQuiet).
func (r *run) awaitRebalance(ctx context.Context) (string, error) {
	lastPct, lastGroups := -1.0, -1
	start := time.Now()
	var quietSince time.Time
	err := poll.Until(ctx, r.DataTimeout, r.PollInterval,
		"the rebalance goes on in the cluster by itself (cairnctl system info shows it); send the expansion again to wait for its end", func() (bool, string, error) {
			sys, err := r.api.System(ctx)
			if err != nil {
				return false, fmt.Sprintf("the gateway does not answer (%v)", err), nil
			}
			rb := sys.Rebuild
			if rb.RebalancingGroups == 0 && rb.RebuildingGroups == 0 && rb.PendingBytes == 0 {
				// The leader moves groups in waves: between one wave's
				// end and the next one's start nothing moves for a moment
				// (the e2e saw 8 groups moving right after a "done").
				// Done is nothing moving for longer than the leader's
				// periodic reconcile.
				if quietSince.IsZero() {
					quietSince = time.Now()
				}
				if time.Since(quietSince) >= r.RebalanceQuiet {
					return true, "", nil
				}
				return false, "no placement group moves; waiting for the leader's next reconcile to confirm", nil
			}
			quietSince = time.Time{}
			if rb.Percent >= lastPct+1 || rb.RebalancingGroups != lastGroups {
				lastPct, lastGroups = rb.Percent, rb.RebalancingGroups
				eta := "unknown"
				if rb.ETASeconds != nil {
					eta = (time.Duration(*rb.ETASeconds) * time.Second).String()
				}
				r.info("rebalance", "", "rebalance %.0f%%: %d placement groups moving, %d rebuilding, %d MiB pending, ETA %s",
					rb.Percent, rb.RebalancingGroups, rb.RebuildingGroups, rb.PendingBytes>>20, eta)
			}
			return false, fmt.Sprintf("the rebalance is not done (%d placement groups moving, %d MiB pending)", rb.RebalancingGroups, rb.PendingBytes>>20), nil
		})
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("rebalanced in %s", time.Since(start).Round(time.Second)), nil
}

// Shrink removes host from the deployed system (plan deployed): its SDS
// drained and removed by the gateway, Cairn's send targets removed from
// its iSCSI adapter (and its SVM's from the other hosts'), its host record
// deleted, its SVM powered off and deleted. It refuses, before changing
// anything, a host that holds an MDM member, the last gateway or the last
// iSCSI target, or has volumes mapped; the gateway refuses a drain that
// would leave a pool holding volumes on one fault domain or without room
// for its data, and nothing is changed then either. On success the
// system's plan is deployed without host (SavePlan).
func (e *Engine) Shrink(ctx context.Context, deployed *plan.Plan, host string) (err error) {
	r := e.newRun(deployed, ShrinkJob(deployed.System, host))
	if e.StateDir == "" {
		return errors.New("shrink: no state directory configured")
	}
	i := slices.IndexFunc(deployed.Hosts, func(h plan.Host) bool { return h.Name == host })
	if i < 0 {
		return fmt.Errorf("host %s is not part of system %s (its hosts: %s)", host, deployed.System, strings.Join(hostNames(deployed), ", "))
	}
	h := &deployed.Hosts[i]
	if err := CheckShrink(deployed, host); err != nil {
		return err
	}
	target := deployed.Without(host)
	resuming, err := e.loadChange(r, deployed, target, ChangeShrink)
	if err != nil {
		return err
	}
	if err := r.locate(ctx); err != nil {
		return err
	}
	if err := r.connectGateway(ctx); err != nil {
		return err
	}
	base := "shrink/" + host
	if !resuming {
		// What the gateway refuses is asked before the change is recorded:
		// a refused removal leaves the system as it was, free for an
		// expansion that makes room.
		if err := r.refuseMapped(ctx, host); err != nil {
			return err
		}
		if err := r.startDrain(ctx, h); err != nil {
			return err
		}
	}
	if err := r.beginChange(target, ChangeShrink, host, resuming); err != nil {
		return err
	}
	defer func() { err = r.finish("shrink", err) }()
	steps := []step{{key: base + "/drain", event: "drain", host: host, do: func(ctx context.Context) (string, error) { return r.drainSDS(ctx, h) }}}
	// The other hosts stop using the leaving SVM's target first, then the
	// host itself leaves Cairn's targets.
	var leaving []string
	if h.Has(plan.RoleTarget) {
		leaving = []string{fmt.Sprintf("%s:%d", hostPort(h.DataAddress()), hoststorage.DefaultISCSIPort)}
	}
	for _, o := range deployed.Hosts {
		if o.Name == host || len(leaving) == 0 {
			continue
		}
		steps = append(steps, step{key: base + "/iscsi/" + o.Name, event: "iscsi", host: o.Name,
			do: func(ctx context.Context) (string, error) { return r.unwire(ctx, o.Name, leaving) }})
	}
	steps = append(steps,
		step{key: base + "/iscsi/" + host, event: "iscsi", host: host,
			do: func(ctx context.Context) (string, error) { return r.unwireHost(ctx, host, targets(deployed)) }},
		step{key: base + "/svm", event: "svm", host: host, do: func(ctx context.Context) (string, error) { return r.deleteSVM(ctx, h) }},
		// Then its record: every other SVM's peer sync stops admitting it.
		step{key: base + "/svmrecord", event: "svm", host: host, do: func(ctx context.Context) (string, error) {
			return "record deleted", r.api.DeleteSVM(ctx, plan.SVMHostname(h.Name))
		}})
	if err := r.runSteps(ctx, steps); err != nil {
		return err
	}
	return r.endChange(target, host)
}

// CheckShrink refuses removing a host the system cannot do without (what
// the plan alone tells; the gateway's refusals come when the removal runs).
func CheckShrink(p *plan.Plan, host string) error {
	h, soleGateway, soleTarget, err := hostOf(p, host)
	switch {
	case err != nil:
		return err
	case h.Has(plan.RoleMDM) || h.Has(plan.RoleTieBreaker):
		return fmt.Errorf("host %s holds an MDM member (cluster metadata, voting): it cannot be removed here; move the member to another SVM first (cairnctl mdm add on the new one, then cairnctl mdm rm %s)", h.Name, plan.SVMHostname(h.Name))
	case soleGateway:
		return fmt.Errorf("host %s runs the system's only gateway: without it nothing manages the system; it cannot be removed", h.Name)
	case soleTarget:
		return fmt.Errorf("host %s runs the system's only iSCSI target: no host would reach the volumes; add a host first (expand), then remove this one", h.Name)
	}
	return nil
}

// hostOf finds host in p and says whether it runs the system's only
// gateway or only iSCSI target (what a removal or a replacement checks).
func hostOf(p *plan.Plan, host string) (h *plan.Host, soleGateway, soleTarget bool, err error) {
	i := slices.IndexFunc(p.Hosts, func(h plan.Host) bool { return h.Name == host })
	if i < 0 {
		return nil, false, false, fmt.Errorf("host %s is not part of system %s (its hosts: %s)", host, p.System, strings.Join(hostNames(p), ", "))
	}
	h = &p.Hosts[i]
	count := func(role string) int {
		n := 0
		for _, o := range p.Hosts {
			if o.Has(role) {
				n++
			}
		}
		return n
	}
	return h, h.Has(plan.RoleGateway) && count(plan.RoleGateway) == 1, h.Has(plan.RoleTarget) && count(plan.RoleTarget) == 1, nil
}

// refuseMapped refuses removing a host with volumes mapped: its iSCSI is
// about to go, and its datastores on them with it.
func (r *run) refuseMapped(ctx context.Context, host string) error {
	gh, err := r.api.GetHost(ctx, host)
	if errors.Is(err, gateway.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	vols, err := r.api.ListVolumes(ctx)
	if err != nil {
		return err
	}
	var mapped []string
	for _, v := range vols {
		for _, m := range v.Mappings {
			if m.HostID == gh.ID {
				mapped = append(mapped, v.Name)
			}
		}
	}
	if len(mapped) > 0 {
		return fmt.Errorf("volumes %s are mapped to host %s: removing it takes its iSCSI away, and its datastores on them with it; move its VMs off them and unmap them from this host first (cairnctl volume unmap), then remove the host", strings.Join(mapped, ", "), host)
	}
	return nil
}

// startDrain starts the drain of the host's SDS, or returns the gateway's
// refusal; nothing is changed then.
func (r *run) startDrain(ctx context.Context, h *plan.Host) error {
	if !h.Has(plan.RoleSDS) {
		return nil
	}
	name := SDSName(h.Name)
	if _, err := r.api.GetSDS(ctx, name); errors.Is(err, gateway.ErrNotFound) {
		return nil
	} else if err != nil {
		return err
	}
	if _, err := r.api.RemoveSDS(ctx, name); err != nil {
		var se *gateway.StatusError
		if errors.As(err, &se) && se.Status == 409 {
			return fmt.Errorf("removal of host %s refused by the gateway: %s (nothing was changed)", h.Name, se.Message)
		}
		return fmt.Errorf("drain SDS %s: %w", name, err)
	}
	return nil
}

// drainSDS removes the host's SDS through the gateway's drain job and
// follows the job to its end. A drain the gateway refuses changes nothing.
func (r *run) drainSDS(ctx context.Context, h *plan.Host) (string, error) {
	if !h.Has(plan.RoleSDS) {
		return "no SDS", nil
	}
	name := SDSName(h.Name)
	if _, err := r.api.GetSDS(ctx, name); errors.Is(err, gateway.ErrNotFound) {
		return "already removed", nil
	} else if err != nil {
		return "", err
	}
	j, err := r.api.RemoveSDS(ctx, name)
	if errors.Is(err, gateway.ErrNotFound) {
		// The drain startDrain began before the change was recorded ended
		// between the look above and this request (a small SDS drains in a
		// second): the SDS is gone, which is what this step is for.
		return "already removed", nil
	}
	if err != nil {
		var se *gateway.StatusError
		if errors.As(err, &se) && se.Status == 409 {
			return "", fmt.Errorf("the gateway refuses to drain SDS %s: %s (nothing was changed)", name, se.Message)
		}
		return "", fmt.Errorf("drain SDS %s: %w", name, err)
	}
	r.info("drain", h.Name, "draining SDS %s (gateway job %s)", name, j.ID)
	last := -1.0
	err = poll.Until(ctx, r.DataTimeout, r.PollInterval, fmt.Sprintf("the drain goes on in the cluster (cairnctl job info %s); send the removal again to wait for its end", j.ID), func() (bool, string, error) {
		cur, err := r.api.GetJob(ctx, j.ID)
		if err != nil {
			return false, fmt.Sprintf("the gateway does not answer (%v)", err), nil
		}
		if cur.Percent >= last+1 || cur.Done() {
			last = cur.Percent
			r.info("drain", h.Name, "drain of SDS %s: %.0f%%: %s", name, cur.Percent, cur.Message)
		}
		switch cur.State {
		case gateway.JobSucceeded:
			return true, "", nil
		case gateway.JobFailed:
			msg := cur.Message
			if cur.Error != nil {
				msg = cur.Error.Message
			}
			return false, "", fmt.Errorf("the drain of SDS %s failed: %s — check cairnctl job info %s, then send the removal again", name, msg, j.ID)
		}
		return false, fmt.Sprintf("SDS %s is still draining (%.0f%%)", name, cur.Percent), nil
	})
	if err != nil {
		return "", err
	}
	return "drained and removed (job " + j.ID + ")", nil
}

// unwire removes the given Cairn send targets from host's adapter and
// rescans.
func (r *run) unwire(ctx context.Context, host string, addrs []string) (string, error) {
	hs := hoststorage.New(r.VC, r.hosts[host])
	n, err := hs.RemoveSendTargets(ctx, addrs)
	if err != nil {
		return "", err
	}
	if err := hs.Rescan(ctx); err != nil {
		return "", err
	}
	return fmt.Sprintf("%d send target(s) removed", n), nil
}

// unwireHost takes the leaving host off Cairn: every Cairn send target
// (only Cairn's: other arrays' stay) and its host record in the gateway.
func (r *run) unwireHost(ctx context.Context, host string, cairn []string) (string, error) {
	detail, err := r.unwire(ctx, host, cairn)
	if err != nil {
		return "", err
	}
	if err := r.api.DeleteHost(ctx, host); err != nil && !errors.Is(err, gateway.ErrNotFound) {
		return "", fmt.Errorf("delete host %s from Cairn: %w", host, err)
	}
	return detail + ", host record deleted", nil
}

// deleteSVM powers the host's SVM off and deletes it with its files.
func (r *run) deleteSVM(ctx context.Context, h *plan.Host) (string, error) {
	vm, name, none, err := r.hostSVM(ctx, h)
	if vm == nil || err != nil {
		return none, err
	}
	g, err := ReadGuest(ctx, vm)
	if err != nil {
		return "", err
	}
	if g.Host != r.hosts[h.Name].Reference() {
		return "", fmt.Errorf("VM %s runs on another host than %s: it is not this host's SVM; check it, then send the removal again", name, h.Name)
	}
	if g.PowerState != types.VirtualMachinePowerStatePoweredOff {
		task, err := vm.PowerOff(ctx)
		if err != nil {
			return "", err
		}
		if err := task.Wait(ctx); err != nil {
			return "", fmt.Errorf("power off %s: %w", name, err)
		}
	}
	task, err := vm.Destroy(ctx)
	if err != nil {
		return "", err
	}
	if err := task.Wait(ctx); err != nil {
		return "", fmt.Errorf("delete %s: %w", name, err)
	}
	return "powered off and deleted " + vm.Reference().Value, nil
}

// SameHash reports whether sum is the SHA-256 the state files record of p.
func SameHash(sum string, p *plan.Plan) bool { return sum == planHash(p) }

// EndChange ends a change whose steps were all done and whose plan p was
// saved (SavePlan) when the plugin stopped, before the state recorded the
// end: the state then loads with p as the change's plan.
func (e *Engine) EndChange(p *plan.Plan) error {
	r := e.newRun(p, ExpandJob(p.System))
	st, err := LoadState(e.StateDir, p)
	if err != nil {
		return err
	}
	if st.Change == nil || st.Change.PlanSHA256 != planHash(p) {
		return fmt.Errorf("system %s has no change in progress that leads to this plan", p.System)
	}
	r.st = st
	switch st.Change.Kind {
	case ChangeShrink:
		r.job = ShrinkJob(p.System, st.Change.Host)
		return r.endChange(p, st.Change.Host)
	case ChangeReplace:
		r.job = ReplaceJob(p.System, st.Change.Host)
		return r.endChange(p, st.Change.Host)
	}
	return r.endChange(p, "")
}
