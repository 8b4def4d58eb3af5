// Package frontend decides which volumes a host may reach: a frontend (NBD
// server, iSCSI target) serves a volume only while it is mapped to the host.
package frontend

import (
	"context"
	"fmt"
	"net"
	"sort"
	"sync"

	"github.com/cairn-storage/cairn/appliance/internal/blockdev"
	"github.com/cairn-storage/cairn/appliance/internal/catalog"
	"github.com/cairn-storage/cairn/appliance/internal/client"
	"github.com/cairn-storage/cairn/appliance/internal/model"
	"github.com/cairn-storage/cairn/appliance/internal/nbd"
)

// Resolver exports the volumes mapped to one host. It implements
// nbd.Resolver.
type Resolver struct {
	cat  *catalog.Catalog
	cl   *client.Cluster
	host string
	io   *IO

	mu   sync.Mutex
	open map[uint64]*Volume
}

// NewResolver returns a resolver for host (a host object's name).
func NewResolver(cat *catalog.Catalog, cl *client.Cluster, host string) *Resolver {
	return &Resolver{cat: cat, cl: cl, host: host, io: NewIO(cat, model.HostNBD, host), open: map[uint64]*Volume{}}
}

// IO returns the QoS and statistics state of the exported volumes (its
// Run keeps limits current and publishes the counters).
func (r *Resolver) IO() *IO { return r.io }

// Mapping returns the mapping of a volume to this host, if any.
func (r *Resolver) Mapping(v model.Volume) (model.Mapping, bool) {
	h, ok := r.cat.HostByName(r.host)
	if !ok {
		return model.Mapping{}, false
	}
	for _, m := range v.Mappings {
		if m.HostID == h.ID {
			return m, true
		}
	}
	return model.Mapping{}, false
}

// Lookup returns a mapped volume by name.
func (r *Resolver) Lookup(ctx context.Context, name string, _ net.Addr) (blockdev.Volume, bool, error) {
	if _, ok := r.cat.HostByName(r.host); !ok {
		return nil, false, fmt.Errorf("host %q is not defined in the cluster (cairnctl host create --name %s --type nbd): %w", r.host, r.host, nbd.ErrUnknownExport)
	}
	id, v, ok := r.cat.VolumeByName(name)
	if !ok {
		return nil, false, fmt.Errorf("volume %q: %w", name, nbd.ErrUnknownExport)
	}
	m, ok := r.Mapping(v)
	if !ok {
		return nil, false, fmt.Errorf("volume %q is not mapped to host %s: %w", name, r.host, nbd.ErrUnknownExport)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	vol := r.open[id]
	if vol == nil || vol.Size() != v.Size {
		cv, err := r.cl.OpenID(id)
		if err != nil {
			return nil, false, err
		}
		vol = r.io.Wrap(cv)
		r.open[id] = vol
	}
	return vol, m.ReadOnly, nil
}

// List returns the names of the volumes mapped to this host.
func (r *Resolver) List(ctx context.Context, _ net.Addr) ([]string, error) {
	var out []string
	for _, v := range r.cat.Volumes() {
		if _, ok := r.Mapping(v); ok {
			out = append(out, v.Name)
		}
	}
	sort.Strings(out)
	return out, nil
}
