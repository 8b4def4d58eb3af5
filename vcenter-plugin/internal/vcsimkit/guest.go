package vcsimkit

import (
	"context"
	"encoding/xml"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"
)

// SVM is what the guest hooks learn about a simulated storage VM when it
// changes power state: enough to start the real daemons for it.
type SVM struct {
	Name       string
	MoRef      string
	Host       string            // ESXi host name
	Properties map[string]string // vApp properties (id -> value), as the guest reads them from the OVF environment
	OvfEnv     string            // the OVF environment document (guestinfo.ovfEnv)
	// RDMs are the physical-mode raw device mappings, by canonical name
	// (naa.*); Passthrough the PCI ids of passthrough devices.
	RDMs        []string
	Passthrough []string
}

// GuestReport is what the guest says once it has booted.
type GuestReport struct {
	IP string // reported by VMware Tools; "" uses the vApp property cairn.mgmt.address
	// GuestInfo is published as guestinfo.* keys in the VM's extraConfig,
	// as `vmware-rpctool info-set` would (e.g. guestinfo.cairn.ready=1).
	GuestInfo map[string]string
}

// GuestHooks are called by the kit, outside any simulator lock, when an SVM
// (a VM with vApp properties named cairn.*) powers on or off. PoweredOn
// may block until the guest is ready (bounded by ctx); an error leaves the
// guest without tools, as a VM that fails to boot.
type GuestHooks interface {
	PoweredOn(ctx context.Context, svm SVM) (GuestReport, error)
	PoweredOff(ctx context.Context, svm SVM) error
}

// ReadyGuest boots instantly and reports ready: the default for tests that
// do not run daemons.
type ReadyGuest struct{}

func (ReadyGuest) PoweredOn(ctx context.Context, svm SVM) (GuestReport, error) {
	return GuestReport{GuestInfo: map[string]string{ReadyKey: "ready", ThumbprintKey: SimThumbprint}}, nil
}
func (ReadyGuest) PoweredOff(ctx context.Context, svm SVM) error { return nil }

// SimThumbprint is the gateway thumbprint ReadyGuest publishes.
const SimThumbprint = "5151515151515151515151515151515151515151515151515151515151515151"

// Guest info keys the SVM publishes (contract with the appliance's firstboot).
const (
	ReadyKey      = "guestinfo.cairn.ready"          // "configured", then "ready" or "error: ..." (appliance firstboot)
	ThumbprintKey = "guestinfo.cairn.tls.thumbprint" // proposed: SHA-256 of the gateway certificate, hex
	OvfEnvKey     = "guestinfo.ovfEnv"
)

// powerEvent is one observed power-state change.
type powerEvent struct {
	vm    types.ManagedObjectReference
	state types.VirtualMachinePowerState
}

// guestWatcher is a Registry handler: it sees every property update and
// queues VM power changes for its worker goroutine, which runs the hooks.
// The handler itself never blocks (the simulator calls it under locks).
type guestWatcher struct {
	self types.ManagedObjectReference
	kit  *Kit

	mu      sync.Mutex
	queue   []powerEvent
	wake    chan struct{}
	pending sync.WaitGroup // events queued or being handled
}

func (w *guestWatcher) Reference() types.ManagedObjectReference { return w.self }

func (w *guestWatcher) PutObject(ctx *simulator.Context, obj mo.Reference) {
	switch x := obj.(type) {
	case *simulator.VirtualMachine:
		fixEmptyEnums(x)
	case *simulator.Task:
		fixTaskName(x)
	}
}

// fixTaskName gives a task the method name vSphere reports
// ("CloneVM_Task"); vcsim reports "CloneVM", which pyVmomi cannot resolve
// (its WaitForTask fails on a running task). Called from Put, before the
// task's goroutine starts.
func fixTaskName(t *simulator.Task) {
	name := t.Info.Name
	if strings.HasSuffix(name, "_Task") {
		return
	}
	// vcsim names some tasks "...Vm" where the method says "...VM".
	for _, n := range []string{name, strings.Replace(name, "Vm", "VM", 1)} {
		if _, ok := types.TypeFunc()(n + "_Task"); ok {
			t.Info.Name = n + "_Task"
			return
		}
	}
}

func (w *guestWatcher) RemoveObject(*simulator.Context, types.ManagedObjectReference) {}

func (w *guestWatcher) UpdateObject(ctx *simulator.Context, obj mo.Reference, changes []types.PropertyChange) {
	ref := obj.Reference()
	if ref.Type != "VirtualMachine" {
		return
	}
	for _, c := range changes {
		if c.Name != "runtime.powerState" {
			continue
		}
		state, ok := c.Val.(types.VirtualMachinePowerState)
		if !ok {
			continue
		}
		w.mu.Lock()
		w.pending.Add(1)
		w.queue = append(w.queue, powerEvent{vm: ref, state: state})
		w.mu.Unlock()
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
}

// run handles events in order until ctx ends. Owned by Kit (started in
// Start, stopped by Close).
func (w *guestWatcher) run(ctx context.Context) {
	for {
		w.mu.Lock()
		var ev *powerEvent
		if len(w.queue) > 0 {
			e := w.queue[0]
			w.queue = w.queue[1:]
			ev = &e
		}
		w.mu.Unlock()
		if ev == nil {
			select {
			case <-ctx.Done():
				return
			case <-w.wake:
			}
			continue
		}
		w.handle(ctx, *ev)
		w.pending.Done()
	}
}

func (w *guestWatcher) handle(ctx context.Context, ev powerEvent) {
	k := w.kit
	sctx := k.simContext()
	vm, ok := sctx.Map.Get(ev.vm).(*simulator.VirtualMachine)
	if !ok {
		return
	}
	var svm SVM
	var isSVM bool
	var current types.VirtualMachinePowerState
	sctx.WithLock(vm, func() {
		current = vm.Runtime.PowerState
		svm, isSVM = describeSVM(sctx, vm)
	})
	log := k.log.With("vm", svm.Name, "host", svm.Host)
	hctx, cancel := context.WithTimeout(ctx, k.opts.BootTimeout)
	defer cancel()
	if current != ev.state {
		// Superseded by a later change, which is queued too. A power-off
		// still reaches the guest: after a quick power cycle (a reset, or
		// a shutdown then power-on) the guest's daemons must have stopped
		// before the next start.
		if isSVM && ev.state != types.VirtualMachinePowerStatePoweredOn {
			if err := k.opts.Guest.PoweredOff(hctx, svm); err != nil {
				log.Warn("power-off hook failed", "err", err)
			}
		}
		return
	}
	switch ev.state {
	case types.VirtualMachinePowerStatePoweredOn:
		report := GuestReport{GuestInfo: map[string]string{}}
		if isSVM {
			var err error
			report, err = k.opts.Guest.PoweredOn(hctx, svm)
			if err != nil {
				log.Warn("simulated SVM did not boot", "err", err)
				return
			}
		}
		if report.IP == "" {
			report.IP, _, _ = strings.Cut(svm.Properties["cairn.mgmt.address"], "/")
		}
		sctx.AutoUpdate(vm, func() {
			if vm.Runtime.PowerState != types.VirtualMachinePowerStatePoweredOn {
				return
			}
			setGuest(vm, true, report.IP)
			info := map[string]string{}
			for k, v := range report.GuestInfo {
				info[k] = v
			}
			if isSVM {
				info[OvfEnvKey] = svm.OvfEnv
			}
			setExtraConfig(vm, info)
		})
		log.Info("simulated guest up", "ip", report.IP)
	case types.VirtualMachinePowerStatePoweredOff, types.VirtualMachinePowerStateSuspended:
		sctx.AutoUpdate(vm, func() {
			setGuest(vm, false, "")
			clearGuestInfo(vm)
		})
		if isSVM {
			if err := k.opts.Guest.PoweredOff(hctx, svm); err != nil {
				log.Warn("power-off hook failed", "err", err)
			}
		}
	}
}

func setGuest(vm *simulator.VirtualMachine, running bool, ip string) {
	if vm.Guest == nil {
		vm.Guest = &types.GuestInfo{}
	}
	g := vm.Guest
	if running {
		g.ToolsStatus = types.VirtualMachineToolsStatusToolsOk
		g.ToolsRunningStatus = string(types.VirtualMachineToolsRunningStatusGuestToolsRunning)
		g.ToolsVersionStatus2 = string(types.VirtualMachineToolsVersionStatusGuestToolsUnmanaged)
		g.GuestState = "running"
		g.IpAddress = ip
		g.HostName = vm.Name
		g.Net = nil
		for _, d := range vm.Config.Hardware.Device {
			if nic, ok := d.(types.BaseVirtualEthernetCard); ok {
				card := nic.GetVirtualEthernetCard()
				n := types.GuestNicInfo{MacAddress: card.MacAddress, Connected: true, DeviceConfigId: card.Key}
				if len(g.Net) == 0 && ip != "" {
					n.IpAddress = []string{ip}
				}
				g.Net = append(g.Net, n)
			}
		}
	} else {
		g.ToolsStatus = types.VirtualMachineToolsStatusToolsNotRunning
		g.ToolsRunningStatus = string(types.VirtualMachineToolsRunningStatusGuestToolsNotRunning)
		g.GuestState = "notRunning"
		g.IpAddress = ""
		g.Net = nil
	}
	vm.Summary.Guest = &types.VirtualMachineGuestSummary{
		GuestId: g.GuestId, GuestFullName: g.GuestFullName, ToolsStatus: g.ToolsStatus,
		ToolsRunningStatus: g.ToolsRunningStatus, HostName: g.HostName, IpAddress: g.IpAddress,
	}
}

func setExtraConfig(vm *simulator.VirtualMachine, kv map[string]string) {
	keys := make([]string, 0, len(kv))
	for k := range kv {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, key := range keys {
		found := false
		for i, o := range vm.Config.ExtraConfig {
			if ov := o.GetOptionValue(); ov != nil && ov.Key == key {
				vm.Config.ExtraConfig[i] = &types.OptionValue{Key: key, Value: kv[key]}
				found = true
			}
		}
		if !found {
			vm.Config.ExtraConfig = append(vm.Config.ExtraConfig, &types.OptionValue{Key: key, Value: kv[key]})
		}
	}
}

// clearGuestInfo drops what a running guest published (a guest's
// info-set values do not survive a power cycle).
func clearGuestInfo(vm *simulator.VirtualMachine) {
	var keep []types.BaseOptionValue
	for _, o := range vm.Config.ExtraConfig {
		if ov := o.GetOptionValue(); ov != nil && strings.HasPrefix(ov.Key, "guestinfo.") {
			continue
		}
		keep = append(keep, o)
	}
	vm.Config.ExtraConfig = keep
}

// describeSVM reads what the hooks need; the caller holds vm's lock.
func describeSVM(ctx *simulator.Context, vm *simulator.VirtualMachine) (SVM, bool) {
	s := SVM{Name: vm.Name, MoRef: vm.Self.Value, Properties: map[string]string{}}
	if vm.Runtime.Host != nil {
		if h, ok := ctx.Map.Get(*vm.Runtime.Host).(*simulator.HostSystem); ok {
			s.Host = h.Name
		}
	}
	isSVM := false
	if vm.Config == nil {
		return s, false
	}
	if va, ok := vm.Config.VAppConfig.(*types.VmConfigInfo); ok && va != nil {
		for _, p := range va.Property {
			v := p.Value
			if v == "" {
				v = p.DefaultValue
			}
			s.Properties[p.Id] = v
			if strings.HasPrefix(p.Id, "cairn.") {
				isSVM = true
			}
		}
	}
	for _, d := range vm.Config.Hardware.Device {
		switch dev := d.(type) {
		case *types.VirtualDisk:
			if b, ok := dev.Backing.(*types.VirtualDiskRawDiskMappingVer1BackingInfo); ok {
				s.RDMs = append(s.RDMs, strings.TrimPrefix(b.DeviceName, "/vmfs/devices/disks/"))
			}
		case *types.VirtualPCIPassthrough:
			if b, ok := dev.Backing.(*types.VirtualPCIPassthroughDeviceBackingInfo); ok {
				s.Passthrough = append(s.Passthrough, b.Id)
			}
		}
	}
	s.OvfEnv = OvfEnvironment(s, vm.Self.Value)
	return s, isSVM
}

// OvfEnvironment renders the OVF environment document vSphere hands a
// guest whose vApp uses the com.vmware.guestInfo transport (DMTF DSP0243
// environment, VMware "ve" extensions). Properties are sorted by key.
func OvfEnvironment(s SVM, vcenterID string) string {
	type prop struct {
		Key   string `xml:"oe:key,attr"`
		Value string `xml:"oe:value,attr"`
	}
	type env struct {
		XMLName  xml.Name `xml:"Environment"`
		Xmlns    string   `xml:"xmlns,attr"`
		XmlnsOE  string   `xml:"xmlns:oe,attr"`
		XmlnsVE  string   `xml:"xmlns:ve,attr"`
		ID       string   `xml:"oe:id,attr"`
		VCID     string   `xml:"ve:vCenterId,attr"`
		Platform struct {
			Kind    string
			Version string
			Vendor  string
			Locale  string
		} `xml:"PlatformSection"`
		Props []prop `xml:"PropertySection>Property"`
	}
	e := env{Xmlns: "http://schemas.dmtf.org/ovf/environment/1", XmlnsOE: "http://schemas.dmtf.org/ovf/environment/1",
		XmlnsVE: "http://www.vmware.com/schema/ovfenv", VCID: vcenterID}
	e.Platform.Kind, e.Platform.Version, e.Platform.Vendor, e.Platform.Locale = "VMware ESXi", "8.0.3", "VMware, Inc.", "en"
	keys := make([]string, 0, len(s.Properties))
	for k := range s.Properties {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		e.Props = append(e.Props, prop{Key: k, Value: s.Properties[k]})
	}
	out, err := xml.MarshalIndent(e, "", "  ")
	if err != nil {
		return fmt.Sprintf("<!-- %v -->", err) // cannot happen: only strings
	}
	return xml.Header + string(out)
}

// fixEmptyEnums sets VM runtime enums that vcsim leaves empty; pyVmomi
// cannot deserialize an empty enum (govmomi issue 4084).
func fixEmptyEnums(vm *simulator.VirtualMachine) {
	if vm.Runtime.FaultToleranceState == "" {
		vm.Runtime.FaultToleranceState = types.VirtualMachineFaultToleranceStateNotConfigured
	}
	if vm.Runtime.RecordReplayState == "" {
		vm.Runtime.RecordReplayState = types.VirtualMachineRecordReplayStateInactive
	}
	if vm.Summary.Runtime.FaultToleranceState == "" {
		vm.Summary.Runtime.FaultToleranceState = types.VirtualMachineFaultToleranceStateNotConfigured
	}
	if vm.Summary.Runtime.RecordReplayState == "" {
		vm.Summary.Runtime.RecordReplayState = types.VirtualMachineRecordReplayStateInactive
	}
}

// WaitIdle blocks until every queued power change has been handled (tests
// use it to avoid sleeping), or ctx ends.
func (k *Kit) WaitIdle(ctx context.Context) error {
	done := make(chan struct{})
	go func() { k.watcher.pending.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(k.opts.BootTimeout + time.Second):
		return fmt.Errorf("guest hooks still busy after %s", k.opts.BootTimeout)
	}
}
