// Package inventory reads what a Cairn deployment is planned against from
// vCenter: datacenters, clusters, ESXi hosts (version, connection,
// maintenance), their local datastores and networks, the local disks that
// are candidates for Cairn, PCI passthrough-capable devices, and SVM
// templates. It only reads; it never changes vCenter.
package inventory

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/view"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"
)

// Inventory is a snapshot; JSON field names are part of the plugin's REST API.
type Inventory struct {
	Datacenters []Datacenter `json:"datacenters"`
}

type Datacenter struct {
	Name      string     `json:"name"`
	Clusters  []Cluster  `json:"clusters"`
	Hosts     []Host     `json:"hosts"`
	Networks  []Network  `json:"networks"`
	Templates []Template `json:"templates"`
}

type Cluster struct {
	Name  string   `json:"name"`
	MoRef string   `json:"moref"`
	Hosts []string `json:"hosts"`
}

type Network struct {
	Name  string `json:"name"`
	MoRef string `json:"moref"`
	Type  string `json:"type"` // Network, DistributedVirtualPortgroup, OpaqueNetwork
}

// Template is a VM template that carries the Cairn SVM's vApp properties.
type Template struct {
	Name       string   `json:"name"`
	MoRef      string   `json:"moref"`
	Host       string   `json:"host"`
	Properties []string `json:"properties"`
}

type Host struct {
	Name            string      `json:"name"`
	MoRef           string      `json:"moref"`
	Cluster         string      `json:"cluster,omitempty"`
	Version         string      `json:"version"`
	Build           string      `json:"build"`
	ConnectionState string      `json:"connection_state"` // connected, disconnected, notResponding
	InMaintenance   bool        `json:"in_maintenance"`
	Datastores      []Datastore `json:"datastores"`
	Networks        []string    `json:"networks"`
	Disks           []Disk      `json:"disks"`
	PCIDevices      []PCIDevice `json:"pci_devices"`
	VMs             []string    `json:"vms"`
}

type Datastore struct {
	Name     string `json:"name"`
	MoRef    string `json:"moref"`
	Type     string `json:"type"`
	Local    bool   `json:"local"` // mounted on this host only
	Capacity int64  `json:"capacity"`
	Free     int64  `json:"free"`
}

// Disk is a SCSI disk of a host. Candidate disks for Cairn are local and not
// used by a datastore or a VM.
type Disk struct {
	CanonicalName string `json:"canonical_name"` // stable id (naa./t10./eui.)
	DisplayName   string `json:"display_name"`
	DevicePath    string `json:"device_path"`
	Size          int64  `json:"size"`
	SSD           bool   `json:"ssd"`
	Local         bool   `json:"local"`
	UsedBy        string `json:"used_by,omitempty"` // "datastore <name>" or "vm <name>"
	// RDMCapable: ESXi offers the disk for raw mapping (QueryConfigTarget).
	RDMCapable bool `json:"rdm_capable"`
	// Candidate: local, free and RDM-capable, so Cairn can pool it.
	Candidate bool `json:"candidate"`
}

type PCIDevice struct {
	ID                 string `json:"id"`
	Vendor             string `json:"vendor"`
	Device             string `json:"device"`
	PassthroughCapable bool   `json:"passthrough_capable"`
	PassthroughEnabled bool   `json:"passthrough_enabled"`
	UsedBy             string `json:"used_by,omitempty"` // "vm <name>"
}

// Host finds a host by name anywhere in the inventory.
func (inv *Inventory) Host(name string) (*Host, *Datacenter) {
	for i := range inv.Datacenters {
		dc := &inv.Datacenters[i]
		for j := range dc.Hosts {
			if dc.Hosts[j].Name == name {
				return &dc.Hosts[j], dc
			}
		}
	}
	return nil, nil
}

// Template finds a template by name.
func (inv *Inventory) Template(name string) *Template {
	for _, dc := range inv.Datacenters {
		for i := range dc.Templates {
			if dc.Templates[i].Name == name {
				return &dc.Templates[i]
			}
		}
	}
	return nil
}

// Disk finds a disk of the host by canonical name.
func (h *Host) Disk(name string) *Disk {
	for i := range h.Disks {
		if h.Disks[i].CanonicalName == name {
			return &h.Disks[i]
		}
	}
	return nil
}

// PCI finds a PCI device of the host by id.
func (h *Host) PCI(id string) *PCIDevice {
	for i := range h.PCIDevices {
		if h.PCIDevices[i].ID == id {
			return &h.PCIDevices[i]
		}
	}
	return nil
}

// Collect reads the inventory of every datacenter.
func Collect(ctx context.Context, c *vim25.Client) (*Inventory, error) {
	dcs, err := find.NewFinder(c, false).DatacenterList(ctx, "*")
	if err != nil {
		return nil, fmt.Errorf("inventory: list datacenters: %w", err)
	}
	inv := &Inventory{}
	m := view.NewManager(c)
	for _, dc := range dcs {
		d, err := collectDatacenter(ctx, m, dc.Reference(), dc.Name())
		if err != nil {
			return nil, fmt.Errorf("inventory: datacenter %s: %w", dc.Name(), err)
		}
		inv.Datacenters = append(inv.Datacenters, *d)
	}
	sort.Slice(inv.Datacenters, func(i, j int) bool { return inv.Datacenters[i].Name < inv.Datacenters[j].Name })
	return inv, nil
}

func retrieve(ctx context.Context, m *view.Manager, root types.ManagedObjectReference, kind string, props []string, dst any) error {
	v, err := m.CreateContainerView(ctx, root, []string{kind}, true)
	if err != nil {
		return err
	}
	defer v.Destroy(context.WithoutCancel(ctx))
	return v.Retrieve(ctx, []string{kind}, props, dst)
}

func collectDatacenter(ctx context.Context, m *view.Manager, root types.ManagedObjectReference, name string) (*Datacenter, error) {
	var hosts []mo.HostSystem
	if err := retrieve(ctx, m, root, "HostSystem", []string{"name", "parent", "runtime", "config.product", "config.storageDevice", "config.pciPassthruInfo", "hardware.pciDevice", "datastore", "network", "vm"}, &hosts); err != nil {
		return nil, fmt.Errorf("hosts: %w", err)
	}
	var clusters []mo.ClusterComputeResource
	if err := retrieve(ctx, m, root, "ClusterComputeResource", []string{"name", "host"}, &clusters); err != nil {
		return nil, fmt.Errorf("clusters: %w", err)
	}
	var dss []mo.Datastore
	if err := retrieve(ctx, m, root, "Datastore", []string{"name", "summary", "info", "host"}, &dss); err != nil {
		return nil, fmt.Errorf("datastores: %w", err)
	}
	var nets []mo.Network
	if err := retrieve(ctx, m, root, "Network", []string{"name"}, &nets); err != nil {
		return nil, fmt.Errorf("networks: %w", err)
	}
	var vms []mo.VirtualMachine
	if err := retrieve(ctx, m, root, "VirtualMachine", []string{"name", "config.template", "config.hardware.device", "config.vAppConfig", "runtime.host"}, &vms); err != nil {
		return nil, fmt.Errorf("virtual machines: %w", err)
	}

	rdm, err := rdmCapableDisks(ctx, m, root, hosts)
	if err != nil {
		return nil, err
	}

	d := &Datacenter{Name: name}
	hostName := map[types.ManagedObjectReference]string{}
	for _, h := range hosts {
		hostName[h.Self] = h.Name
	}
	clusterOf := map[types.ManagedObjectReference]string{}
	for _, cl := range clusters {
		c := Cluster{Name: cl.Name, MoRef: cl.Self.Value}
		for _, h := range cl.Host {
			c.Hosts = append(c.Hosts, hostName[h])
			clusterOf[h] = cl.Name
		}
		sort.Strings(c.Hosts)
		d.Clusters = append(d.Clusters, c)
	}
	netName := map[types.ManagedObjectReference]string{}
	for _, n := range nets {
		netName[n.Self] = n.Name
		d.Networks = append(d.Networks, Network{Name: n.Name, MoRef: n.Self.Value, Type: n.Self.Type})
	}
	dsByRef := map[types.ManagedObjectReference]*mo.Datastore{}
	for i := range dss {
		dsByRef[dss[i].Self] = &dss[i]
	}
	// Which disk or PCI device each VM holds (RDM, passthrough), by host.
	vmName := map[types.ManagedObjectReference]string{}
	rdmUser := map[string]string{} // host/canonical -> vm
	pciUser := map[string]string{} // host/id -> vm
	for _, vm := range vms {
		vmName[vm.Self] = vm.Name
		if vm.Config == nil {
			continue
		}
		host := ""
		if vm.Runtime.Host != nil {
			host = hostName[*vm.Runtime.Host]
		}
		for _, dev := range vm.Config.Hardware.Device {
			switch x := dev.(type) {
			case *types.VirtualDisk:
				if b, ok := x.Backing.(*types.VirtualDiskRawDiskMappingVer1BackingInfo); ok {
					rdmUser[host+"/"+strings.TrimPrefix(b.DeviceName, "/vmfs/devices/disks/")] = vm.Name
				}
			case *types.VirtualPCIPassthrough:
				if b, ok := x.Backing.(*types.VirtualPCIPassthroughDeviceBackingInfo); ok {
					pciUser[host+"/"+b.Id] = "vm " + vm.Name
				}
			}
		}
		if vm.Config.Template {
			t := Template{Name: vm.Name, MoRef: vm.Self.Value, Host: host}
			if va, ok := vm.Config.VAppConfig.(*types.VmConfigInfo); ok && va != nil {
				for _, p := range va.Property {
					t.Properties = append(t.Properties, p.Id)
				}
			}
			sort.Strings(t.Properties)
			d.Templates = append(d.Templates, t)
		}
	}

	for _, h := range hosts {
		out := Host{Name: h.Name, MoRef: h.Self.Value, Cluster: clusterOf[h.Self],
			ConnectionState: string(h.Runtime.ConnectionState), InMaintenance: h.Runtime.InMaintenanceMode}
		if h.Config != nil {
			out.Version, out.Build = h.Config.Product.Version, h.Config.Product.Build
		}
		usedDisk := map[string]string{}
		for _, ref := range h.Datastore {
			ds := dsByRef[ref]
			if ds == nil {
				continue
			}
			out.Datastores = append(out.Datastores, Datastore{Name: ds.Name, MoRef: ds.Self.Value, Type: ds.Summary.Type,
				Local: len(ds.Host) == 1, Capacity: ds.Summary.Capacity, Free: ds.Summary.FreeSpace})
			if vi, ok := ds.Info.(*types.VmfsDatastoreInfo); ok && vi.Vmfs != nil {
				for _, e := range vi.Vmfs.Extent {
					usedDisk[e.DiskName] = "datastore " + ds.Name
				}
			}
		}
		for _, n := range h.Network {
			out.Networks = append(out.Networks, netName[n])
		}
		for _, v := range h.Vm {
			out.VMs = append(out.VMs, vmName[v])
		}
		if h.Config != nil && h.Config.StorageDevice != nil {
			for _, l := range h.Config.StorageDevice.ScsiLun {
				disk, ok := l.(*types.HostScsiDisk)
				if !ok {
					continue
				}
				dk := Disk{CanonicalName: disk.CanonicalName, DisplayName: disk.DisplayName, DevicePath: disk.DevicePath,
					Size: disk.Capacity.Block * int64(disk.Capacity.BlockSize),
					SSD:  disk.Ssd != nil && *disk.Ssd, Local: disk.LocalDisk != nil && *disk.LocalDisk}
				dk.UsedBy = usedDisk[disk.CanonicalName]
				if vm := rdmUser[h.Name+"/"+disk.CanonicalName]; vm != "" {
					dk.UsedBy = "vm " + vm
				}
				dk.RDMCapable = rdm[h.Self][disk.CanonicalName]
				dk.Candidate = dk.Local && dk.UsedBy == "" && dk.RDMCapable
				out.Disks = append(out.Disks, dk)
			}
		}
		names := map[string]types.HostPciDevice{}
		for _, p := range h.Hardware.PciDevice {
			names[p.Id] = p
		}
		if h.Config != nil {
			for _, bp := range h.Config.PciPassthruInfo {
				p := bp.GetHostPciPassthruInfo()
				dev := names[p.Id]
				out.PCIDevices = append(out.PCIDevices, PCIDevice{ID: p.Id, Vendor: dev.VendorName, Device: dev.DeviceName,
					PassthroughCapable: p.PassthruCapable, PassthroughEnabled: p.PassthruEnabled, UsedBy: pciUser[h.Name+"/"+p.Id]})
			}
		}
		sort.Slice(out.Disks, func(i, j int) bool { return out.Disks[i].CanonicalName < out.Disks[j].CanonicalName })
		sort.Slice(out.Datastores, func(i, j int) bool { return out.Datastores[i].Name < out.Datastores[j].Name })
		sort.Strings(out.Networks)
		sort.Strings(out.VMs)
		d.Hosts = append(d.Hosts, out)
	}
	sort.Slice(d.Hosts, func(i, j int) bool { return d.Hosts[i].Name < d.Hosts[j].Name })
	sort.Slice(d.Clusters, func(i, j int) bool { return d.Clusters[i].Name < d.Clusters[j].Name })
	sort.Slice(d.Networks, func(i, j int) bool { return d.Networks[i].Name < d.Networks[j].Name })
	sort.Slice(d.Templates, func(i, j int) bool { return d.Templates[i].Name < d.Templates[j].Name })
	return d, nil
}
