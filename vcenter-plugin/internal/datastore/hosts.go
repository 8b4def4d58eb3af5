package datastore

// Map a volume to more ESXi hosts, unmap it from some, delete it: the
// vSphere side done as the vSphere Client does it (unmount the VMFS on the
// host, detach the LUN, then take the LUN away and rescan), so no host is
// left with a dead device or a datastore in all-paths-down. Every step is
// skipped when done, so a failed job is resumed by running it again.

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/vmware/govmomi/object"

	"github.com/cairn-storage/cairn/vcenter-plugin/internal/gateway"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/hoststorage"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/inventory"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/poll"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/progress"
)

// HostsRequest maps a volume to hosts or unmaps it from them (JSON of the
// plugin's REST API).
type HostsRequest struct {
	Datacenter string   `json:"datacenter"`
	Volume     string   `json:"volume"`
	Datastore  string   `json:"datastore"` // default = volume
	Hosts      []string `json:"hosts"`
	ReadOnly   bool     `json:"read_only"` // map only
}

// DeleteRequest deletes a volume and takes its datastore off every host.
type DeleteRequest struct {
	Datacenter string   `json:"datacenter"`
	Volume     string   `json:"volume"`
	Datastore  string   `json:"datastore"` // default = volume
	Hosts      []string `json:"hosts"`     // every host of the system
}

// MapJob, UnmapJob and DeleteJob are the progress job names.
func MapJob(volume string) string    { return "map:" + volume }
func UnmapJob(volume string) string  { return "unmap:" + volume }
func DeleteJob(volume string) string { return "delete:" + volume }

// ErrInUse is returned (wrapped) when virtual machines or templates on the
// datastore stop an unmap or a delete; nothing was changed.
var ErrInUse = errors.New("datastore in use")

func (e *Engine) run(job string, f func(info func(step, host, f string, a ...any)) error) error {
	e.defaults()
	info := func(step, host, f string, a ...any) { e.Log.Emit(job, progress.Info, step, host, f, a...) }
	err := f(info)
	if err != nil {
		e.Log.Emit(job, progress.Error, "volume", "", "%v", err)
	}
	return err
}

func (e *Engine) hosts(ctx context.Context, datacenter string, names []string) ([]*hoststorage.Host, map[string]*object.HostSystem, error) {
	loc, err := inventory.Locate(ctx, e.VC, datacenter, names)
	if err != nil {
		return nil, nil, err
	}
	var out []*hoststorage.Host
	for _, n := range names {
		out = append(out, hoststorage.New(e.VC, loc.Hosts[n]))
	}
	return out, loc.Hosts, nil
}

// hostsAndVolume checks req (the datastore defaults to the volume's name)
// and looks up its hosts and its volume, for Map and Unmap.
func (e *Engine) hostsAndVolume(ctx context.Context, req *HostsRequest, verb string) ([]*hoststorage.Host, map[string]*object.HostSystem, *gateway.Volume, error) {
	if req.Volume == "" || len(req.Hosts) == 0 {
		return nil, nil, nil, fmt.Errorf("name the volume and choose at least one host to %s", verb)
	}
	if req.Datastore == "" {
		req.Datastore = req.Volume
	}
	hosts, objs, err := e.hosts(ctx, req.Datacenter, req.Hosts)
	if err != nil {
		return nil, nil, nil, err
	}
	vol, err := e.API.GetVolume(ctx, req.Volume)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("volume %s: %w", req.Volume, err)
	}
	return hosts, objs, vol, nil
}

// Map maps the volume to req.Hosts with the access asked and has each host
// see it: rescan, attach the LUN if it was detached, round robin paths,
// and mount the volume's datastore where the host had it unmounted.
func (e *Engine) Map(ctx context.Context, req HostsRequest) error {
	return e.run(MapJob(req.Volume), func(info func(step, host, f string, a ...any)) error {
		hosts, objs, vol, err := e.hostsAndVolume(ctx, &req, "map it to")
		if err != nil {
			return err
		}
		access := map[bool]string{false: "read-write", true: "read-only"}
		mapped := map[string]gateway.Mapping{}
		for _, m := range vol.Mappings {
			mapped[m.HostID] = m
		}
		for _, h := range hosts {
			st, err := h.ISCSI(ctx)
			if err != nil {
				return err
			}
			if !st.Enabled || st.IQN == "" {
				return fmt.Errorf("host %s has no software iSCSI: deploy Cairn to it (the deploy wires iSCSI) first", h.Name)
			}
			gh, err := e.API.GetHost(ctx, h.Name)
			if errors.Is(err, gateway.ErrNotFound) {
				gh, err = e.API.CreateHost(ctx, gateway.HostSpec{Name: h.Name, Type: "iscsi", IQN: st.IQN})
			}
			if err != nil {
				return fmt.Errorf("host %s in Cairn: %w", h.Name, err)
			}
			if m, ok := mapped[gh.ID]; ok {
				if m.ReadOnly != req.ReadOnly {
					return fmt.Errorf("volume %s is mapped to %s %s already: unmap it from %s first, then map it %s", vol.Name, h.Name, access[m.ReadOnly], h.Name, access[req.ReadOnly])
				}
				info("map", h.Name, "%s is mapped to %s already (%s)", vol.Name, h.Name, access[m.ReadOnly])
				continue
			}
			if err := e.API.MapVolumeAs(ctx, vol.ID, gh.ID, req.ReadOnly); err != nil {
				return fmt.Errorf("map %s to %s: %w", vol.Name, h.Name, err)
			}
			info("map", h.Name, "mapped %s to %s %s", vol.Name, h.Name, access[req.ReadOnly])
		}
		var mounted []string
		for _, h := range hosts {
			if err := e.waitLUN(ctx, h, vol.WWN); err != nil {
				return err
			}
			d, err := h.LUN(ctx, vol.WWN)
			if err != nil {
				return err
			}
			if d != nil && hoststorage.Detached(d) {
				if err := h.AttachLUN(ctx, d); err != nil {
					return err
				}
				info("attach", h.Name, "attached naa.%s on %s (it was detached)", vol.WWN, h.Name)
				if err := h.Rescan(ctx); err != nil {
					return err
				}
			}
			if _, err := h.EnsureRoundRobin(ctx, "naa."+strings.ToLower(vol.WWN)); err != nil {
				return err
			}
			info("rescan", h.Name, "%s sees naa.%s", h.Name, vol.WWN)
			if req.ReadOnly {
				continue // VMFS needs to write its heartbeat: it does not mount read-only LUNs
			}
			ds, isMounted, err := h.DatastoreMount(ctx, req.Datastore)
			if err != nil {
				return err
			}
			if ds != nil && !isMounted {
				if err := h.MountVMFS(ctx, ds); err != nil {
					return err
				}
				info("mount", h.Name, "mounted datastore %s on %s again", req.Datastore, h.Name)
			}
			if ds != nil {
				mounted = append(mounted, h.Name)
			}
		}
		if len(mounted) > 0 {
			info("verify", "", "datastore %s mounted on %s", req.Datastore, strings.Join(mounted, ", "))
		} else if !req.ReadOnly {
			info("verify", "", "the hosts see naa.%s; it holds no datastore %s yet (create one in vSphere or with Create volume and datastore)", vol.WWN, req.Datastore)
		}
		_ = progress.VCenter{C: e.VC}.Event(ctx, objs[hosts[0].Name].Reference(), fmt.Sprintf("Cairn volume %s mapped to %s", vol.Name, strings.Join(req.Hosts, ", ")))
		return nil
	})
}

// Unmap takes the volume away from req.Hosts: on each host the VMFS is
// unmounted and the LUN detached, then the mapping goes and the host
// rescans. It refuses, changing nothing, while a virtual machine or
// template registered on one of those hosts has files on the datastore.
func (e *Engine) Unmap(ctx context.Context, req HostsRequest) error {
	return e.run(UnmapJob(req.Volume), func(info func(step, host, f string, a ...any)) error {
		hosts, objs, vol, err := e.hostsAndVolume(ctx, &req, "unmap it from")
		if err != nil {
			return err
		}
		for _, h := range hosts {
			ds, _, err := h.DatastoreMount(ctx, req.Datastore)
			if err != nil || ds == nil {
				if err != nil {
					return err
				}
				continue
			}
			vms, err := h.VMsOn(ctx, ds, true)
			if err != nil {
				return err
			}
			if len(vms) > 0 {
				return fmt.Errorf("%w: datastore %s holds %s registered on %s: move them to another host (vMotion) or datastore (Storage vMotion), or unregister them, then unmap again; nothing was changed",
					ErrInUse, req.Datastore, strings.Join(vms, ", "), h.Name)
			}
		}
		for _, h := range hosts {
			if err := e.takeOff(ctx, h, vol.WWN, req.Datastore, info); err != nil {
				return err
			}
		}
		mapped := map[string]bool{}
		for _, m := range vol.Mappings {
			mapped[m.HostID] = true
		}
		for _, h := range hosts {
			gh, err := e.API.GetHost(ctx, h.Name)
			if errors.Is(err, gateway.ErrNotFound) {
				continue // never mapped
			}
			if err != nil {
				return fmt.Errorf("host %s in Cairn: %w", h.Name, err)
			}
			if mapped[gh.ID] {
				if err := e.API.UnmapVolume(ctx, vol.ID, gh.ID); err != nil {
					return fmt.Errorf("unmap %s from %s: %w", vol.Name, h.Name, err)
				}
				info("unmap", h.Name, "unmapped %s from %s", vol.Name, h.Name)
			}
		}
		for _, h := range hosts {
			if err := e.waitGone(ctx, h, vol.WWN, req.Datastore); err != nil {
				return err
			}
			info("rescan", h.Name, "%s no longer sees naa.%s", h.Name, vol.WWN)
		}
		_ = progress.VCenter{C: e.VC}.Event(ctx, objs[hosts[0].Name].Reference(), fmt.Sprintf("Cairn volume %s unmapped from %s", vol.Name, strings.Join(req.Hosts, ", ")))
		return nil
	})
}

// takeOff unmounts datastore on h and detaches naa.<wwn> there, each if
// not done yet.
func (e *Engine) takeOff(ctx context.Context, h *hoststorage.Host, wwn, datastore string, info func(step, host, f string, a ...any)) error {
	ds, mounted, err := h.DatastoreMount(ctx, datastore)
	if err != nil {
		return err
	}
	if ds != nil && mounted {
		if err := h.UnmountVMFS(ctx, ds); err != nil {
			return err
		}
		info("unmount", h.Name, "unmounted datastore %s on %s", datastore, h.Name)
	}
	d, err := h.LUN(ctx, wwn)
	if err != nil {
		return err
	}
	if d != nil && !hoststorage.Detached(d) {
		if err := h.DetachLUN(ctx, d); err != nil {
			return err
		}
		info("detach", h.Name, "detached naa.%s on %s", wwn, h.Name)
	}
	return nil
}

// waitGone rescans h until it neither sees naa.<wwn> nor has datastore.
func (e *Engine) waitGone(ctx context.Context, h *hoststorage.Host, wwn, datastore string) error {
	return poll.Until(ctx, e.RescanTimeout, e.PollInterval, "check in Cairn that the volume is no longer mapped to the host, then rescan its storage in vSphere", func() (bool, string, error) {
		if err := h.Rescan(ctx); err != nil {
			return false, "", err
		}
		d, err := h.LUN(ctx, wwn)
		if err != nil {
			return false, "", err
		}
		ds, _, err := h.DatastoreMount(ctx, datastore)
		return d == nil && ds == nil, fmt.Sprintf("host %s still sees naa.%s or datastore %s after a rescan", h.Name, wwn, datastore), err
	})
}

// Delete deletes the volume, the vSphere way: it refuses, changing
// nothing, while virtual machines or templates have files on the
// datastore; otherwise it unmounts the VMFS on every host, detaches the
// LUN on every host, unmaps the volume from every host in Cairn, deletes
// it, and has every host rescan so none keeps a dead device.
func (e *Engine) Delete(ctx context.Context, req DeleteRequest) error {
	return e.run(DeleteJob(req.Volume), func(info func(step, host, f string, a ...any)) error {
		if req.Volume == "" || len(req.Hosts) == 0 {
			return errors.New("name the volume and the system's hosts")
		}
		if req.Datastore == "" {
			req.Datastore = req.Volume
		}
		hosts, objs, err := e.hosts(ctx, req.Datacenter, req.Hosts)
		if err != nil {
			return err
		}
		vol, err := e.API.GetVolume(ctx, req.Volume)
		gone := errors.Is(err, gateway.ErrNotFound)
		if err != nil && !gone {
			return fmt.Errorf("volume %s: %w", req.Volume, err)
		}
		if !gone {
			for _, h := range hosts {
				ds, _, err := h.DatastoreMount(ctx, req.Datastore)
				if err != nil {
					return err
				}
				if ds == nil {
					continue
				}
				vms, err := h.VMsOn(ctx, ds, false)
				if err != nil {
					return err
				}
				if len(vms) > 0 {
					return fmt.Errorf("%w: datastore %s holds %s: move them to another datastore (Storage vMotion) or delete them, then delete again; nothing was changed",
						ErrInUse, req.Datastore, strings.Join(vms, ", "))
				}
				break // every host sees the same VMs on a shared datastore
			}
			// Unmount everywhere before detaching anywhere: vSphere's order.
			for _, h := range hosts {
				ds, mounted, err := h.DatastoreMount(ctx, req.Datastore)
				if err != nil {
					return err
				}
				if ds != nil && mounted {
					if err := h.UnmountVMFS(ctx, ds); err != nil {
						return err
					}
					info("unmount", h.Name, "unmounted datastore %s on %s", req.Datastore, h.Name)
				}
			}
			for _, h := range hosts {
				if err := e.takeOff(ctx, h, vol.WWN, req.Datastore, info); err != nil {
					return err
				}
			}
			// The gateway refuses to delete a mapped volume.
			for _, m := range vol.Mappings {
				if err := e.API.UnmapVolume(ctx, vol.ID, m.HostID); err != nil {
					return fmt.Errorf("unmap %s from host %s: %w", vol.Name, m.HostName, err)
				}
				name := m.HostName
				if name == "" {
					name = m.HostID
				}
				info("unmap", name, "unmapped %s from %s", vol.Name, name)
			}
			if err := e.API.DeleteVolume(ctx, vol.ID); err != nil && !errors.Is(err, gateway.ErrNotFound) {
				return fmt.Errorf("delete volume %s: %w", vol.Name, err)
			}
			info("delete", "", "deleted volume %s and its data", vol.Name)
		} else {
			info("delete", "", "volume %s is deleted already: checking that no host keeps datastore %s", req.Volume, req.Datastore)
		}
		for _, h := range hosts {
			wwn := "0"
			if vol != nil {
				wwn = vol.WWN
			}
			if err := e.waitGone(ctx, h, wwn, req.Datastore); err != nil {
				return err
			}
			info("rescan", h.Name, "%s has neither the LUN nor datastore %s", h.Name, req.Datastore)
		}
		_ = progress.VCenter{C: e.VC}.Event(ctx, objs[hosts[0].Name].Reference(), fmt.Sprintf("Cairn volume %s and datastore %s deleted", req.Volume, req.Datastore))
		return nil
	})
}
