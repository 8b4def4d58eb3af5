package hoststorage

import (
	"context"
	"fmt"
	"strings"

	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/types"
)

// Multipathing of Cairn LUNs. ESXi claims them with VMW_SATP_ALUA (they
// report TPGS), whose default path selection policy is VMW_PSP_MRU: one
// working path, to one SVM. Every SVM exports every volume active/optimized,
// so Cairn wants round robin over all of them: the load spreads over every
// SVM, and an SVM going down (maintenance, failure) leaves I/O on paths
// that already work instead of waiting for MRU to fail over.
//
// The vSphere API sets the policy per LU (SetMultipathLunPolicy); it does
// not expose round robin's IOPS-per-path switch (default 1000), which only
// esxcli or a SATP claim rule can set. docs/vsphere.md gives the claim
// rule that makes every future Cairn LUN round robin with iops=1.
const (
	PolicyRoundRobin = "VMW_PSP_RR"
	// CairnVendor is the INQUIRY vendor of Cairn LUNs (scsi.Options.VendorID).
	CairnVendor = "CAIRN"
)

// LUNPaths is the multipath state of one Cairn LUN on a host.
type LUNPaths struct {
	Canonical string // naa.…
	LUID      string // the multipath LU id SetMultipathLunPolicy takes
	Policy    string // path selection policy, e.g. VMW_PSP_RR
	Paths     int    // paths to the LU (one per SVM target portal)
	Working   int    // paths the policy sends I/O down
}

// CairnPaths returns the multipath state of every Cairn LUN the host sees.
func (h *Host) CairnPaths(ctx context.Context) ([]LUNPaths, error) {
	info, err := h.deviceInfo(ctx)
	if err != nil {
		return nil, err
	}
	byKey := map[string]*types.HostScsiDisk{}
	for _, l := range info.ScsiLun {
		if d, ok := l.(*types.HostScsiDisk); ok && strings.TrimSpace(d.Vendor) == CairnVendor {
			byKey[d.Key] = d
		}
	}
	var out []LUNPaths
	var seen = map[string]bool{}
	if info.MultipathInfo != nil {
		for _, lu := range info.MultipathInfo.Lun {
			d := byKey[lu.Lun]
			if d == nil {
				continue
			}
			p := LUNPaths{Canonical: d.CanonicalName, LUID: lu.Id, Paths: len(lu.Path)}
			if lu.Policy != nil {
				p.Policy = lu.Policy.GetHostMultipathInfoLogicalUnitPolicy().Policy
			}
			for _, path := range lu.Path {
				if path.IsWorkingPath != nil && *path.IsWorkingPath {
					p.Working++
				}
			}
			seen[d.CanonicalName] = true
			out = append(out, p)
		}
	}
	for _, d := range byKey {
		if !seen[d.CanonicalName] {
			out = append(out, LUNPaths{Canonical: d.CanonicalName}) // no multipath entry: no paths
		}
	}
	return out, nil
}

// EnsureRoundRobin sets VMW_PSP_RR on the Cairn LUNs of the host that do
// not use it yet: on canonical (naa.…) only, or on all of them when it is
// empty. It returns how many it changed.
func (h *Host) EnsureRoundRobin(ctx context.Context, canonical string) (int, error) {
	luns, err := h.CairnPaths(ctx)
	if err != nil {
		return 0, err
	}
	ss, err := h.storageSystem(ctx)
	if err != nil {
		return 0, err
	}
	changed, found := 0, canonical == ""
	for _, l := range luns {
		if canonical != "" && l.Canonical != canonical {
			continue
		}
		found = true
		if l.LUID == "" {
			return changed, fmt.Errorf("host %s: LUN %s has no multipath entry: rescan the storage adapters, then retry", h.Name, l.Canonical)
		}
		if l.Policy == PolicyRoundRobin {
			continue
		}
		req := types.SetMultipathLunPolicy{This: ss.Reference(), LunId: l.LUID, Policy: &types.HostMultipathInfoLogicalUnitPolicy{Policy: PolicyRoundRobin}}
		if _, err := methods.SetMultipathLunPolicy(ctx, h.c, &req); err != nil {
			return changed, fmt.Errorf("host %s: set round robin on %s (was %s): %w", h.Name, l.Canonical, l.Policy, err)
		}
		changed++
	}
	if !found {
		return 0, fmt.Errorf("host %s does not see %s: rescan, then retry", h.Name, canonical)
	}
	return changed, nil
}
