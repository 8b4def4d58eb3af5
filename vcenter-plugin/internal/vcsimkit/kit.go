// Package vcsimkit is Cairn's vCenter simulator kit: govmomi's simulator
// (v0.56.0) plus what it lacks for Cairn — software iSCSI with send targets
// and LUN discovery, VMFS datastore creation, vmkernel NICs, per-host local
// disks and PCI passthrough devices, the OVF environment on power-on, tools
// status and IP, and hooks that start and stop real SVM daemons.
//
// Missing methods are added by embedding the simulated object and putting
// the wrapper back into the registry under the same reference.
package vcsimkit

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/url"
	"sort"
	"sync"
	"time"

	"github.com/vmware/govmomi"
	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cairn-storage/cairn/appliance/contract"
)

// Options shape the simulated vCenter. Zero values get the defaults noted.
type Options struct {
	Hosts        int    // ESXi hosts in cluster "cairn-cluster"; default 4
	DisksPerHost int    // local candidate disks per host; default 3 (the first an SSD)
	DiskSize     int64  // bytes per local disk; default 800 GiB
	Dir          string // where datastore files live; required
	Listen       string // default 127.0.0.1:0
	// Username/Password for the SDK; generated when empty (never vcsim's
	// well-known default, so a forgotten demo is not an open door).
	Username, Password string
	LUNs               LUNSource  // nil: iSCSI rescans find nothing
	Guest              GuestHooks // nil: ReadyGuest
	// Template, when set, is the name of an SVM template VM created on the
	// first host's local datastore with the vApp properties of the Cairn OVA.
	Template    string
	BootTimeout time.Duration // bound on one PoweredOn hook; default 5 min
	Logger      *slog.Logger
}

// Kit is a running simulated vCenter.
type Kit struct {
	URL                *url.URL // SDK endpoint, without credentials
	Username, Password string
	// Thumbprint is the SHA-1 thumbprint of the simulator's certificate, as
	// vSphere clients expect it.
	Thumbprint string

	opts    Options
	log     *slog.Logger
	model   *simulator.Model
	server  *simulator.Server
	watcher *guestWatcher
	cancel  context.CancelFunc
	done    chan struct{}

	mu         sync.Mutex
	vmfs       map[string]*vmfsVolume
	hosts      map[types.ManagedObjectReference]*kitHost
	vaaiFailed map[string]bool // host/canonical: ATS probe failed (vaai.go)

	usersMu sync.Mutex
	users   map[string]kitUser // lower-case name -> user (authz.go)
}

type kitHost struct {
	name       string
	storage    *storageSystem
	datastores *datastoreSystem
	network    *networkSystem
	disks      []LocalDisk
}

// Cluster and other fixed inventory names of the kit.
const (
	Datacenter   = "DC0"
	ClusterName  = "cairn-cluster"
	VMNetwork    = "VM Network"
	ISCSIPortGrp = "iSCSI"
)

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return hex.EncodeToString(b)
}

// Start builds the inventory and serves it over HTTPS on Options.Listen.
func Start(opts Options) (*Kit, error) {
	if opts.Dir == "" {
		return nil, fmt.Errorf("vcsimkit: Options.Dir is required (datastore files go there)")
	}
	if opts.Hosts == 0 {
		opts.Hosts = 4
	}
	if opts.DisksPerHost == 0 {
		opts.DisksPerHost = 3
	}
	if opts.DiskSize == 0 {
		opts.DiskSize = 800 << 30
	}
	if opts.Listen == "" {
		opts.Listen = "127.0.0.1:0"
	}
	if opts.Username == "" {
		opts.Username = "cairn-" + randomHex(3) + "@vsphere.local"
	}
	if opts.Password == "" {
		opts.Password = randomHex(12)
	}
	if opts.Guest == nil {
		opts.Guest = ReadyGuest{}
	}
	if opts.BootTimeout == 0 {
		opts.BootTimeout = 5 * time.Minute
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	model := simulator.VPX()
	model.Datacenter = 1
	model.Cluster = 1
	model.ClusterHost = opts.Hosts
	model.Host = 0
	model.Machine = 0
	model.Datastore = 0
	model.Pool = 0
	if err := model.Create(); err != nil {
		return nil, fmt.Errorf("vcsimkit: create model: %w", err)
	}
	k := &Kit{opts: opts, log: opts.Logger, model: model, vmfs: map[string]*vmfsVolume{}, hosts: map[types.ManagedObjectReference]*kitHost{}}
	if err := k.install(); err != nil {
		model.Remove()
		return nil, err
	}
	k.installAuthz()
	model.Service.Listen = &url.URL{Host: opts.Listen, User: url.UserPassword(opts.Username, opts.Password)}
	model.Service.TLS = new(tls.Config)
	model.Service.HandleFunc(CloneTicketPath, k.cloneTicket)
	k.server = model.Service.NewServer()
	u := *k.server.URL
	u.User = nil
	k.URL = &u
	k.Username, k.Password = opts.Username, opts.Password
	k.Thumbprint = k.server.CertificateInfo().ThumbprintSHA1

	ctx, cancel := context.WithCancel(context.Background())
	k.cancel = cancel
	k.done = make(chan struct{})
	go func() { defer close(k.done); k.watcher.run(ctx) }()

	if opts.Template != "" {
		if err := k.createTemplate(ctx, opts.Template); err != nil {
			k.Close()
			return nil, err
		}
	}
	return k, nil
}

// Close stops the server and the hook worker and removes datastore files
// the simulator created (opts.Dir itself belongs to the caller).
func (k *Kit) Close() {
	if k.cancel != nil {
		k.cancel()
		<-k.done
	}
	if k.server != nil {
		k.server.Close()
	}
	k.model.Remove()
}

// Map is the simulator's registry, for tests that inspect or inject.
func (k *Kit) Map() *simulator.Registry { return k.model.Map() }

// CertificateFile is the PEM file of the simulator's certificate.
func (k *Kit) CertificateFile() (string, error) { return k.server.CertificateFile() }

// Client logs in over the SDK URL with the kit's credentials.
func (k *Kit) Client(ctx context.Context) (*govmomi.Client, error) {
	u := *k.URL
	u.User = url.UserPassword(k.Username, k.Password)
	return govmomi.NewClient(ctx, &u, true)
}

func (k *Kit) simContext() *simulator.Context {
	return &simulator.Context{Context: context.Background(), Map: k.model.Map()}
}

// HostNames returns the simulated ESXi host names, sorted.
func (k *Kit) HostNames() []string {
	var out []string
	for _, h := range k.hosts {
		out = append(out, h.name)
	}
	sort.Strings(out)
	return out
}

// LocalDisks returns the candidate disks the kit gave host.
func (k *Kit) LocalDisks(host string) []LocalDisk {
	for _, h := range k.hosts {
		if h.name == host {
			return append([]LocalDisk(nil), h.disks...)
		}
	}
	return nil
}

// install renames hosts, gives each its own devices, datastore, PCI
// devices and the wrapped config managers, and registers the watcher.
func (k *Kit) install() error {
	reg := k.model.Map()
	ctx := k.simContext()
	var hosts []*simulator.HostSystem
	for _, e := range reg.All("HostSystem") {
		hosts = append(hosts, e.(*simulator.HostSystem))
	}
	sort.Slice(hosts, func(i, j int) bool { return hosts[i].Name < hosts[j].Name })
	if cl, ok := reg.Any("ClusterComputeResource").(*simulator.ClusterComputeResource); ok {
		cl.Name = ClusterName
		if cl.EnvironmentBrowser != nil {
			if eb, ok := reg.Get(*cl.EnvironmentBrowser).(*simulator.EnvironmentBrowser); ok {
				reg.Put(&envBrowser{EnvironmentBrowser: eb, kit: k})
			}
		}
	}
	reg.Handler = k.strictHandler
	for i, h := range hosts {
		name := fmt.Sprintf("esx-%02d.cairn.test", i+1)
		h.Name = name
		h.Summary.Config.Name = name
		if h.Config.Network != nil && h.Config.Network.DnsConfig != nil {
			if d := h.Config.Network.DnsConfig.GetHostDnsConfig(); d != nil {
				d.HostName = fmt.Sprintf("esx-%02d", i+1)
			}
		}
		kh := &kitHost{name: name, disks: localDisks(name, k.opts.DisksPerHost, k.opts.DiskSize)}

		ss := reg.Get(*h.ConfigManager.StorageSystem).(*simulator.HostStorageSystem)
		info := *ss.StorageDeviceInfo // vcsim shares one; each host gets its own
		info.HostBusAdapter = append([]types.BaseHostHostBusAdapter(nil), info.HostBusAdapter...)
		info.ScsiLun = append([]types.BaseScsiLun(nil), info.ScsiLun...)
		if info.MultipathInfo != nil {
			mp := *info.MultipathInfo
			mp.Lun = append([]types.HostMultipathInfoLogicalUnit(nil), mp.Lun...)
			info.MultipathInfo = &mp
		}
		for j, d := range kh.disks {
			kind := "HDD"
			if d.SSD {
				kind = "SSD"
			}
			info.ScsiLun = append(info.ScsiLun, scsiDisk(d.CanonicalName, fmt.Sprintf("Local %s Disk %d (%s)", kind, j, d.CanonicalName), "ATA", "CAIRN-LOCAL-"+kind, d.Size, true, d.SSD))
		}
		// A local disk without a unique serial: ESXi names it by path and
		// will not map it as an RDM (strict.go).
		noSerial := scsiDisk(NonRDMDisk, "Local ATA Disk ("+NonRDMDisk+")", "ATA", "CAIRN-LOCAL-NOSERIAL", k.opts.DiskSize, true, false)
		noSerial.Uuid = "0000000000766d686261313a303a30"
		info.ScsiLun = append(info.ScsiLun, noSerial)
		ss.StorageDeviceInfo = &info
		h.Config.StorageDevice = &info
		kh.storage = &storageSystem{HostStorageSystem: ss, kit: k}
		reg.Put(kh.storage)

		ds := reg.Get(*h.ConfigManager.DatastoreSystem).(*simulator.HostDatastoreSystem)
		kh.datastores = &datastoreSystem{HostDatastoreSystem: ds, kit: k, storage: kh.storage}
		reg.Put(kh.datastores)

		ns := reg.Get(*h.ConfigManager.NetworkSystem).(*simulator.HostNetworkSystem)
		// vcsim shares slices of the network info between hosts; copy them.
		ni := *ns.NetworkInfo
		ni.Vswitch = nil
		for _, sw := range ns.NetworkInfo.Vswitch {
			sw.Portgroup = append([]string(nil), sw.Portgroup...)
			ni.Vswitch = append(ni.Vswitch, sw)
		}
		ni.Portgroup = append([]types.HostPortGroup(nil), ns.NetworkInfo.Portgroup...)
		ni.Vnic = append([]types.HostVirtualNic(nil), ns.NetworkInfo.Vnic...)
		redundantUplinks(&ni)
		ns.NetworkInfo = &ni
		kh.network = &networkSystem{HostNetworkSystem: ns}
		reg.Put(kh.network)

		im := &iscsiManager{network: kh.network, bound: map[string]bool{}}
		// The reference type must be the vSphere type name (clients such
		// as pyVmomi resolve it), not the Go type's.
		im.Self = types.ManagedObjectReference{Type: "IscsiManager", Value: "iscsiManager-" + h.Self.Value}
		ref := reg.Put(im).Reference()
		h.ConfigManager.IscsiManager = &ref

		addPCIDevices(h, i)
		k.hosts[h.Self] = kh

		// The boot disk (vcsim's mpx.vmhba0 disk) carries the host's local VMFS.
		local := fmt.Sprintf("esx-%02d-local", i+1)
		if _, f := k.mountVMFS(ctx, ds, local, "mpx.vmhba0:C0:T0:L0", 6, true, 0); f != nil {
			return fmt.Errorf("vcsimkit: local datastore %s: %s", local, f.String)
		}
	}
	k.watcher = &guestWatcher{self: types.ManagedObjectReference{Type: "CairnGuestWatcher", Value: "cairn-guest-watcher"}, kit: k, wake: make(chan struct{}, 1)}
	reg.AddHandler(k.watcher)
	for _, e := range reg.All("VirtualMachine") {
		fixEmptyEnums(e.(*simulator.VirtualMachine))
	}
	return nil
}

// addPCIDevices gives a host two passthrough-capable NVMe controllers and a
// NIC that is not.
func addPCIDevices(h *simulator.HostSystem, i int) {
	hw := *h.Hardware
	hw.PciDevice = nil
	var pt []types.BaseHostPciPassthruInfo
	for j, dev := range []struct {
		vendor, name string
		capable      bool
	}{{"Samsung Electronics Co Ltd", "NVMe SSD Controller PM9A3", true}, {"Samsung Electronics Co Ltd", "NVMe SSD Controller PM9A3", true}, {"Intel Corporation", "Ethernet Controller X710", false}} {
		id := fmt.Sprintf("0000:%02x:00.0", 0x3b+j)
		hw.PciDevice = append(hw.PciDevice, types.HostPciDevice{Id: id, ClassId: 0x0108, VendorId: 0x144d, DeviceId: 0x0a80, VendorName: dev.vendor, DeviceName: dev.name, Bus: byte(0x3b + j)})
		pt = append(pt, &types.HostPciPassthruInfo{Id: id, DependentDevice: id, PassthruCapable: dev.capable, PassthruEnabled: dev.capable, PassthruActive: dev.capable})
	}
	h.Hardware = &hw
	h.Config.PciPassthruInfo = pt
	_ = i
}

// The kit's template declares the vApp properties of the Cairn SVM OVA, from the
// same contract the OVA generator uses (appliance/contract), with their defaults.

// createTemplate creates the SVM template on the first host's local
// datastore, with one NIC and the vApp properties of the Cairn OVA.
func (k *Kit) createTemplate(ctx context.Context, name string) error {
	c, err := k.Client(ctx)
	if err != nil {
		return fmt.Errorf("vcsimkit: login: %w", err)
	}
	defer c.Logout(ctx)
	finder := find.NewFinder(c.Client)
	dc, err := finder.Datacenter(ctx, Datacenter)
	if err != nil {
		return err
	}
	finder.SetDatacenter(dc)
	folders, err := dc.Folders(ctx)
	if err != nil {
		return err
	}
	host, err := finder.HostSystem(ctx, k.HostNames()[0])
	if err != nil {
		return err
	}
	pool, err := host.ResourcePool(ctx)
	if err != nil {
		return err
	}
	net, err := finder.Network(ctx, VMNetwork)
	if err != nil {
		return err
	}
	backing, err := net.EthernetCardBackingInfo(ctx)
	if err != nil {
		return err
	}
	nic, err := object.EthernetCardTypes().CreateEthernetCard("vmxnet3", backing)
	if err != nil {
		return err
	}
	var props []types.VAppPropertySpec
	for i, cp := range contract.Properties() {
		props = append(props, types.VAppPropertySpec{ArrayUpdateSpec: types.ArrayUpdateSpec{Operation: types.ArrayUpdateOperationAdd},
			Info: &types.VAppPropertyInfo{Key: int32(i + 1), Id: cp.Key, Type: cp.Type, DefaultValue: cp.Default, Label: cp.Label,
				Description: cp.Description, Category: cp.Category, UserConfigurable: types.NewBool(true)}})
	}
	spec := types.VirtualMachineConfigSpec{
		Name: name, GuestId: string(types.VirtualMachineGuestOsIdentifierOtherLinux64Guest), NumCPUs: 2, MemoryMB: 2048,
		Files:        &types.VirtualMachineFileInfo{VmPathName: fmt.Sprintf("[%s]", "esx-01-local")},
		DeviceChange: []types.BaseVirtualDeviceConfigSpec{&types.VirtualDeviceConfigSpec{Operation: types.VirtualDeviceConfigSpecOperationAdd, Device: nic}},
		VAppConfig: &types.VmConfigSpec{
			OvfEnvironmentTransport: []string{"com.vmware.guestInfo"},
			Product:                 []types.VAppProductSpec{{ArrayUpdateSpec: types.ArrayUpdateSpec{Operation: types.ArrayUpdateOperationAdd}, Info: &types.VAppProductInfo{Key: 0, Name: "Cairn SVM", Vendor: "Cairn", Version: "dev"}}},
			Property:                props,
		},
	}
	task, err := folders.VmFolder.CreateVM(ctx, spec, pool, host)
	if err != nil {
		return err
	}
	info, err := task.WaitForResult(ctx)
	if err != nil {
		return fmt.Errorf("vcsimkit: create template %s: %w", name, err)
	}
	vm := object.NewVirtualMachine(c.Client, info.Result.(types.ManagedObjectReference))
	if err := vm.MarkAsTemplate(ctx); err != nil {
		return fmt.Errorf("vcsimkit: mark %s as template: %w", name, err)
	}
	return nil
}

// SetHostConnection disconnects or reconnects a host (validation tests).
func (k *Kit) SetHostConnection(host string, connected bool) {
	ctx := k.simContext()
	for ref, h := range k.hosts {
		if h.name == host {
			hs := ctx.Map.Get(ref).(*simulator.HostSystem)
			state := types.HostSystemConnectionStateDisconnected
			if connected {
				state = types.HostSystemConnectionStateConnected
			}
			ctx.WithLock(hs, func() {
				ctx.Update(hs, []types.PropertyChange{{Name: "runtime.connectionState", Val: state}})
			})
		}
	}
}
