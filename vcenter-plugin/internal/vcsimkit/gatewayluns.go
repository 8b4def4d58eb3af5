package vcsimkit

import (
	"context"
	"fmt"

	"github.com/cairn-storage/cairn/vcenter-plugin/internal/gateway"
)

// GatewayLUNs answers rescans from a Cairn gateway: the volumes mapped to
// the gateway host whose IQN is the initiator's. The e2e harness uses it
// so that simulated hosts see what a real cluster exports. (The
// simulated hosts do not speak iSCSI; fio reaches volumes over NBD.)
type GatewayLUNs struct {
	API gateway.API
}

func (g GatewayLUNs) LUNsFor(ctx context.Context, iqn string, sendTargets []string) ([]LUN, error) {
	if len(sendTargets) == 0 {
		return nil, nil
	}
	hosts, err := g.API.ListHosts(ctx)
	if err != nil {
		return nil, fmt.Errorf("list Cairn hosts: %w", err)
	}
	id := ""
	for _, h := range hosts {
		if h.IQN == iqn {
			id = h.ID
		}
	}
	if id == "" {
		return nil, nil
	}
	vols, err := g.API.ListVolumes(ctx)
	if err != nil {
		return nil, fmt.Errorf("list Cairn volumes: %w", err)
	}
	var out []LUN
	for _, v := range vols {
		for _, m := range v.Mappings {
			if m.HostID == id {
				out = append(out, LUN{NAA: v.WWN, Size: v.Size, Name: v.Name})
			}
		}
	}
	return out, nil
}
