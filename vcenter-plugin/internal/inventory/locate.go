package inventory

import (
	"context"
	"fmt"

	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25"
)

// Located are the vCenter objects an engine works on: a finder scoped to
// the datacenter, the datacenter, and the named hosts.
type Located struct {
	Finder     *find.Finder
	Datacenter *object.Datacenter
	Hosts      map[string]*object.HostSystem
}

// Locate finds the datacenter and the hosts by name.
func Locate(ctx context.Context, c *vim25.Client, datacenter string, hosts []string) (*Located, error) {
	f := find.NewFinder(c)
	dc, err := f.Datacenter(ctx, datacenter)
	if err != nil {
		return nil, fmt.Errorf("datacenter %s: %w", datacenter, err)
	}
	f.SetDatacenter(dc)
	l := &Located{Finder: f, Datacenter: dc, Hosts: map[string]*object.HostSystem{}}
	for _, name := range hosts {
		h, err := f.HostSystem(ctx, name)
		if err != nil {
			return nil, fmt.Errorf("host %s: %w", name, err)
		}
		l.Hosts[name] = h
	}
	return l, nil
}
