package mdm

import (
	"slices"

	"github.com/cairn-storage/cairn/appliance/internal/model"
	"github.com/cairn-storage/cairn/appliance/internal/placement"
)

// maxFillsPerMap bounds the fill reports one map change consumes: they are
// deleted in the map's own transaction, and etcd refuses a transaction of
// more than 128 operations (--max-txn-ops). When more fills finished at
// once (fast delta resyncs of many groups), the groups beyond the bound keep
// their copies in this map and are marked ready by the next round, which
// this map's publication triggers.
const maxFillsPerMap = 100

// consumedFills lists the fill reports a group's change from copies to n
// consumes: those of copies that leave the rebuild or resync state.
func consumedFills(poolID string, pg int, copies, n []model.CopyRef) []string {
	var out []string
	for _, cp := range copies {
		if (cp.State == model.CopyRebuild || cp.State == model.CopyResync) && !slices.ContainsFunc(n, func(x model.CopyRef) bool { return x.DeviceID == cp.DeviceID && x.State == cp.State }) {
			out = append(out, model.FilledPoolPrefix(poolID)+placement.FillKey(pg, cp.DeviceID))
		}
	}
	return out
}
