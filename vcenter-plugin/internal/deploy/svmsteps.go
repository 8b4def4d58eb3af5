// The steps of one SVM: clone it from the template onto its host's local
// datastore, give it its vApp properties and devices, power it on; then
// (on every run, not a step) wait until it reports ready and pin its
// gateway certificate.

package deploy

import (
	"context"
	"fmt"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cairn-storage/cairn/appliance/contract"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/gateway"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/hoststorage"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/inventory"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/plan"
)

// svmTarget is what the steps of one SVM share.
type svmTarget struct {
	h    *plan.Host
	name string // the SVM's VM name
	host *object.HostSystem
	inv  *inventory.Host
	base string                 // state key prefix: svm/<host>
	vm   *object.VirtualMachine // set by clone, or found again by its resume
	// joins says the SVM is added to a running system (Expand, Replace):
	// configure gives it a fresh join token (jointoken.go), not the
	// deployment's bootstrap token.
	joins bool
}

func (r *run) newSVM(h *plan.Host) *svmTarget {
	ih, _ := r.inv.Host(h.Name)
	return &svmTarget{h: h, name: r.p.SVMName(h.Name), host: r.hosts[h.Name], inv: ih, base: "svm/" + h.Name}
}

// svmSteps are the steps of s, in order.
func (r *run) svmSteps(s *svmTarget) []step {
	return []step{
		{key: s.base + "/clone", event: "clone", host: s.h.Name,
			do:     func(ctx context.Context) (string, error) { return r.clone(ctx, s) },
			resume: func(ctx context.Context) error { return r.findClone(ctx, s) }},
		{key: s.base + "/configure", event: "configure", host: s.h.Name,
			do: func(ctx context.Context) (string, error) { return r.configure(ctx, s) }},
		{key: s.base + "/power-on", event: "power-on", host: s.h.Name,
			do: func(ctx context.Context) (string, error) { return r.powerOn(ctx, s) }},
	}
}

// clone clones the template onto the host's local datastore with the most
// free space, or adopts the VM of that name already on the host.
func (r *run) clone(ctx context.Context, s *svmTarget) (string, error) {
	h, host, name := s.h, s.host, s.name
	existing, err := findVM(ctx, r.finder, name)
	if err != nil {
		return "", err
	}
	if existing != nil {
		var m mo.VirtualMachine
		if err := existing.Properties(ctx, existing.Reference(), []string{"runtime.host"}, &m); err != nil {
			return "", err
		}
		if m.Runtime.Host == nil || *m.Runtime.Host != host.Reference() {
			return "", fmt.Errorf("a VM named %s exists on another host: rename or remove it", name)
		}
		s.vm = existing
		return "found " + existing.Reference().Value, nil
	}
	tmpl, err := r.finder.VirtualMachine(ctx, r.p.Template)
	if err != nil {
		return "", fmt.Errorf("template %s: %w", r.p.Template, err)
	}
	var local *inventory.Datastore
	for i := range s.inv.Datastores {
		d := &s.inv.Datastores[i]
		if d.Local && (local == nil || d.Free > local.Free) {
			local = d
		}
	}
	if local == nil {
		return "", fmt.Errorf("host %s has no local datastore", h.Name)
	}
	pool, err := host.ResourcePool(ctx)
	if err != nil {
		return "", err
	}
	folders, err := r.dc.Folders(ctx)
	if err != nil {
		return "", err
	}
	hostRef, poolRef := host.Reference(), pool.Reference()
	dsRef := types.ManagedObjectReference{Type: "Datastore", Value: local.MoRef}
	task, err := tmpl.Clone(ctx, folders.VmFolder, name, types.VirtualMachineCloneSpec{
		Location: types.VirtualMachineRelocateSpec{Host: &hostRef, Pool: &poolRef, Datastore: &dsRef}})
	if err != nil {
		return "", err
	}
	res, err := task.WaitForResult(ctx)
	if err != nil {
		return "", fmt.Errorf("clone %s to %s/%s: %w", r.p.Template, h.Name, local.Name, err)
	}
	vm := object.NewVirtualMachine(r.VC, res.Result.(types.ManagedObjectReference))
	vm.InventoryPath = name // for messages (vm.Name())
	s.vm = vm
	return "cloned " + vm.Reference().Value + " on " + local.Name, nil
}

// findClone finds the VM an earlier run cloned.
func (r *run) findClone(ctx context.Context, s *svmTarget) error {
	v, err := findVM(ctx, r.finder, s.name)
	if err != nil || v == nil {
		return fmt.Errorf("the state says done but VM %s is gone: remove the step from %s to clone it again (%v)", s.name, StatePath(r.StateDir, r.p.System), err)
	}
	s.vm = v
	return nil
}

// configure sets the SVM's vApp properties (the appliance contract),
// connects its NICs and attaches the plan's devices, while it is off. An
// SVM added to a running system gets a join token created for it here.
func (r *run) configure(ctx context.Context, s *svmTarget) (string, error) {
	h, host, name, vm := s.h, s.host, s.name, s.vm
	g, err := ReadGuest(ctx, vm)
	if err != nil {
		return "", err
	}
	if g.PowerState != types.VirtualMachinePowerStatePoweredOff {
		return "", fmt.Errorf("SVM %s is %s but not configured yet: power it off, then resume", name, g.PowerState)
	}
	cfg, err := readConfig(ctx, vm)
	if err != nil {
		return "", err
	}
	tmpl, err := r.finder.VirtualMachine(ctx, r.p.Template)
	if err != nil {
		return "", err
	}
	tcfg, err := readConfig(ctx, tmpl)
	if err != nil {
		return "", err
	}
	token, tokenID, joined := r.st.Secrets.BootstrapToken, "", ""
	if s.joins {
		t, err := r.joinToken(ctx, s, "configure")
		if err != nil {
			return "", err
		}
		token, tokenID, joined = t.Token, t.ID, ", join token "+t.ID
	}
	props := r.p.VAppProperties(h, token)
	if _, err := contract.Validate(props); err != nil {
		// The appliance's own check, before anything is changed.
		return "", fmt.Errorf("the plan gives SVM %s settings its first boot would refuse: %w", name, err)
	}
	vapp, err := vappSpec(cfg.vapp, tcfg.vapp, props)
	if err != nil {
		return "", err
	}
	net, err := r.finder.Network(ctx, r.p.Network.Portgroup)
	if err != nil {
		return "", fmt.Errorf("network %s: %w", r.p.Network.Portgroup, err)
	}
	backing, err := net.EthernetCardBackingInfo(ctx)
	if err != nil {
		return "", err
	}
	var dataBacking types.BaseVirtualDeviceBackingInfo
	if h.DataIP != "" {
		// The SVM's data NIC shares the hosts' iSCSI port group.
		if err := hoststorage.New(r.VC, host).EnsurePortgroup(ctx, r.p.ISCSI.Portgroup, r.iscsiVSwitch()); err != nil {
			return "", err
		}
		dnet, err := r.finder.Network(ctx, r.p.ISCSI.Portgroup)
		if err != nil {
			return "", fmt.Errorf("network %s: %w", r.p.ISCSI.Portgroup, err)
		}
		if dataBacking, err = dnet.EthernetCardBackingInfo(ctx); err != nil {
			return "", err
		}
	}
	disks := map[string]int64{}
	for _, d := range s.inv.Disks {
		disks[d.CanonicalName] = d.Size
	}
	if err := checkRDMs(ctx, host, cfg, h); err != nil {
		return "", err
	}
	changes, passthrough, err := deviceChanges(ctx, r.VC, cfg, h, disks, backing, dataBacking, func(id string) (types.BaseVirtualDeviceBackingInfo, error) {
		return pciBacking(ctx, host, id)
	})
	if err != nil {
		return "", err
	}
	spec := types.VirtualMachineConfigSpec{VAppConfig: vapp, DeviceChange: changes}
	if passthrough {
		// Passthrough needs all guest memory reserved.
		spec.MemoryReservationLockedToMax = types.NewBool(true)
	}
	task, err := vm.Reconfigure(ctx, spec)
	if err != nil {
		return "", err
	}
	if err := task.Wait(ctx); err != nil {
		return "", fmt.Errorf("reconfigure %s: %w", name, err)
	}
	if tokenID != "" {
		// The id (never the token) for the power-on step's check
		// (renewJoinToken); saved with the step's end.
		r.mu.Lock()
		if r.st.JoinTokenIDs == nil {
			r.st.JoinTokenIDs = map[string]string{}
		}
		r.st.JoinTokenIDs[h.Name] = tokenID
		r.mu.Unlock()
	}
	return fmt.Sprintf("%d device change(s), %d property change(s)%s", len(changes), len(vapp.Property), joined), nil
}

// powerOn powers the SVM on; a joining SVM's join token is checked first,
// and renewed if it would not serve its first boot (renewJoinToken). An SVM
// already on is left as it is.
func (r *run) powerOn(ctx context.Context, s *svmTarget) (string, error) {
	g, err := ReadGuest(ctx, s.vm)
	if err != nil {
		return "", err
	}
	if g.PowerState == types.VirtualMachinePowerStatePoweredOn {
		return "already on", nil
	}
	detail := ""
	if s.joins {
		if detail, err = r.renewJoinToken(ctx, s); err != nil {
			return "", err
		}
	}
	task, err := s.vm.PowerOn(ctx)
	if err != nil {
		return "", err
	}
	if err := task.Wait(ctx); err != nil {
		return "", fmt.Errorf("power on %s: %w", s.name, err)
	}
	return detail, nil
}

// awaitSVM waits until the SVM reports ready and, on a gateway, pins its
// certificate. It runs on every run: a step marked done says nothing
// about whether the SVM is up now.
func (r *run) awaitSVM(ctx context.Context, s *svmTarget) error {
	h, name := s.h, s.name
	r.info("ready", h.Name, "waiting for SVM %s (tools, %s=%s)", name, GuestReady, ReadyValue)
	g, err := WaitReady(ctx, s.vm, r.ReadyTimeout, r.PollInterval)
	if err != nil {
		return fmt.Errorf("%s/ready: %w", s.base, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.guest[h.Name] = g
	r.info("ready", h.Name, "SVM %s is ready at %s", name, g.IP)
	if h.Has(plan.RoleGateway) {
		return r.pinGateway(s, g)
	}
	return nil
}

// pinGateway records the gateway certificate thumbprint the SVM itself
// published through vCenter (never trust on first use over the network),
// and refuses one that changed since it was pinned.
func (r *run) pinGateway(s *svmTarget, g GuestInfo) error {
	h, name, base := s.h, s.name, s.base
	tp := gateway.NormalizeThumbprint(g.Values[GuestThumbprint])
	switch old := r.st.GatewayThumbprints[h.Name]; {
	case len(tp) != 64:
		return fmt.Errorf("%s/ready: SVM %s has the gateway role but published no certificate thumbprint (%s=%q): its image is older than this plugin; deploy the OVA of this version", base, name, GuestThumbprint, g.Values[GuestThumbprint])
	case old != "" && old != tp:
		return fmt.Errorf("%s/ready: the gateway certificate of SVM %s changed (pinned %s, now %s): if its state was reset on purpose, remove gateway_thumbprints.%s from %s and resume", base, name, old, tp, h.Name, StatePath(r.StateDir, r.p.System))
	}
	if r.st.GatewayThumbprints == nil {
		r.st.GatewayThumbprints = map[string]string{}
	}
	r.st.GatewayThumbprints[h.Name] = tp
	return r.st.Save(r.StateDir)
}
