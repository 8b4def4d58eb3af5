// Replacing a failed host: Replace takes a host whose SVM is gone (the
// ESXi host not responding, or the SVM unreachable) out of the system and
// deploys an SVM on a new host in its place. Unlike Shrink nothing can be
// drained from the failed SDS: its copies are rebuilt from the mirrors on
// the other SDSs when the gateway removes it, and the run waits for that
// rebuild before it adds the new SVM (through the same steps as Expand),
// wires iSCSI and follows the rebalance.
//
// Step keys (stored; never renamed): replace/<failed>/{sds,rebuild,svm,
// rebalance}, replace/<failed>/unwire/<host> (a surviving host stops
// using the failed SVM's target), replace/<failed>/iscsi/<host> (a
// surviving host given the new target); the new host's are the deploy
// keys. All replace/ keys and the failed host's deploy keys are deleted
// when the change ends.

package deploy

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cairn-storage/cairn/vcenter-plugin/internal/gateway"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/hoststorage"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/plan"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/progress"
)

// ChangeReplace is the change kind of a host replacement.
const ChangeReplace = "replace"

// ReplaceJob is the progress job name of the replacement of a failed host.
func ReplaceJob(system, failed string) string { return "replace:" + system + ":" + failed }

// ReplacePlan is the plan after failed is replaced by nh: the deployed
// plan without failed (the others keep their target port ids), nh
// appended. nh without roles gets the failed host's SDS and target roles
// (a gateway of the failed host is not re-created: new hosts are SDS and
// target only); a new target gets a port id no SVM had, so no initiator
// mistakes the new port for the dead one.
func ReplacePlan(deployed *plan.Plan, failed string, nh plan.Host) (*plan.Plan, error) {
	if err := CheckReplace(deployed, failed); err != nil {
		return nil, err
	}
	if nh.Name == "" {
		return nil, errors.New("the new host has no name: give the ESXi host the SVM is deployed on")
	}
	if slices.ContainsFunc(deployed.Hosts, func(h plan.Host) bool { return h.Name == nh.Name }) {
		return nil, fmt.Errorf("host %s is already part of system %s: the SVM that replaces %s goes on a host without one", nh.Name, deployed.System, failed)
	}
	old := deployed.Hosts[slices.IndexFunc(deployed.Hosts, func(h plan.Host) bool { return h.Name == failed })]
	if len(nh.Roles) == 0 {
		for _, r := range old.Roles {
			if slices.Contains(plan.ExpandRoles, r) {
				nh.Roles = append(nh.Roles, r)
			}
		}
	}
	if nh.FaultSet == "" {
		nh.FaultSet = old.FaultSet
	}
	nh.Roles, nh.Devices = slices.Clone(nh.Roles), slices.Clone(nh.Devices)
	p := deployed.Without(failed)
	if nh.Has(plan.RoleTarget) && nh.TargetPortID == 0 {
		top := 0
		for _, n := range deployed.TargetPorts() {
			top = max(top, n)
		}
		nh.TargetPortID = top + 1
	}
	p.Hosts = append(p.Hosts, nh)
	if ps := plan.CheckExpand(deployed.Without(failed), p); ps.Err() != nil {
		return nil, fmt.Errorf("replacement of host %s refused: %w", failed, ps.Err())
	}
	return p, nil
}

// CheckReplace refuses replacing a host the system cannot be rebuilt
// without here (what the plan alone tells).
func CheckReplace(p *plan.Plan, failed string) error {
	h, soleGateway, soleTarget, err := hostOf(p, failed)
	switch {
	case err != nil:
		return err
	case h.Has(plan.RoleMDM) || h.Has(plan.RoleTieBreaker):
		return fmt.Errorf("host %s holds an MDM member: a replacement SVM cannot take its vote here; bring the host back if you can, or add a member on another SVM (cairnctl mdm add) and remove the failed one (cairnctl mdm rm %s) while the others keep quorum, then replace the host", h.Name, plan.SVMHostname(h.Name))
	case soleGateway:
		return fmt.Errorf("host %s ran the system's only gateway: nothing can change the system without it; bring the host back (its SVM starts the gateway again), then replace or remove it", h.Name)
	case soleTarget:
		return fmt.Errorf("host %s ran the system's only iSCSI target: add a host first (expand) so the hosts reach the volumes, then replace this one", h.Name)
	}
	return nil
}

// Replace takes failed out of the deployed system (plan deployed) and
// deploys an SVM on the new host nh in its place (ReplacePlan). It
// refuses a host whose SDS is still up (that one is removed with Shrink,
// its data drained first). On success the system's plan is the new one
// (SavePlan). Sent again after a failure, it resumes.
func (e *Engine) Replace(ctx context.Context, deployed *plan.Plan, failed string, nh plan.Host) (err error) {
	if e.StateDir == "" {
		return errors.New("replace: no state directory configured")
	}
	p, err := ReplacePlan(deployed, failed, nh)
	if err != nil {
		return err
	}
	old := &deployed.Hosts[slices.IndexFunc(deployed.Hosts, func(h plan.Host) bool { return h.Name == failed })]
	newHost := &p.Hosts[len(p.Hosts)-1]
	r := e.newRun(p, ReplaceJob(deployed.System, failed))
	resuming, err := e.loadChange(r, deployed, p, ChangeReplace)
	if err != nil {
		return err
	}
	if err := r.locate(ctx); err != nil {
		return err
	}
	if err := plan.Validate(p, r.inv).Err(); err != nil {
		return err
	}
	if err := r.connectGateway(ctx); err != nil {
		return err
	}
	if !resuming {
		if err := r.refuseLive(ctx, old); err != nil {
			return err
		}
	}
	if err := r.beginChange(p, ChangeReplace, failed, resuming); err != nil {
		return err
	}
	defer func() { err = r.finish("replace", err) }()
	vc := progress.VCenter{C: e.VC}
	if t, terr := vc.StartTask(ctx, r.hosts[newHost.Name].Reference(), progress.TaskDeploy); terr == nil {
		defer func() { progress.EndTask(context.WithoutCancel(ctx), t, err) }()
	}

	base := "replace/" + failed
	// The failed SDS leaves first: its copies are rebuilt from the mirrors
	// onto the surviving SDSs, and nothing is added while the data has one
	// copy.
	steps := []step{
		{key: base + "/sds", event: "rebuild", host: failed, do: func(ctx context.Context) (string, error) { return r.drainSDS(ctx, old) }},
		{key: base + "/rebuild", event: "rebuild", do: func(ctx context.Context) (string, error) { return r.awaitCopies(ctx, "rebuild") }},
	}
	var leaving []string
	if old.Has(plan.RoleTarget) {
		leaving = []string{fmt.Sprintf("%s:%d", hostPort(old.DataAddress()), hoststorage.DefaultISCSIPort)}
	}
	for _, o := range deployed.Hosts {
		if o.Name == failed || len(leaving) == 0 {
			continue
		}
		steps = append(steps, step{key: base + "/unwire/" + o.Name, event: "iscsi", host: o.Name,
			do: func(ctx context.Context) (string, error) { return r.unwire(ctx, o.Name, leaving) }})
	}
	steps = append(steps, step{key: base + "/svm", event: "svm", host: failed, do: func(ctx context.Context) (string, error) { return r.forgetSVM(ctx, old) }},
		// Then its record: every other SVM's peer sync stops admitting its
		// addresses, and the upgrade list forgets it.
		step{key: base + "/svmrecord", event: "svm", host: failed, do: func(ctx context.Context) (string, error) {
			return "record deleted", r.api.DeleteSVM(ctx, plan.SVMHostname(old.Name))
		}})
	for _, fs := range p.FaultSets() {
		steps = append(steps, step{key: "cluster/faultset/" + fs, event: "bootstrap",
			do: func(ctx context.Context) (string, error) { return r.createFaultSet(ctx, fs) }})
	}
	if err := r.runSteps(ctx, steps); err != nil {
		return err
	}
	if err := r.addHost(ctx, newHost); err != nil {
		return err
	}
	ts := targets(p)
	steps = []step{{key: "iscsi/" + newHost.Name, event: "iscsi", host: newHost.Name,
		do: func(ctx context.Context) (string, error) { return r.wireHost(ctx, newHost, ts) }}}
	for i := range p.Hosts[:len(p.Hosts)-1] {
		h := &p.Hosts[i]
		steps = append(steps, step{key: base + "/iscsi/" + h.Name, event: "iscsi", host: h.Name,
			do: func(ctx context.Context) (string, error) { return r.wireHost(ctx, h, ts) }})
	}
	steps = append(steps, step{key: base + "/rebalance", event: "rebalance", do: r.awaitRebalance})
	if err := r.runSteps(ctx, steps); err != nil {
		return err
	}
	if err := r.endChange(p, failed); err != nil {
		return err
	}
	_ = vc.Event(ctx, r.hosts[newHost.Name].Reference(), fmt.Sprintf("system %s: the SVM of failed host %s replaced by one on %s", p.System, failed, newHost.Name))
	return nil
}

// refuseLive refuses replacing a host whose SDS still serves: its data
// can be drained, which is a removal (and an expansion), not a rebuild.
func (r *run) refuseLive(ctx context.Context, h *plan.Host) error {
	if !h.Has(plan.RoleSDS) {
		return nil
	}
	s, err := r.api.GetSDS(ctx, SDSName(h.Name))
	if errors.Is(err, gateway.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if s.Up {
		return fmt.Errorf("SDS %s of host %s is up: the host has not failed; remove it with POST /api/v1/systems/%s/hosts/%s/remove (its data is drained first) and add the new host with POST /api/v1/systems/%s/expand",
			s.Name, h.Name, r.p.System, h.Name, r.p.System)
	}
	return nil
}

// awaitCopies waits until the cluster copies nothing (no group
// rebuilding, resyncing or rebalancing, nothing pending), with progress.
func (r *run) awaitCopies(ctx context.Context, what string) (string, error) {
	d, err := r.awaitRebalance(ctx)
	if err != nil {
		return "", fmt.Errorf("%s: %w", what, err)
	}
	return strings.Replace(d, "rebalanced", what+" done", 1), nil
}

// forgetSVM cleans up the failed host's SVM where vCenter allows: deleted
// when its host answers; removed from the inventory when the host does
// not (vCenter cannot delete a disconnected VM's files); left, with what
// to do, when vCenter refuses both. Only a VM on the failed host is
// touched.
func (r *run) forgetSVM(ctx context.Context, h *plan.Host) (string, error) {
	vm, name, none, err := r.hostSVM(ctx, h)
	if vm == nil || err != nil {
		return none, err
	}
	var m mo.VirtualMachine
	if err := vm.Properties(ctx, vm.Reference(), []string{"runtime"}, &m); err != nil {
		return "", err
	}
	hs, err := r.finder.HostSystem(ctx, h.Name)
	if err != nil {
		return "", fmt.Errorf("find failed host %s: %w", h.Name, err)
	}
	if m.Runtime.Host == nil || *m.Runtime.Host != hs.Reference() {
		return "", fmt.Errorf("VM %s is not on host %s: it is not the failed host's SVM; check it, then send the replacement again", name, h.Name)
	}
	if m.Runtime.ConnectionState == types.VirtualMachineConnectionStateConnected {
		err := destroyVM(ctx, vm, m.Runtime.PowerState)
		if err == nil {
			return "powered off and deleted " + vm.Reference().Value, nil
		}
		r.info("svm", h.Name, "deleting %s failed (%v): removing it from the inventory instead", name, err)
	}
	if err := vm.Unregister(ctx); err != nil {
		r.Log.Emit(r.job, progress.Warn, "svm", h.Name, "VM %s (%s) stays in the inventory: vCenter refuses to remove it (%v); remove it (and its files) when host %s is back or retired",
			name, m.Runtime.ConnectionState, err, h.Name)
		return "VM record kept (vCenter refused to remove it)", nil
	}
	return fmt.Sprintf("VM %s (%s) removed from the inventory; its files stay on host %s's datastore: delete them when the host is back or retired", vm.Reference().Value, m.Runtime.ConnectionState, h.Name), nil
}

// destroyVM powers vm off (unless it is off) and deletes it with its files.
func destroyVM(ctx context.Context, vm *object.VirtualMachine, state types.VirtualMachinePowerState) error {
	if state != types.VirtualMachinePowerStatePoweredOff {
		task, err := vm.PowerOff(ctx)
		if err != nil {
			return err
		}
		if err := task.Wait(ctx); err != nil {
			return fmt.Errorf("power off: %w", err)
		}
	}
	task, err := vm.Destroy(ctx)
	if err != nil {
		return err
	}
	return task.Wait(ctx)
}
