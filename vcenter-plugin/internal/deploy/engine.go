// Package deploy executes a Cairn deployment plan through vCenter and the
// gateway: one SVM per host cloned from the template onto the host's local
// datastore with its vApp properties and devices, powered on and awaited;
// the cluster bootstrapped through the gateway; every host's software
// iSCSI wired to every SVM. It is idempotent and resumable: each step
// checks what exists, and a state file keeps the secrets and progress.
package deploy

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"sort"
	"strings"
	"time"

	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cairn-storage/cairn/appliance/contract"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/gateway"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/hoststorage"
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
	p      *plan.Plan
	st     *State
	job    string
	finder *find.Finder
	inv    *inventory.Inventory
	hosts  map[string]*object.HostSystem
	guest  map[string]GuestInfo // SVM guest info by ESXi host
}

func (r *run) info(step, host, format string, args ...any) {
	r.Log.Emit(r.job, progress.Info, step, host, format, args...)
}

// step runs f unless the state says key is done; marks it done and saves.
func (r *run) step(key, step, host string, f func() (string, error)) error {
	if s, ok := r.st.Steps[key]; ok && s.Done {
		r.info(step, host, "%s: already done", key)
		return nil
	}
	r.info(step, host, "%s: started", key)
	detail, err := f()
	if err != nil {
		return fmt.Errorf("%s: %w", key, err)
	}
	r.st.Steps[key] = StepState{Done: true, Time: time.Now().UTC(), Detail: detail}
	if err := r.st.Save(r.StateDir); err != nil {
		return err
	}
	r.info(step, host, "%s: done %s", key, detail)
	return nil
}

// Deploy runs (or resumes) the deployment of p.
func (e *Engine) Deploy(ctx context.Context, p *plan.Plan) (err error) {
	e.defaults()
	if e.StateDir == "" {
		return errors.New("deploy: no state directory configured")
	}
	r := &run{Engine: e, p: p, job: Job(p.System), guest: map[string]GuestInfo{}}
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
	r.finder, r.hosts = loc.Finder, loc.Hosts
	dc := loc.Datacenter
	if t, terr := vc.StartTask(ctx, r.hosts[p.Hosts[0].Name].Reference(), progress.TaskDeploy); terr == nil {
		defer func() { progress.EndTask(context.WithoutCancel(ctx), t, err) }()
	}

	for i := range p.Hosts {
		h := &p.Hosts[i]
		if !h.HasSVM() {
			continue
		}
		if err := r.svm(ctx, dc, h); err != nil {
			return err
		}
	}
	api, err := r.connectGateway(ctx)
	if err != nil {
		return err
	}
	if err := r.bootstrap(ctx, api); err != nil {
		return err
	}
	for i := range p.Hosts {
		if err := r.wireHost(ctx, api, &p.Hosts[i]); err != nil {
			return err
		}
	}
	_ = vc.Event(ctx, r.hosts[p.Hosts[0].Name].Reference(), fmt.Sprintf("system %s deployed on %d hosts", p.System, len(p.Hosts)))
	return nil
}

func (r *run) svm(ctx context.Context, dc *object.Datacenter, h *plan.Host) error {
	name := r.p.SVMName(h.Name)
	host := r.hosts[h.Name]
	ih, _ := r.inv.Host(h.Name)
	base := "svm/" + h.Name
	var vm *object.VirtualMachine

	if err := r.step(base+"/clone", "clone", h.Name, func() (string, error) {
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
			vm = existing
			return "found " + existing.Reference().Value, nil
		}
		tmpl, err := r.finder.VirtualMachine(ctx, r.p.Template)
		if err != nil {
			return "", fmt.Errorf("template %s: %w", r.p.Template, err)
		}
		var local *inventory.Datastore
		for i := range ih.Datastores {
			d := &ih.Datastores[i]
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
		folders, err := dc.Folders(ctx)
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
		vm = object.NewVirtualMachine(r.VC, res.Result.(types.ManagedObjectReference))
		vm.InventoryPath = name // for messages (vm.Name())
		return "cloned " + vm.Reference().Value + " on " + local.Name, nil
	}); err != nil {
		return err
	}
	if vm == nil {
		v, err := findVM(ctx, r.finder, name)
		if err != nil || v == nil {
			return fmt.Errorf("%s/clone: the state says done but VM %s is gone: remove the step from %s to clone it again (%v)", base, name, StatePath(r.StateDir, r.p.System), err)
		}
		vm = v
	}

	if err := r.step(base+"/configure", "configure", h.Name, func() (string, error) {
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
		props := r.p.VAppProperties(h, r.st.Secrets)
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
			vswitch := r.p.ISCSI.VSwitch
			if vswitch == "" {
				vswitch = "vSwitch0"
			}
			if err := hoststorage.New(r.VC, host).EnsurePortgroup(ctx, r.p.ISCSI.Portgroup, vswitch); err != nil {
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
		for _, d := range ih.Disks {
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
		return fmt.Sprintf("%d device change(s), %d property change(s)", len(changes), len(vapp.Property)), nil
	}); err != nil {
		return err
	}

	if err := r.step(base+"/power-on", "power-on", h.Name, func() (string, error) {
		g, err := ReadGuest(ctx, vm)
		if err != nil {
			return "", err
		}
		if g.PowerState == types.VirtualMachinePowerStatePoweredOn {
			return "already on", nil
		}
		task, err := vm.PowerOn(ctx)
		if err != nil {
			return "", err
		}
		if err := task.Wait(ctx); err != nil {
			return "", fmt.Errorf("power on %s: %w", name, err)
		}
		return "", nil
	}); err != nil {
		return err
	}
	// Readiness is checked on every run: a step marked done says nothing
	// about whether the SVM is up now.
	r.info("ready", h.Name, "waiting for SVM %s (tools, %s=%s)", name, GuestReady, ReadyValue)
	g, err := WaitReady(ctx, vm, r.ReadyTimeout, r.PollInterval)
	if err != nil {
		return fmt.Errorf("%s/ready: %w", base, err)
	}
	r.guest[h.Name] = g
	r.info("ready", h.Name, "SVM %s is ready at %s", name, g.IP)
	if h.Has(plan.RoleGateway) {
		// Pinned from what the SVM itself published through vCenter (never
		// trust on first use over the network).
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
		if err := r.st.Save(r.StateDir); err != nil {
			return err
		}
	}
	return nil
}

// GatewayConfig is how the plugin reaches system p's gateways: every gateway SVM in
// plan order, each pinned by the thumbprint its SVM published, the first one preferred
// and the others taken over when it is down. It logs in as admin with the password
// the deployment set.
func GatewayConfig(p *plan.Plan, st *State, port int) (gateway.Config, error) {
	if port == 0 {
		port = contract.GatewayPort
	}
	cfg := gateway.Config{Username: "admin", Password: st.Secrets.AdminPassword}
	for _, h := range p.Hosts {
		if !h.Has(plan.RoleGateway) {
			continue
		}
		tp := st.GatewayThumbprints[h.Name]
		if tp == "" {
			return cfg, fmt.Errorf("no certificate thumbprint pinned for the gateway on %s: resume the deployment so its SVM is checked", h.Name)
		}
		url := fmt.Sprintf("https://%s:%d", hostPort(h.SVMIP), port)
		if cfg.URL == "" {
			cfg.URL, cfg.Thumbprint = url, tp
		} else {
			cfg.Failover = append(cfg.Failover, gateway.Endpoint{URL: url, Thumbprint: tp})
		}
	}
	if cfg.URL == "" {
		return cfg, fmt.Errorf("system %s has no gateway in its plan", p.System)
	}
	return cfg, nil
}

// connectGateway sets the admin password with the bootstrap token (once), logs in to
// the gateways and waits until one answers.
func (r *run) connectGateway(ctx context.Context) (gateway.API, error) {
	cfg, err := GatewayConfig(r.p, r.st, r.GatewayPort)
	if err != nil {
		return nil, err
	}
	api, err := r.Gateway(cfg)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(r.ReadyTimeout)
	wait := func(err error) error {
		if time.Now().After(deadline) {
			return fmt.Errorf("gateway %s does not answer after %s: %w", cfg.URL, r.ReadyTimeout, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(r.PollInterval):
			return nil
		}
	}
	if err := r.step("cluster/admin", "gateway", "", func() (string, error) {
		for {
			err := api.RedeemBootstrapToken(ctx, r.st.Secrets.BootstrapToken, r.st.Secrets.AdminPassword)
			if err == nil {
				return "admin password set with the one-time bootstrap token", nil
			}
			var se *gateway.StatusError
			if errors.As(err, &se) && se.Status == http.StatusUnauthorized {
				// Used already (a run that stopped before saving this step)?
				// Then our password works.
				if _, lerr := api.System(ctx); lerr == nil {
					return "admin password already set", nil
				}
				return "", fmt.Errorf("the gateway refused the bootstrap token (%s): it is good once and for %s after the first gateway started. "+
					"Log in to the SVM console of the first gateway, read /var/lib/cairn/gateway/admin-password, set it as secrets.admin_password in %s, then resume",
					se.Message, contract.BootstrapTokenLifetime, StatePath(r.StateDir, r.p.System))
			}
			if werr := wait(err); werr != nil {
				return "", werr
			}
		}
	}); err != nil {
		return nil, err
	}
	for {
		_, err := api.System(ctx)
		if err == nil {
			return api, nil
		}
		if werr := wait(err); werr != nil {
			return nil, werr
		}
	}
}

func hostPort(ip string) string {
	if a, err := netip.ParseAddr(ip); err == nil && a.Is6() {
		return "[" + ip + "]"
	}
	return ip
}

// SDSName is the gateway name of the SDS on host: the SVM's host name, which the
// appliance's SDS runs under (packer/files/cairn-role: cairn sds --name $CAIRN_HOSTNAME).
func SDSName(host string) string { return plan.SVMHostname(host) }

func (r *run) bootstrap(ctx context.Context, api gateway.API) error {
	p := r.p
	if err := r.step("cluster/system", "bootstrap", "", func() (string, error) {
		return "", api.Bootstrap(ctx, p.System)
	}); err != nil {
		return err
	}
	if err := r.step("cluster/pd", "bootstrap", "", func() (string, error) {
		if _, err := api.GetPD(ctx, p.ProtectionDomain); err == nil {
			return "exists", nil
		} else if !errors.Is(err, gateway.ErrNotFound) {
			return "", err
		}
		pd, err := api.CreatePD(ctx, p.ProtectionDomain)
		if err != nil {
			return "", err
		}
		return pd.ID, nil
	}); err != nil {
		return err
	}
	for _, fs := range p.FaultSets() {
		if err := r.step("cluster/faultset/"+fs, "bootstrap", "", func() (string, error) {
			if _, err := api.GetFaultSet(ctx, fs); err == nil {
				return "exists", nil
			} else if !errors.Is(err, gateway.ErrNotFound) {
				return "", err
			}
			f, err := api.CreateFaultSet(ctx, fs, p.ProtectionDomain)
			if err != nil {
				return "", err
			}
			return f.ID, nil
		}); err != nil {
			return err
		}
	}
	if err := r.step("cluster/pool", "bootstrap", "", func() (string, error) {
		if _, err := api.GetPool(ctx, p.StoragePool.Name); err == nil {
			return "exists", nil
		} else if !errors.Is(err, gateway.ErrNotFound) {
			return "", err
		}
		pool, err := api.CreatePool(ctx, gateway.PoolSpec{Name: p.StoragePool.Name, PD: p.ProtectionDomain, SparePercent: p.StoragePool.SparePercent})
		if err != nil {
			return "", err
		}
		return pool.ID, nil
	}); err != nil {
		return err
	}
	for i := range p.Hosts {
		h := &p.Hosts[i]
		if !h.Has(plan.RoleSDS) {
			continue
		}
		name := SDSName(h.Name)
		if err := r.step("cluster/sds/"+h.Name, "bootstrap", h.Name, func() (string, error) {
			if s, err := api.GetSDS(ctx, name); err == nil {
				return "exists " + s.ID, nil
			} else if !errors.Is(err, gateway.ErrNotFound) {
				return "", err
			}
			s, err := api.CreateSDS(ctx, gateway.SDSSpec{Name: name, Address: fmt.Sprintf("%s:%d", hostPort(h.DataAddress()), r.SDSPort), PD: p.ProtectionDomain, FaultSet: h.FaultSet})
			if err != nil {
				return "", err
			}
			return s.ID, nil
		}); err != nil {
			return err
		}
		if err := r.step("cluster/devices/"+h.Name, "bootstrap", h.Name, func() (string, error) {
			// The gateway asks the SDS to prepare each device, so the
			// SDS must be up: a freshly created SDS starts serving only
			// once it has read its record (a moment after CreateSDS).
			var sds *gateway.SDS
			deadline := time.Now().Add(r.ReadyTimeout)
			for {
				var err error
				if sds, err = api.GetSDS(ctx, name); err != nil {
					return "", err
				}
				if sds.Up {
					break
				}
				if time.Now().After(deadline) {
					return "", fmt.Errorf("sds %s (%s) is not up after %s: check `cairn sds` in the SVM on %s (journalctl -u cairn-sds), then resume", name, sds.Address, r.ReadyTimeout, h.Name)
				}
				select {
				case <-ctx.Done():
					return "", ctx.Err()
				case <-time.After(r.PollInterval):
				}
			}
			devs, err := api.ListDevices(ctx)
			if err != nil {
				return "", err
			}
			have := map[string]bool{}
			for _, d := range devs {
				if d.SDSID == sds.ID {
					have[d.Path] = true
				}
			}
			added := 0
			for _, d := range h.Devices {
				path, err := r.DevicePath(h.Name, d, r.guest[h.Name].Values)
				if err != nil {
					return "", err
				}
				if have[path] {
					continue
				}
				if _, err := api.AddDevice(ctx, gateway.DeviceSpec{SDS: sds.ID, Path: path, Pool: p.StoragePool.Name}); err != nil {
					return "", fmt.Errorf("add device %s to %s: %w", path, name, err)
				}
				added++
			}
			return fmt.Sprintf("%d added, %d present", added, len(h.Devices)-added), nil
		}); err != nil {
			return err
		}
	}
	return nil
}

func (r *run) wireHost(ctx context.Context, api gateway.API, h *plan.Host) error {
	hs := hoststorage.New(r.VC, r.hosts[h.Name])
	var targets []string
	for _, o := range r.p.Hosts {
		if o.Has(plan.RoleTarget) {
			targets = append(targets, fmt.Sprintf("%s:%d", hostPort(o.DataAddress()), hoststorage.DefaultISCSIPort))
		}
	}
	sort.Strings(targets)
	return r.step("iscsi/"+h.Name, "iscsi", h.Name, func() (string, error) {
		st, err := hs.EnableISCSI(ctx)
		if err != nil {
			return "", err
		}
		vmk := ""
		if h.VmkernelIP != "" || !r.p.ISCSI.CreateVmkernel {
			mask := ""
			cidr := r.p.ISCSI.CIDR
			if cidr == "" {
				cidr = r.p.Network.CIDR
			}
			if pfx, err := netip.ParsePrefix(cidr); err == nil {
				mask = prefixMask(pfx.Bits())
			}
			vswitch := r.p.ISCSI.VSwitch
			if vswitch == "" {
				vswitch = "vSwitch0"
			}
			if vmk, err = hs.EnsureVmkernelPort(ctx, st.HBA, r.p.ISCSI.Portgroup, vswitch, h.VmkernelIP, mask, r.p.ISCSI.CreateVmkernel); err != nil {
				return "", err
			}
		}
		if err := hs.AddSendTargets(ctx, targets); err != nil {
			return "", err
		}
		if _, err := api.GetHost(ctx, h.Name); errors.Is(err, gateway.ErrNotFound) {
			if _, err := api.CreateHost(ctx, gateway.HostSpec{Name: h.Name, Type: "iscsi", IQN: st.IQN}); err != nil {
				return "", fmt.Errorf("register host %s (%s) in Cairn: %w", h.Name, st.IQN, err)
			}
		} else if err != nil {
			return "", err
		}
		if err := hs.Rescan(ctx); err != nil {
			return "", err
		}
		if _, err := hs.EnsureRoundRobin(ctx, ""); err != nil { // Cairn LUNs already mapped to the host
			return "", err
		}
		return fmt.Sprintf("%s %s bound to %s, %d send targets", st.HBA, st.IQN, vmk, len(targets)), nil
	})
}

func prefixMask(bits int) string {
	var b [4]byte
	for i := 0; i < bits && i < 32; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	return netip.AddrFrom4(b).String()
}

func hostNames(p *plan.Plan) []string {
	var out []string
	for _, h := range p.Hosts {
		out = append(out, h.Name)
	}
	return out
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
