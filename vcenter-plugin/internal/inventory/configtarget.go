package inventory

import (
	"context"
	"fmt"

	"github.com/vmware/govmomi/view"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"
)

// rdmCapableDisks asks each host's compute resource which disks a VM on
// that host may map as RDMs (QueryConfigTarget().scsiDisk): ESXi leaves
// out local disks without a unique identifier (named by path, mpx.…) and
// disks that hold VMFS, and refuses an RDM of any of them. The answer is
// host → set of canonical names.
func rdmCapableDisks(ctx context.Context, m *view.Manager, root types.ManagedObjectReference, hosts []mo.HostSystem) (map[types.ManagedObjectReference]map[string]bool, error) {
	var crs []mo.ComputeResource
	if err := retrieve(ctx, m, root, "ComputeResource", []string{"environmentBrowser"}, &crs); err != nil {
		return nil, fmt.Errorf("compute resources: %w", err)
	}
	browser := map[types.ManagedObjectReference]types.ManagedObjectReference{}
	for _, cr := range crs {
		if cr.EnvironmentBrowser != nil {
			browser[cr.Self] = *cr.EnvironmentBrowser
		}
	}
	out := map[types.ManagedObjectReference]map[string]bool{}
	for _, h := range hosts {
		if h.Parent == nil {
			continue
		}
		eb, ok := browser[*h.Parent]
		if !ok {
			continue
		}
		host := h.Self
		res, err := methods.QueryConfigTarget(ctx, m.Client(), &types.QueryConfigTarget{This: eb, Host: &host})
		if err != nil {
			return nil, fmt.Errorf("host %s: query config target: %w", h.Name, err)
		}
		disks := map[string]bool{}
		if res.Returnval != nil {
			for _, d := range res.Returnval.ScsiDisk {
				if d.Disk != nil {
					disks[d.Disk.CanonicalName] = true
				}
			}
		}
		out[h.Self] = disks
	}
	return out, nil
}
