package gateway

import (
	"github.com/cairn-storage/cairn/appliance/internal/model"
)

// effectiveQoS is shown in the volume view: the limits frontends enforce
// (the volume's own, or its pool's per-GiB rule at its current size).
type effectiveQoS struct {
	EffectiveIOPSLimit      int64 `json:"effective_iops_limit"`
	EffectiveBandwidthLimit int64 `json:"effective_bandwidth_limit"`
}

func (w *world) effectiveQoS(v model.Volume) effectiveQoS {
	e := model.EffectiveQoS(v, w.pools[v.PoolID])
	return effectiveQoS{EffectiveIOPSLimit: e.IOPSLimit, EffectiveBandwidthLimit: e.BandwidthLimit}
}
