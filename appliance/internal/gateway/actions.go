// The endpoints that are not plain CRUD of one kind: map and unmap a volume,
// bootstrap the system, and the device prepare hook the model calls.

package gateway

import (
	"fmt"
	"net/http"

	"github.com/cairn-storage/cairn/appliance/internal/model"
)

func (s *Server) mapVolume(c *call) (int, any, error) {
	var req model.MapSpec
	if err := c.decode(&req); err != nil {
		return 0, nil, err
	}
	v, err := s.store.MapVolume(c.ctx, c.ref(), req)
	if err != nil {
		return 0, nil, err
	}
	return s.viewResponse(c, s.kindOf(model.KindVolume), v.ID, http.StatusOK)
}

type unmapRequest struct {
	Host string `json:"host"`
}

func (s *Server) unmapVolume(c *call) (int, any, error) {
	var req unmapRequest
	if err := c.decode(&req); err != nil {
		return 0, nil, err
	}
	v, err := s.store.UnmapVolume(c.ctx, c.ref(), req.Host)
	if err != nil {
		return 0, nil, err
	}
	return s.viewResponse(c, s.kindOf(model.KindVolume), v.ID, http.StatusOK)
}

type bootstrapRequest struct {
	Name string `json:"name"`
}

func (s *Server) bootstrap(c *call) (int, any, error) {
	var req bootstrapRequest
	if err := c.decode(&req); err != nil {
		return 0, nil, err
	}
	sys, created, err := s.store.Bootstrap(c.ctx, req.Name)
	if err != nil {
		return 0, nil, err
	}
	if !created {
		if sys.Name != req.Name {
			return 0, nil, fmt.Errorf("the system is already bootstrapped as %q (id %s); a system is bootstrapped once: %w", sys.Name, sys.ID, model.ErrExists)
		}
		return http.StatusOK, sys, nil
	}
	return http.StatusCreated, sys, nil
}
