// The steps of one unit (a host or a fault set), in the order unit()
// runs them, one method each: health, SDS maintenance, SVM shutdown, host
// maintenance mode, patch, exit, SVM power-on, SDS exit, resync.

package maintenance

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cairn-storage/cairn/vcenter-plugin/internal/deploy"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/gateway"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/plan"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/poll"
)

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
	return gateway.EnterMaintenance(ctx, r.api, r.sdsOf(unit), r.mode, r.ResyncTimeout, r.PollInterval)
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
	return gateway.ExitMaintenance(ctx, r.api, r.sdsOf(unit))
}

// resync waits until the cluster is whole again (gateway.Whole).
func (r *roll) resync(ctx context.Context, unit []string) error {
	return poll.Until(ctx, r.ResyncTimeout, r.PollInterval, "check the SDSs of these hosts in the Cairn dashboard; resume once health is ok", func() (bool, string, error) {
		return gateway.Whole(ctx, r.api)
	})
}
