package datastore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cairn-storage/cairn/vcenter-plugin/internal/gateway"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/hoststorage"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/inventory"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/poll"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/progress"
)

// GrowRequest grows a volume and the VMFS datastore on it (JSON of the
// plugin's REST API).
type GrowRequest struct {
	Datacenter string   `json:"datacenter"`
	Volume     string   `json:"volume"`
	Datastore  string   `json:"datastore"` // default = volume
	SizeGiB    int64    `json:"size_gib"`  // the new size of the volume
	Hosts      []string `json:"hosts"`     // hosts to look for the datastore on
}

// GrowJob is the progress job name of a grow.
func GrowJob(volume string) string { return "grow:" + volume }

// vmfsSlack: a datastore within this of its LUN's size fills it (VMFS's
// partition starts at 1 MiB and GPT keeps its backup at the end).
const vmfsSlack = 16 << 20

// Grow grows the volume to req.SizeGiB, has every host that mounts the
// datastore rescan until it sees the new size, expands the VMFS on one of
// them and checks that all of them see the new capacity. Each step is
// skipped when already done, so a failed grow can be run again.
func (e *Engine) Grow(ctx context.Context, req GrowRequest) (int64, error) {
	e.defaults()
	if req.Datastore == "" {
		req.Datastore = req.Volume
	}
	job := GrowJob(req.Volume)
	info := func(step, host, f string, a ...any) { e.Log.Emit(job, progress.Info, step, host, f, a...) }
	capacity, err := e.grow(ctx, req, info)
	if err != nil {
		e.Log.Emit(job, progress.Error, "grow", "", "%v", err)
	}
	return capacity, err
}

func (e *Engine) grow(ctx context.Context, req GrowRequest, info func(step, host, f string, a ...any)) (int64, error) {
	if req.Volume == "" || req.SizeGiB <= 0 || len(req.Hosts) == 0 {
		return 0, errors.New("name the volume, its new size in GiB and the hosts that mount its datastore")
	}
	loc, err := inventory.Locate(ctx, e.VC, req.Datacenter, req.Hosts)
	if err != nil {
		return 0, err
	}
	vol, err := e.API.GetVolume(ctx, req.Volume)
	if err != nil {
		return 0, err
	}
	target := req.SizeGiB << 30
	switch {
	case target < vol.Size:
		return 0, fmt.Errorf("volume %s is %d GiB: a volume only grows (asked %d GiB)", vol.Name, vol.Size>>30, req.SizeGiB)
	case target > vol.Size:
		if _, err := e.API.UpdateVolume(ctx, vol.ID, gateway.VolumeUpdate{Size: &target}); err != nil {
			return 0, fmt.Errorf("grow volume %s: %w", vol.Name, err)
		}
		info("volume", "", "volume %s grown from %d to %d GiB", vol.Name, vol.Size>>30, req.SizeGiB)
	default:
		info("volume", "", "volume %s is %d GiB already", vol.Name, req.SizeGiB)
	}

	var mounting []*hoststorage.Host
	var capacity int64
	for _, name := range req.Hosts {
		h := hoststorage.New(e.VC, loc.Hosts[name])
		ds, err := h.Datastore(ctx, req.Datastore)
		if err != nil {
			return 0, err
		}
		if ds != nil {
			mounting = append(mounting, h)
			capacity = ds.Summary.Capacity
		}
	}
	if len(mounting) == 0 {
		return 0, fmt.Errorf("no host mounts datastore %s: the volume is %d GiB now; create its datastore from the Volumes page", req.Datastore, req.SizeGiB)
	}
	for _, h := range mounting {
		if err := e.waitLUNSize(ctx, h, vol.WWN, target); err != nil {
			return 0, err
		}
		info("rescan", h.Name, "%s sees naa.%s at %d GiB", h.Name, vol.WWN, req.SizeGiB)
	}
	if capacity < target-vmfsSlack {
		first := mounting[0]
		if capacity, err = first.ExpandVMFS(ctx, req.Datastore); err != nil {
			return 0, err
		}
		info("vmfs", first.Name, "datastore %s grown to %.1f GiB on %s", req.Datastore, float64(capacity)/(1<<30), first.Name)
	}
	for _, h := range mounting[1:] {
		if err := h.Rescan(ctx); err != nil {
			return 0, err
		}
		ds, err := h.Datastore(ctx, req.Datastore)
		if err != nil {
			return 0, err
		}
		if ds == nil || ds.Summary.Capacity < target-vmfsSlack {
			return 0, fmt.Errorf("host %s does not see datastore %s at its new size after a VMFS rescan: rescan its storage in vSphere, then run the grow again", h.Name, req.Datastore)
		}
		info("verify", h.Name, "%s sees datastore %s at %.1f GiB", h.Name, req.Datastore, float64(ds.Summary.Capacity)/(1<<30))
	}
	_ = progress.VCenter{C: e.VC}.Event(ctx, loc.Hosts[mounting[0].Name].Reference(), fmt.Sprintf("datastore %s on volume %s grown to %d GiB", req.Datastore, vol.Name, req.SizeGiB))
	return capacity, nil
}

// waitLUNSize rescans h until it sees naa.<wwn> at size bytes or more.
func (e *Engine) waitLUNSize(ctx context.Context, h *hoststorage.Host, wwn string, size int64) error {
	return poll.Until(ctx, e.RescanTimeout, e.PollInterval, "check that the volume grew in Cairn and that the host's iSCSI sessions are up", func() (bool, string, error) {
		if err := h.Rescan(ctx); err != nil {
			return false, "", err
		}
		have, err := h.LUNSize(ctx, wwn)
		return have >= size, fmt.Sprintf("host %s sees naa.%s at %d bytes, not %d yet", h.Name, wwn, have, size), err
	})
}

// defaults fills the engine's unset fields.
func (e *Engine) defaults() {
	if e.Log == nil {
		e.Log = progress.NewLog(1000, nil)
	}
	if e.RescanTimeout == 0 {
		e.RescanTimeout = 2 * time.Minute
	}
	if e.PollInterval == 0 {
		e.PollInterval = 2 * time.Second
	}
}
