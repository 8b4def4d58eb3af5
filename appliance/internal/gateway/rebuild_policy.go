package gateway

// Rebuild pacing settings: PATCH /pools/{ref} (rebuild policy) and
// PATCH /sds/{ref} (fill bandwidth cap). Validation is the model's.

import (
	"net/http"

	"github.com/cairn-storage/cairn/appliance/internal/model"
)

func (s *Server) updatePool(c *call) (int, any, error) {
	var req model.PoolUpdate
	if err := c.decode(&req); err != nil {
		return 0, nil, err
	}
	p, err := s.store.UpdatePool(c.ctx, c.ref(), req)
	if err != nil {
		return 0, nil, err
	}
	return s.viewResponse(c, s.kindOf(model.KindPool), p.ID, http.StatusOK)
}

func (s *Server) updateSDS(c *call) (int, any, error) {
	var req model.SDSUpdate
	if err := c.decode(&req); err != nil {
		return 0, nil, err
	}
	x, err := s.store.UpdateSDS(c.ctx, c.ref(), req)
	if err != nil {
		return 0, nil, err
	}
	return s.viewResponse(c, s.kindOf(model.KindSDS), x.ID, http.StatusOK)
}
