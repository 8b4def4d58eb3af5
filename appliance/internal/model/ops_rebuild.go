package model

// Rebuild pacing: a pool's rebuild policy and an SDS's bandwidth cap for
// fill traffic (rebuild, resync, rebalance). Both live in the objects
// themselves, so every SDS sees a change through its catalog watch and
// applies it to the fills it is running within a second or so.

import "strings"

// Rebuild policies of a pool.
const (
	// RebuildUnlimited: fills run as fast as the devices and links allow.
	RebuildUnlimited = "unlimited"
	// RebuildLimitIO: at most StoragePool.RebuildMaxIO fill I/Os (one
	// chunk each) of the pool in flight per SDS.
	RebuildLimitIO = "limit-concurrent-io"
	// RebuildFavorAppIO: while the SDS serves application I/O (some
	// completed within the last few milliseconds), at most one fill I/O
	// of the pool at a time; full speed when it is idle.
	RebuildFavorAppIO = "favor-app-io"
)

// Bounds of the pacing settings.
const (
	MaxRebuildMaxIO = 64
	MaxRebuildMBps  = 100000
)

// RebuildPolicies lists the valid policies, for messages and help texts.
var RebuildPolicies = []string{RebuildUnlimited, RebuildLimitIO, RebuildFavorAppIO}

// Policy is the pool's rebuild policy; an empty one (pools created before
// policies existed) is RebuildUnlimited.
func (p StoragePool) Policy() string {
	if p.RebuildPolicy == "" {
		return RebuildUnlimited
	}
	return p.RebuildPolicy
}

// PoolUpdate changes a pool's settings; nil fields stay as they are.
type PoolUpdate struct {
	Name *string `json:"name,omitempty"`
	// SparePercent of the raw capacity kept free for rebuilds, 0..90.
	SparePercent  *int    `json:"spare_percent,omitempty"`
	RebuildPolicy *string `json:"rebuild_policy,omitempty"`
	// RebuildMaxIO: fill I/Os in flight per SDS, 1..MaxRebuildMaxIO; only
	// with the policy limit-concurrent-io.
	RebuildMaxIO *int `json:"rebuild_max_io,omitempty"`
	// QoS rule (PoolQoS): 0 turns it off.
	QoSIOPSPerGiB      *int64 `json:"qos_iops_per_gib,omitempty"`
	QoSBandwidthPerGiB *int64 `json:"qos_bandwidth_per_gib,omitempty"`
}

// applyPoolUpdate validates up against p and returns the updated pool.
func applyPoolUpdate(p StoragePool, up PoolUpdate) (StoragePool, error) {
	if up.QoSIOPSPerGiB != nil || up.QoSBandwidthPerGiB != nil {
		var err error
		if p, err = applyPoolQoS(p, up); err != nil {
			return p, err
		}
	}
	if up.RebuildPolicy == nil && up.RebuildMaxIO == nil {
		return p, nil
	}
	policy := p.Policy()
	if up.RebuildPolicy != nil {
		policy = *up.RebuildPolicy
		known := false
		for _, k := range RebuildPolicies {
			known = known || policy == k
		}
		if !known {
			return p, invalidField("rebuild_policy", "pool %q: rebuild_policy %q: use one of %s", p.Name, policy, strings.Join(RebuildPolicies, ", "))
		}
	}
	maxIO := p.RebuildMaxIO
	if up.RebuildMaxIO != nil {
		maxIO = *up.RebuildMaxIO
		if policy != RebuildLimitIO {
			return p, invalidField("rebuild_max_io", "pool %q: rebuild_max_io applies only to the policy %s (the policy is %s)", p.Name, RebuildLimitIO, policy)
		}
		if maxIO < 1 || maxIO > MaxRebuildMaxIO {
			return p, invalidField("rebuild_max_io", "pool %q: rebuild_max_io %d must be between 1 and %d", p.Name, maxIO, MaxRebuildMaxIO)
		}
	}
	switch {
	case policy == RebuildLimitIO && maxIO == 0:
		return p, invalidField("rebuild_max_io", "pool %q: the policy %s needs rebuild_max_io (fill I/Os at once per SDS, 1-%d)", p.Name, RebuildLimitIO, MaxRebuildMaxIO)
	case policy != RebuildLimitIO:
		maxIO = 0 // meaningless for the other policies: not kept
	}
	if policy == p.Policy() && maxIO == p.RebuildMaxIO {
		return p, nil // as it is (an old pool's "" policy stays, meaning unlimited)
	}
	p.RebuildPolicy, p.RebuildMaxIO = policy, maxIO
	return p, nil
}

// SDSUpdate changes an SDS's settings; nil fields stay as they are.
type SDSUpdate struct {
	Name *string `json:"name,omitempty"`
	// RebuildMBps caps the SDS's outgoing fill traffic (MB/s); 0 removes
	// the cap.
	RebuildMBps *int `json:"rebuild_mbps,omitempty"`
}

func applySDSUpdate(x SDS, up SDSUpdate) (SDS, error) {
	if up.RebuildMBps == nil {
		return x, nil
	}
	if v := *up.RebuildMBps; v < 0 || v > MaxRebuildMBps {
		return x, invalidField("rebuild_mbps", "SDS %q: rebuild_mbps %d must be between 0 (no cap) and %d", x.Name, v, MaxRebuildMBps)
	}
	x.RebuildMBps = *up.RebuildMBps
	return x, nil
}
