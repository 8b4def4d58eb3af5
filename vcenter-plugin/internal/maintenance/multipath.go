package maintenance

import (
	"context"
	"fmt"
	"sort"

	"github.com/cairn-storage/cairn/vcenter-plugin/internal/hoststorage"
)

// checkMultipath refuses to take an SVM down while some host would lose
// access to a Cairn LUN for longer than a path switch: every Cairn LUN of
// every host must use round robin (ESXi's default for ALUA devices, MRU,
// keeps one working path and fails over only when it dies) and have a
// path through more than one SVM.
func (r *roll) checkMultipath(ctx context.Context) error {
	names := make([]string, 0, len(r.hosts))
	for name := range r.hosts {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		luns, err := hoststorage.New(r.vc.C, r.hosts[name]).CairnPaths(ctx)
		if err != nil {
			return err
		}
		for _, l := range luns {
			switch {
			case l.Policy != hoststorage.PolicyRoundRobin:
				return fmt.Errorf("host %s: LUN %s uses path selection %q, not %s: its I/O would stall while the SVM it uses is down. Set round robin (re-run the datastore job for the volume, or esxcli storage nmp device set -d %s -P %s), then resume",
					name, l.Canonical, l.Policy, hoststorage.PolicyRoundRobin, l.Canonical, hoststorage.PolicyRoundRobin)
			case l.Paths < 2:
				return fmt.Errorf("host %s: LUN %s has %d path(s): taking an SVM down could cut it off. Check the host's iSCSI send targets list every SVM and rescan, then resume", name, l.Canonical, l.Paths)
			}
		}
	}
	return nil
}
