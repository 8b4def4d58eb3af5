package hoststorage

import (
	"context"
	"fmt"
)

// VStorageSupported is ScsiLun.vStorageSupport when every VAAI primitive
// of the device works (ATS, XCOPY, WRITE SAME).
const VStorageSupported = "vStorageSupported"

// VAAIStatus returns the host's hardware acceleration status of the LUN
// canonical (naa.…): vStorageSupported, vStorageUnsupported or
// vStorageUnknown.
//
// The vSphere API has no property for a VMFS volume's lock mode (ATS-only
// or not: esxcli storage vmfs lockmode list shows it). This status is its
// API-visible precondition: ESXi formats VMFS ATS-only only when its ATS
// probe of the device succeeded, and a failed probe shows here as
// vStorageUnsupported.
func (h *Host) VAAIStatus(ctx context.Context, canonical string) (string, error) {
	disks, err := h.Disks(ctx)
	if err != nil {
		return "", err
	}
	for _, d := range disks {
		if d.CanonicalName == canonical {
			return d.VStorageSupport, nil
		}
	}
	return "", fmt.Errorf("host %s does not see %s: rescan, then retry", h.Name, canonical)
}
