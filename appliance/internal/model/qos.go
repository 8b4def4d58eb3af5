package model

import (
	"context"
	"fmt"

	"github.com/cairn-storage/cairn/appliance/contract"
)

// QoSLimits are the I/O limits of a volume or of one of its mappings; 0
// means unlimited. Frontends enforce them per volume with token buckets
// (internal/qos) that admit bursts of up to one second of the limit.
type QoSLimits struct {
	IOPSLimit      int64 `json:"iops_limit"`      // I/O requests per second
	BandwidthLimit int64 `json:"bandwidth_limit"` // payload bytes per second
}

// PoolQoS derives the limits of a pool's volumes from their size, the way
// ScaleIO operators did (IOPS and bandwidth growing with the volume): a
// volume without a limit of its own gets size_GiB × per_GiB, recomputed
// whenever the volume grows or the pool's rule changes. 0: no rule.
type PoolQoS struct {
	QoSIOPSPerGiB      int64 `json:"qos_iops_per_gib"`
	QoSBandwidthPerGiB int64 `json:"qos_bandwidth_per_gib"` // bytes/s per GiB
}

// Bounds of the QoS settings (the limits' own are in the contract, which
// clients check against too).
const (
	MaxIOPSLimit         = contract.MaxIOPSLimit
	MinBandwidthLimit    = contract.MinBandwidthLimit
	MaxBandwidthLimit    = contract.MaxBandwidthLimit
	MaxQoSIOPSPerGiB     = 1_000_000
	MaxQoSBandwidthPerGB = 1 << 30
)

// checkQoS validates limits; what names the object in the message.
func checkQoS(what string, q QoSLimits) error {
	if err := contract.CheckQoS(what, q.IOPSLimit, q.BandwidthLimit); err != nil {
		return invalidf("%v", err)
	}
	return nil
}

func checkPoolQoS(pool string, q PoolQoS) error {
	if q.QoSIOPSPerGiB < 0 || q.QoSIOPSPerGiB > MaxQoSIOPSPerGiB {
		return invalidf("pool %q: qos_iops_per_gib %d must be 0 (off) to %d", pool, q.QoSIOPSPerGiB, MaxQoSIOPSPerGiB)
	}
	if q.QoSBandwidthPerGiB < 0 || q.QoSBandwidthPerGiB > MaxQoSBandwidthPerGB {
		return invalidf("pool %q: qos_bandwidth_per_gib %d must be 0 (off) to %d bytes per second per GiB (e.g. 262144 for 256 KiB/s per GiB)", pool, q.QoSBandwidthPerGiB, MaxQoSBandwidthPerGB)
	}
	return nil
}

// EffectiveQoS returns the limits a volume runs with: its own, or where
// one is 0 the pool's per-GiB rule applied to its current size.
func EffectiveQoS(v Volume, p StoragePool) QoSLimits {
	e := v.QoSLimits
	gib := v.Size / AllocationUnit
	if e.IOPSLimit == 0 && p.QoSIOPSPerGiB > 0 {
		e.IOPSLimit = min(gib*p.QoSIOPSPerGiB, MaxIOPSLimit)
	}
	if e.BandwidthLimit == 0 && p.QoSBandwidthPerGiB > 0 {
		e.BandwidthLimit = min(gib*p.QoSBandwidthPerGiB, MaxBandwidthLimit)
	}
	return e
}

// VolumeQoSUpdate holds the QoS fields of a volume or mapping PATCH; nil
// fields stay, 0 removes a limit (unlimited, or the pool's rule).
type VolumeQoSUpdate struct {
	IOPSLimit      *int64 `json:"iops_limit,omitempty"`
	BandwidthLimit *int64 `json:"bandwidth_limit,omitempty"`
}

// Empty reports whether the update names no field.
func (u VolumeQoSUpdate) Empty() bool { return u.IOPSLimit == nil && u.BandwidthLimit == nil }

func (u VolumeQoSUpdate) apply(what string, q QoSLimits) (QoSLimits, error) {
	if u.IOPSLimit != nil {
		q.IOPSLimit = *u.IOPSLimit
	}
	if u.BandwidthLimit != nil {
		q.BandwidthLimit = *u.BandwidthLimit
	}
	return q, checkQoS(what, q)
}

// applyVolumeQoSUpdate validates up against v and returns the updated
// volume (v unchanged on error).
func applyVolumeQoSUpdate(v Volume, up VolumeQoSUpdate) (Volume, error) {
	q, err := up.apply(fmt.Sprintf("volume %q", v.Name), v.QoSLimits)
	if err != nil {
		return v, err
	}
	v.QoSLimits = q
	return v, nil
}

// CheckVolumeQoSUpdate validates up against v without writing.
func CheckVolumeQoSUpdate(v Volume, up VolumeQoSUpdate) error {
	_, err := applyVolumeQoSUpdate(v, up)
	return err
}

// UpdateVolumeQoS sets or removes a volume's limits, live: frontends see
// the change through their catalog watch. Equal values write nothing.
func (s *Store) UpdateVolumeQoS(ctx context.Context, ref string, up VolumeQoSUpdate) (Volume, error) {
	v, rev, err := fetch[Volume](ctx, s, KindVolume, ref)
	if err != nil {
		return v, err
	}
	nv, err := applyVolumeQoSUpdate(v, up)
	if err != nil || nv.QoSLimits == v.QoSLimits {
		return v, err
	}
	if err := s.updateVolume(ctx, nv, rev, nil); err != nil {
		return v, err
	}
	return nv, nil
}

// applyPoolQoS applies the QoS fields of a pool update (p unchanged on
// error).
func applyPoolQoS(p StoragePool, up PoolUpdate) (StoragePool, error) {
	q := p.PoolQoS
	if up.QoSIOPSPerGiB != nil {
		q.QoSIOPSPerGiB = *up.QoSIOPSPerGiB
	}
	if up.QoSBandwidthPerGiB != nil {
		q.QoSBandwidthPerGiB = *up.QoSBandwidthPerGiB
	}
	if err := checkPoolQoS(p.Name, q); err != nil {
		return p, err
	}
	p.PoolQoS = q
	return p, nil
}

func (s VolumeSpec) limits() QoSLimits {
	return QoSLimits{IOPSLimit: s.IOPSLimit, BandwidthLimit: s.BandwidthLimit}
}

func (s MapSpec) limits() QoSLimits {
	return QoSLimits{IOPSLimit: s.IOPSLimit, BandwidthLimit: s.BandwidthLimit}
}

func (s PoolSpec) qos() PoolQoS {
	return PoolQoS{QoSIOPSPerGiB: s.QoSIOPSPerGiB, QoSBandwidthPerGiB: s.QoSBandwidthPerGiB}
}
