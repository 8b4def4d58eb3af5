// Package datastore turns a Cairn volume into a VMFS datastore shared by
// ESXi hosts: create the volume, map it to the hosts' iSCSI initiators,
// rescan, create VMFS on one host, rescan the others and check that every
// host mounts it. Each step is idempotent, so a failed run can be repeated.
package datastore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25"

	"github.com/cairn-storage/cairn/vcenter-plugin/internal/gateway"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/hoststorage"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/inventory"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/poll"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/progress"
)

// Request is one volume-to-datastore job (JSON of the plugin's REST API).
type Request struct {
	Datacenter string   `json:"datacenter"`
	Volume     string   `json:"volume"`    // Cairn volume name
	Datastore  string   `json:"datastore"` // VMFS datastore name; default = volume
	Pool       string   `json:"pool"`
	SizeGiB    int64    `json:"size_gib"`
	Thin       bool     `json:"thin"`
	Hosts      []string `json:"hosts"` // ESXi hosts that get the datastore; the first creates it
}

// Result says where the datastore ended up.
type Result struct {
	VolumeID  string   `json:"volume_id"`
	WWN       string   `json:"wwn"`
	Datastore string   `json:"datastore"`
	Hosts     []string `json:"hosts"` // hosts that mount it
}

// Engine runs requests.
type Engine struct {
	VC  *vim25.Client
	API gateway.API
	Log *progress.Log
	// RescanTimeout bounds the wait for a host to see the LUN (targets
	// export a new mapping within seconds). Default 2 min.
	RescanTimeout time.Duration
	PollInterval  time.Duration // default 2 s
}

// Job is the progress job name.
func Job(volume string) string { return "volume:" + volume }

// Create runs req.
func (e *Engine) Create(ctx context.Context, req Request) (*Result, error) {
	e.defaults()
	if req.Datastore == "" {
		req.Datastore = req.Volume
	}
	if req.Volume == "" || len(req.Hosts) == 0 {
		return nil, errors.New("name the volume and choose at least one host")
	}
	job := Job(req.Volume)
	info := func(step, host, f string, a ...any) { e.Log.Emit(job, progress.Info, step, host, f, a...) }
	res, err := e.create(ctx, req, info)
	if err != nil {
		e.Log.Emit(job, progress.Error, "datastore", "", "%v", err)
	}
	return res, err
}

func (e *Engine) create(ctx context.Context, req Request, info func(step, host, f string, a ...any)) (*Result, error) {
	loc, err := inventory.Locate(ctx, e.VC, req.Datacenter, req.Hosts)
	if err != nil {
		return nil, err
	}
	var hosts []*hoststorage.Host
	var objs []*object.HostSystem
	for _, name := range req.Hosts {
		hosts = append(hosts, hoststorage.New(e.VC, loc.Hosts[name]))
		objs = append(objs, loc.Hosts[name])
	}

	// Every host must have software iSCSI before anything is created.
	iqns := map[string]string{}
	for _, h := range hosts {
		st, err := h.ISCSI(ctx)
		if err != nil {
			return nil, err
		}
		if !st.Enabled || st.IQN == "" {
			return nil, fmt.Errorf("host %s has no software iSCSI: deploy Cairn to it (the deploy wires iSCSI) first", h.Name)
		}
		iqns[h.Name] = st.IQN
	}

	vol, err := e.API.GetVolume(ctx, req.Volume)
	switch {
	case errors.Is(err, gateway.ErrNotFound):
		if req.SizeGiB <= 0 {
			return nil, fmt.Errorf("volume %s does not exist: give its size in GiB to create it", req.Volume)
		}
		vol, err = e.API.CreateVolume(ctx, gateway.VolumeSpec{Name: req.Volume, Pool: req.Pool, Size: req.SizeGiB << 30, Thin: req.Thin})
		if err != nil {
			return nil, fmt.Errorf("create volume %s: %w", req.Volume, err)
		}
		info("volume", "", "created volume %s (%d GiB, wwn %s)", vol.Name, req.SizeGiB, vol.WWN)
	case err != nil:
		return nil, err
	default:
		info("volume", "", "volume %s exists (wwn %s)", vol.Name, vol.WWN)
	}
	if vol.WWN == "" {
		return nil, fmt.Errorf("volume %s has no WWN in the gateway's answer: the gateway is too old for this plugin", vol.Name)
	}
	mapped := map[string]bool{}
	for _, m := range vol.Mappings {
		mapped[m.HostID] = true
	}
	for _, h := range hosts {
		gh, err := e.API.GetHost(ctx, h.Name)
		if errors.Is(err, gateway.ErrNotFound) {
			gh, err = e.API.CreateHost(ctx, gateway.HostSpec{Name: h.Name, Type: "iscsi", IQN: iqns[h.Name]})
		}
		if err != nil {
			return nil, fmt.Errorf("host %s in Cairn: %w", h.Name, err)
		}
		if !mapped[gh.ID] {
			if err := e.API.MapVolume(ctx, vol.ID, gh.ID); err != nil {
				return nil, fmt.Errorf("map %s to %s: %w", vol.Name, h.Name, err)
			}
			info("map", h.Name, "mapped %s to %s (%s)", vol.Name, h.Name, iqns[h.Name])
		}
	}
	// Create on the first host once it sees the LUN.
	first := hosts[0]
	if err := e.waitLUN(ctx, first, vol.WWN); err != nil {
		return nil, err
	}
	ds, err := first.Datastore(ctx, req.Datastore)
	if err != nil {
		return nil, err
	}
	if ds == nil {
		if _, err := first.CreateVMFS(ctx, vol.WWN, req.Datastore); err != nil {
			return nil, err
		}
		info("vmfs", first.Name, "created VMFS datastore %s on naa.%s", req.Datastore, vol.WWN)
	}
	res := &Result{VolumeID: vol.ID, WWN: vol.WWN, Datastore: req.Datastore}
	var missing, notATS []string
	for _, h := range hosts {
		if err := e.waitLUN(ctx, h, vol.WWN); err != nil {
			return nil, err
		}
		// Round robin over every SVM, not MRU's single path (hoststorage/multipath.go).
		if n, err := h.EnsureRoundRobin(ctx, "naa."+strings.ToLower(vol.WWN)); err != nil {
			return nil, err
		} else if n > 0 {
			info("multipath", h.Name, "naa.%s on %s: path selection round robin (%s)", vol.WWN, h.Name, hoststorage.PolicyRoundRobin)
		}
		ds, err := h.Datastore(ctx, req.Datastore)
		if err != nil {
			return nil, err
		}
		if ds == nil {
			missing = append(missing, h.Name)
			continue
		}
		res.Hosts = append(res.Hosts, h.Name)
		info("verify", h.Name, "%s mounts %s", h.Name, req.Datastore)
		canonical := "naa." + strings.ToLower(vol.WWN)
		if st, err := h.VAAIStatus(ctx, canonical); err != nil {
			return res, err
		} else if st != hoststorage.VStorageSupported {
			notATS = append(notATS, fmt.Sprintf("%s (%s)", h.Name, st))
		}
	}
	if len(missing) > 0 {
		return res, fmt.Errorf("datastore %s is not mounted on %s although the LUN is visible: check those hosts' VMFS (esxcli storage vmfs snapshot list) and rescan", req.Datastore, strings.Join(missing, ", "))
	}
	if len(notATS) > 0 {
		// VMFS locks must be ATS: without it VMFS falls back to SCSI-2
		// reservations, which are per SVM and lock nothing across them.
		return res, fmt.Errorf("datastore %s: hardware acceleration of naa.%s is not supported on %s, so its VMFS may not be ATS-only and would lock with SCSI-2 reservations, which do not work across Cairn's SVMs. Do not use it: on those hosts check `esxcli storage core device vaai status get -d naa.%s` and `esxcli storage vmfs lockmode list`, fix the cause (docs/vsphere.md), then `esxcli storage vmfs lockmode set --ats -l %s` and re-run this job",
			req.Datastore, strings.ToLower(vol.WWN), strings.Join(notATS, ", "), strings.ToLower(vol.WWN), req.Datastore)
	}
	_ = progress.VCenter{C: e.VC}.Event(ctx, objs[0].Reference(), fmt.Sprintf("datastore %s on volume %s mounted on %d hosts", req.Datastore, vol.Name, len(res.Hosts)))
	return res, nil
}

// waitLUN rescans h until it sees naa.<wwn>.
func (e *Engine) waitLUN(ctx context.Context, h *hoststorage.Host, wwn string) error {
	return poll.Until(ctx, e.RescanTimeout, e.PollInterval, "check its iSCSI send targets reach the SVMs and that the host's IQN is mapped", func() (bool, string, error) {
		if err := h.Rescan(ctx); err != nil {
			return false, "", err
		}
		ok, err := h.HasLUN(ctx, wwn)
		return ok, fmt.Sprintf("host %s does not see LUN naa.%s in its rescans", h.Name, wwn), err
	})
}
