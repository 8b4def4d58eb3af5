package catalog

import "github.com/cairn-storage/cairn/appliance/internal/model"

// Pool returns a storage pool by id (the SDSs read its rebuild policy).
func (c *Catalog) Pool(id string) (model.StoragePool, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	p, ok := c.pools[id]
	if !ok {
		return model.StoragePool{}, false
	}
	return *p, true
}
