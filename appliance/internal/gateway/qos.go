package gateway

import (
	"net/http"

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

// volumeUpdate is the body of PATCH /volumes/{ref}: a new size and/or QoS
// limits (0 removes a limit). Every field is validated before anything is
// written, so a refused request changes nothing.
type volumeUpdate struct {
	Size           *int64 `json:"size,omitempty"`
	IOPSLimit      *int64 `json:"iops_limit,omitempty"`
	BandwidthLimit *int64 `json:"bandwidth_limit,omitempty"`
}

func (s *Server) updateVolume(c *call) (int, any, error) {
	var req volumeUpdate
	if err := c.decode(&req); err != nil {
		return 0, nil, err
	}
	qos := model.VolumeQoSUpdate{IOPSLimit: req.IOPSLimit, BandwidthLimit: req.BandwidthLimit}
	if req.Size == nil && qos.Empty() {
		return 0, nil, errorf(http.StatusBadRequest, "give size, iops_limit and/or bandwidth_limit (bytes per second; 0 removes a limit)")
	}
	v, err := s.store.GetVolume(c.ctx, c.ref())
	if err != nil {
		return 0, nil, err
	}
	if err := model.CheckVolumeQoSUpdate(v, qos); err != nil {
		return 0, nil, err
	}
	// A size-only PATCH to the current size stays an error (nothing to
	// do); with QoS fields beside it the size is simply unchanged.
	if req.Size != nil && (*req.Size != v.Size || qos.Empty()) {
		if _, err := s.store.ResizeVolume(c.ctx, v.ID, *req.Size); err != nil {
			return 0, nil, err
		}
	}
	if !qos.Empty() {
		if _, err := s.store.UpdateVolumeQoS(c.ctx, v.ID, qos); err != nil {
			return 0, nil, err
		}
	}
	return s.viewResponse(c, s.kindOf(model.KindVolume), v.ID, http.StatusOK)
}
