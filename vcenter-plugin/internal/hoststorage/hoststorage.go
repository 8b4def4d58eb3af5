// Package hoststorage drives one ESXi host's storage side through vCenter:
// the software iSCSI adapter (enable, vmkernel port binding, send targets),
// rescans, LUN listing and VMFS datastore creation. Every operation is
// idempotent: calling it again when the host is already configured changes
// nothing, which is what makes the deploy and datastore engines resumable.
package hoststorage

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/property"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"
)

// DefaultISCSIPort is the iSCSI port every SVM target listens on.
const DefaultISCSIPort = 3260

// Host wraps one ESXi host.
type Host struct {
	Name string
	obj  *object.HostSystem
	c    *vim25.Client
}

// New returns the storage view of host.
func New(c *vim25.Client, host *object.HostSystem) *Host {
	return &Host{Name: host.Name(), obj: host, c: c}
}

// ISCSIState is the software iSCSI configuration of a host.
type ISCSIState struct {
	Enabled     bool
	HBA         string // adapter device, e.g. vmhba65
	IQN         string
	SendTargets []string // host:port
}

func (h *Host) storageSystem(ctx context.Context) (*object.HostStorageSystem, error) {
	s, err := h.obj.ConfigManager().StorageSystem(ctx)
	if err != nil {
		return nil, fmt.Errorf("host %s: storage system: %w", h.Name, err)
	}
	return s, nil
}

func (h *Host) deviceInfo(ctx context.Context) (*types.HostStorageDeviceInfo, error) {
	ss, err := h.storageSystem(ctx)
	if err != nil {
		return nil, err
	}
	var m mo.HostStorageSystem
	if err := ss.Properties(ctx, ss.Reference(), []string{"storageDeviceInfo"}, &m); err != nil {
		return nil, fmt.Errorf("host %s: read storage devices: %w", h.Name, err)
	}
	if m.StorageDeviceInfo == nil {
		return &types.HostStorageDeviceInfo{}, nil
	}
	return m.StorageDeviceInfo, nil
}

// ISCSI reads the host's software iSCSI state.
func (h *Host) ISCSI(ctx context.Context) (ISCSIState, error) {
	info, err := h.deviceInfo(ctx)
	if err != nil {
		return ISCSIState{}, err
	}
	st := ISCSIState{Enabled: info.SoftwareInternetScsiEnabled}
	for _, a := range info.HostBusAdapter {
		if hba, ok := a.(*types.HostInternetScsiHba); ok && hba.IsSoftwareBased {
			st.HBA, st.IQN = hba.Device, hba.IScsiName
			for _, t := range hba.ConfiguredSendTarget {
				port := t.Port
				if port == 0 {
					port = DefaultISCSIPort
				}
				st.SendTargets = append(st.SendTargets, fmt.Sprintf("%s:%d", t.Address, port))
			}
		}
	}
	return st, nil
}

// EnableISCSI turns the software adapter on (if it is not) and returns its
// state, with the adapter device and the host's IQN.
func (h *Host) EnableISCSI(ctx context.Context) (ISCSIState, error) {
	st, err := h.ISCSI(ctx)
	if err != nil {
		return st, err
	}
	if !st.Enabled || st.HBA == "" {
		ss, err := h.storageSystem(ctx)
		if err != nil {
			return st, err
		}
		req := types.UpdateSoftwareInternetScsiEnabled{This: ss.Reference(), Enabled: true}
		if _, err := methods.UpdateSoftwareInternetScsiEnabled(ctx, h.c, &req); err != nil {
			return st, fmt.Errorf("host %s: enable software iSCSI: %w", h.Name, err)
		}
		if st, err = h.ISCSI(ctx); err != nil {
			return st, err
		}
	}
	if st.HBA == "" {
		return st, fmt.Errorf("host %s: software iSCSI is enabled but no adapter appeared: check the host's iSCSI license and logs", h.Name)
	}
	return st, nil
}

// AddSendTargets adds the addresses (host or host:port) not configured yet.
func (h *Host) AddSendTargets(ctx context.Context, addrs []string) error {
	st, err := h.ISCSI(ctx)
	if err != nil {
		return err
	}
	if st.HBA == "" {
		return fmt.Errorf("host %s: software iSCSI is not enabled: enable it first", h.Name)
	}
	have := map[string]bool{}
	for _, t := range st.SendTargets {
		have[t] = true
	}
	var add []types.HostInternetScsiHbaSendTarget
	for _, a := range addrs {
		host, port, err := splitTarget(a)
		if err != nil {
			return fmt.Errorf("host %s: send target %q: %w", h.Name, a, err)
		}
		if !have[fmt.Sprintf("%s:%d", host, port)] {
			add = append(add, types.HostInternetScsiHbaSendTarget{Address: host, Port: port})
		}
	}
	if len(add) == 0 {
		return nil
	}
	ss, err := h.storageSystem(ctx)
	if err != nil {
		return err
	}
	req := types.AddInternetScsiSendTargets{This: ss.Reference(), IScsiHbaDevice: st.HBA, Targets: add}
	if _, err := methods.AddInternetScsiSendTargets(ctx, h.c, &req); err != nil {
		return fmt.Errorf("host %s: add send targets: %w", h.Name, err)
	}
	return nil
}

// RemoveSendTargets removes those of addrs (host:port) the adapter has;
// other send targets (another array's) stay. ESXi drops the static targets
// it discovered through a removed send target with it.
func (h *Host) RemoveSendTargets(ctx context.Context, addrs []string) (int, error) {
	st, err := h.ISCSI(ctx)
	if err != nil || st.HBA == "" {
		return 0, err
	}
	have := map[string]bool{}
	for _, t := range st.SendTargets {
		have[t] = true
	}
	var rm []types.HostInternetScsiHbaSendTarget
	for _, a := range addrs {
		host, port, err := splitTarget(a)
		if err != nil {
			return 0, fmt.Errorf("host %s: send target %q: %w", h.Name, a, err)
		}
		if have[fmt.Sprintf("%s:%d", host, port)] {
			rm = append(rm, types.HostInternetScsiHbaSendTarget{Address: host, Port: port})
		}
	}
	if len(rm) == 0 {
		return 0, nil
	}
	ss, err := h.storageSystem(ctx)
	if err != nil {
		return 0, err
	}
	req := types.RemoveInternetScsiSendTargets{This: ss.Reference(), IScsiHbaDevice: st.HBA, Targets: rm}
	if _, err := methods.RemoveInternetScsiSendTargets(ctx, h.c, &req); err != nil {
		return 0, fmt.Errorf("host %s: remove send targets: %w", h.Name, err)
	}
	return len(rm), nil
}

func splitTarget(a string) (string, int32, error) {
	host, portStr, ok := strings.Cut(a, ":")
	if !ok {
		return a, DefaultISCSIPort, nil
	}
	p, err := strconv.Atoi(portStr)
	if err != nil || p <= 0 || p > 65535 {
		return "", 0, fmt.Errorf("bad port %q", portStr)
	}
	return host, int32(p), nil
}

// Rescan rescans every adapter and then VMFS volumes, so new LUNs and the
// datastores on them appear.
func (h *Host) Rescan(ctx context.Context) error {
	ss, err := h.storageSystem(ctx)
	if err != nil {
		return err
	}
	if err := ss.RescanAllHba(ctx); err != nil {
		return fmt.Errorf("host %s: rescan adapters: %w", h.Name, err)
	}
	if err := ss.RescanVmfs(ctx); err != nil {
		return fmt.Errorf("host %s: rescan VMFS: %w", h.Name, err)
	}
	return nil
}

// Disks returns the SCSI disks the host sees.
func (h *Host) Disks(ctx context.Context) ([]types.HostScsiDisk, error) {
	info, err := h.deviceInfo(ctx)
	if err != nil {
		return nil, err
	}
	var out []types.HostScsiDisk
	for _, l := range info.ScsiLun {
		if d, ok := l.(*types.HostScsiDisk); ok {
			out = append(out, *d)
		}
	}
	return out, nil
}

// HasLUN reports whether the host sees naa.<wwn>.
func (h *Host) HasLUN(ctx context.Context, wwn string) (bool, error) {
	size, err := h.LUNSize(ctx, wwn)
	return size > 0, err
}

// LUNSize returns the size in bytes of naa.<wwn> as the host sees it (as
// of its last rescan), 0 when it does not see it.
func (h *Host) LUNSize(ctx context.Context, wwn string) (int64, error) {
	disks, err := h.Disks(ctx)
	if err != nil {
		return 0, err
	}
	want := "naa." + strings.ToLower(wwn)
	for _, d := range disks {
		if d.CanonicalName == want {
			return d.Capacity.Block * int64(d.Capacity.BlockSize), nil
		}
	}
	return 0, nil
}

// EnsureVmkernelPort returns the vmkernel NIC on portgroup, creating the
// port group (on vSwitch) and the NIC with a static address when create is
// set, and binds it to the software iSCSI adapter hba.
func (h *Host) EnsureVmkernelPort(ctx context.Context, hba, portgroup, vswitch, ip, mask string, create bool) (string, error) {
	ns, err := h.obj.ConfigManager().NetworkSystem(ctx)
	if err != nil {
		return "", fmt.Errorf("host %s: network system: %w", h.Name, err)
	}
	var m mo.HostNetworkSystem
	if err := ns.Properties(ctx, ns.Reference(), []string{"networkInfo"}, &m); err != nil {
		return "", fmt.Errorf("host %s: read network: %w", h.Name, err)
	}
	vmk := ""
	pgExists := false
	if m.NetworkInfo != nil {
		for _, v := range m.NetworkInfo.Vnic {
			if v.Portgroup == portgroup {
				vmk = v.Device
			}
		}
		for _, pg := range m.NetworkInfo.Portgroup {
			pgExists = pgExists || pg.Spec.Name == portgroup
		}
		for _, sw := range m.NetworkInfo.Vswitch {
			for _, pg := range sw.Portgroup {
				pgExists = pgExists || pg == portgroup || strings.HasSuffix(pg, "-"+portgroup)
			}
		}
	}
	if vmk == "" {
		if !create {
			return "", fmt.Errorf("host %s: no vmkernel port on port group %q: create one, or set iscsi.create_vmkernel in the plan", h.Name, portgroup)
		}
		if !pgExists {
			spec := types.HostPortGroupSpec{Name: portgroup, VswitchName: vswitch, Policy: types.HostNetworkPolicy{}}
			if err := ns.AddPortGroup(ctx, spec); err != nil {
				return "", fmt.Errorf("host %s: create port group %s on %s: %w", h.Name, portgroup, vswitch, err)
			}
		}
		nic := types.HostVirtualNicSpec{Ip: &types.HostIpConfig{Dhcp: false, IpAddress: ip, SubnetMask: mask}, Mtu: 9000}
		if vmk, err = ns.AddVirtualNic(ctx, portgroup, nic); err != nil {
			return "", fmt.Errorf("host %s: create vmkernel port on %s: %w", h.Name, portgroup, err)
		}
	}
	if err := h.singleUplink(ctx, ns, portgroup); err != nil {
		return vmk, err
	}
	if err := h.bind(ctx, hba, vmk); err != nil {
		return vmk, err
	}
	return vmk, nil
}

func (h *Host) bind(ctx context.Context, hba, vmk string) error {
	var hm mo.HostSystem
	if err := h.obj.Properties(ctx, h.obj.Reference(), []string{"configManager.iscsiManager"}, &hm); err != nil {
		return fmt.Errorf("host %s: read iSCSI manager: %w", h.Name, err)
	}
	if hm.ConfigManager.IscsiManager == nil {
		return fmt.Errorf("host %s: no iSCSI manager: cannot bind %s to %s", h.Name, vmk, hba)
	}
	ref := *hm.ConfigManager.IscsiManager
	bound, err := methods.QueryBoundVnics(ctx, h.c, &types.QueryBoundVnics{This: ref, IScsiHbaName: hba})
	if err != nil {
		return fmt.Errorf("host %s: list vmkernel ports bound to %s: %w", h.Name, hba, err)
	}
	for _, p := range bound.Returnval {
		if p.VnicDevice == vmk {
			return nil
		}
	}
	if _, err := methods.BindVnic(ctx, h.c, &types.BindVnic{This: ref, IScsiHbaName: hba, VnicDevice: vmk}); err != nil {
		return fmt.Errorf("host %s: bind %s to %s: %w", h.Name, vmk, hba, err)
	}
	return nil
}

// EnsurePortgroup creates the standard port group on vswitch if the host
// lacks it.
func (h *Host) EnsurePortgroup(ctx context.Context, portgroup, vswitch string) error {
	ns, err := h.obj.ConfigManager().NetworkSystem(ctx)
	if err != nil {
		return fmt.Errorf("host %s: network system: %w", h.Name, err)
	}
	var m mo.HostNetworkSystem
	if err := ns.Properties(ctx, ns.Reference(), []string{"networkInfo"}, &m); err != nil {
		return fmt.Errorf("host %s: read network: %w", h.Name, err)
	}
	if m.NetworkInfo != nil {
		for _, pg := range m.NetworkInfo.Portgroup {
			if pg.Spec.Name == portgroup {
				return nil
			}
		}
	}
	if err := ns.AddPortGroup(ctx, types.HostPortGroupSpec{Name: portgroup, VswitchName: vswitch, Policy: types.HostNetworkPolicy{}}); err != nil {
		return fmt.Errorf("host %s: create port group %s on %s: %w", h.Name, portgroup, vswitch, err)
	}
	return nil
}

// Datastore returns the datastore called name mounted on the host, or nil
// (also when the host has it but unmounted: see DatastoreMount).
func (h *Host) Datastore(ctx context.Context, name string) (*mo.Datastore, error) {
	ds, mounted, err := h.DatastoreMount(ctx, name)
	if err != nil || !mounted {
		return nil, err
	}
	return ds, nil
}

// DatastoreMount returns the datastore called name that the host has,
// mounted or not (ESXi keeps an unmounted VMFS in the host's list until
// its LUN is detached or gone), or nil.
func (h *Host) DatastoreMount(ctx context.Context, name string) (*mo.Datastore, bool, error) {
	var hm mo.HostSystem
	if err := h.obj.Properties(ctx, h.obj.Reference(), []string{"datastore"}, &hm); err != nil {
		return nil, false, fmt.Errorf("host %s: list datastores: %w", h.Name, err)
	}
	if len(hm.Datastore) == 0 {
		return nil, false, nil
	}
	var dss []mo.Datastore
	if err := property.DefaultCollector(h.c).Retrieve(ctx, hm.Datastore, []string{"name", "summary", "info", "host", "vm"}, &dss); err != nil {
		return nil, false, fmt.Errorf("host %s: read datastores: %w", h.Name, err)
	}
	for i := range dss {
		if dss[i].Name != name {
			continue
		}
		for _, m := range dss[i].Host {
			if m.Key == h.obj.Reference() {
				return &dss[i], m.MountInfo.Mounted == nil || *m.MountInfo.Mounted, nil
			}
		}
		return &dss[i], true, nil
	}
	return nil, false, nil
}

// ExpandVMFS grows datastore name over the free space its LUN gained
// (the host must have rescanned since the LUN grew) and returns its new
// capacity. It takes the option ESXi offers whose extent ends last.
func (h *Host) ExpandVMFS(ctx context.Context, name string) (int64, error) {
	ds, err := h.Datastore(ctx, name)
	if err != nil {
		return 0, err
	}
	if ds == nil {
		return 0, fmt.Errorf("host %s does not mount datastore %s", h.Name, name)
	}
	dss, err := h.obj.ConfigManager().DatastoreSystem(ctx)
	if err != nil {
		return 0, fmt.Errorf("host %s: datastore system: %w", h.Name, err)
	}
	q, err := methods.QueryVmfsDatastoreExpandOptions(ctx, h.c, &types.QueryVmfsDatastoreExpandOptions{This: dss.Reference(), Datastore: ds.Reference()})
	if err != nil {
		return 0, fmt.Errorf("host %s: expansion options of %s: %w", h.Name, name, err)
	}
	var best *types.VmfsDatastoreExpandSpec
	for _, o := range q.Returnval {
		spec, ok := o.Spec.(*types.VmfsDatastoreExpandSpec)
		if !ok || len(spec.Partition.Partition) == 0 {
			continue
		}
		if best == nil || spec.Partition.Partition[0].EndSector > best.Partition.Partition[0].EndSector {
			best = spec
		}
	}
	if best == nil {
		return 0, fmt.Errorf("host %s offers no free space to grow datastore %s into: check that the host sees the LUN's new size (rescan its storage adapters)", h.Name, name)
	}
	res, err := methods.ExpandVmfsDatastore(ctx, h.c, &types.ExpandVmfsDatastore{This: dss.Reference(), Datastore: ds.Reference(), Spec: *best})
	if err != nil {
		return 0, fmt.Errorf("host %s: grow datastore %s: %w", h.Name, name, err)
	}
	var grown mo.Datastore
	if err := property.DefaultCollector(h.c).RetrieveOne(ctx, res.Returnval, []string{"summary"}, &grown); err != nil {
		return 0, fmt.Errorf("host %s: read datastore %s: %w", h.Name, name, err)
	}
	return grown.Summary.Capacity, nil
}

// CreateVMFS creates datastore name on the LUN naa.<wwn> with one VMFS
// partition over the whole LUN: the "all extent" option of
// QueryVmfsDatastoreCreateOptions, chosen by type, never by position.
func (h *Host) CreateVMFS(ctx context.Context, wwn, name string) (types.ManagedObjectReference, error) {
	dss, err := h.obj.ConfigManager().DatastoreSystem(ctx)
	if err != nil {
		return types.ManagedObjectReference{}, fmt.Errorf("host %s: datastore system: %w", h.Name, err)
	}
	path := "/vmfs/devices/disks/naa." + strings.ToLower(wwn)
	opts, err := dss.QueryVmfsDatastoreCreateOptions(ctx, path)
	if err != nil {
		return types.ManagedObjectReference{}, fmt.Errorf("host %s: VMFS options for %s: %w", h.Name, path, err)
	}
	spec, err := allExtentSpec(opts)
	if err != nil {
		return types.ManagedObjectReference{}, fmt.Errorf("host %s: %s: %w", h.Name, path, err)
	}
	spec.Vmfs.VolumeName = name
	ds, err := dss.CreateVmfsDatastore(ctx, *spec)
	if err != nil {
		return types.ManagedObjectReference{}, fmt.Errorf("host %s: create VMFS %s on %s: %w", h.Name, name, path, err)
	}
	return ds.Reference(), nil
}

// allExtentSpec picks the option that uses the whole disk
// (VmfsDatastoreAllExtentOption). ESXi may list other layouts first (a
// single extent over one free region), so the first option is not it.
func allExtentSpec(opts []types.VmfsDatastoreOption) (*types.VmfsDatastoreCreateSpec, error) {
	var offered []string
	for _, o := range opts {
		offered = append(offered, fmt.Sprintf("%T", o.Info))
		if _, all := o.Info.(*types.VmfsDatastoreAllExtentOption); !all {
			continue
		}
		spec, ok := o.Spec.(*types.VmfsDatastoreCreateSpec)
		if !ok {
			return nil, fmt.Errorf("the all-extent VMFS option carries a %T, not a create spec", o.Spec)
		}
		return spec, nil
	}
	if len(opts) == 0 {
		return nil, fmt.Errorf("no VMFS layout offered: is the LUN empty and writable?")
	}
	return nil, fmt.Errorf("no VMFS layout over the whole LUN offered (got %s): the LUN has partitions; clear them (only if they hold nothing you need), rescan, then retry", strings.Join(offered, ", "))
}
