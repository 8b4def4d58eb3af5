package model

// Updates (PATCH) of every kind, renames included. One rule for all: nil
// fields stay as they are; an update naming no field is ErrNoChange; an
// update whose fields equal the current values writes nothing and returns
// the object (so a repeated request is harmless); otherwise the object is
// written under "unchanged since it was read", and a rename moves the name
// index in the same transaction under "the new name is free".

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// NameUpdate renames an object (protection domains, fault sets, devices).
type NameUpdate struct {
	Name *string `json:"name,omitempty"`
}

// HostUpdate changes a host; nil fields stay. chap_user and chap_secret
// both "" remove CHAP.
type HostUpdate struct {
	Name       *string `json:"name,omitempty"`
	IQN        *string `json:"iqn,omitempty"`
	CHAPUser   *string `json:"chap_user,omitempty"`
	CHAPSecret *string `json:"chap_secret,omitempty"`
}

// VolumeUpdate changes a volume; nil fields stay. Size only grows. The QoS
// limits are set live (0 removes a limit: unlimited, or the pool's rule).
type VolumeUpdate struct {
	Name           *string `json:"name,omitempty"`
	Size           *int64  `json:"size,omitempty"` // bytes, a multiple of AllocationUnit
	IOPSLimit      *int64  `json:"iops_limit,omitempty"`
	BandwidthLimit *int64  `json:"bandwidth_limit,omitempty"`
}

// applyVolumeQoS applies the QoS fields of a volume update (v unchanged on
// error).
func applyVolumeQoS(v Volume, up VolumeUpdate) (Volume, error) {
	return applyVolumeQoSUpdate(v, VolumeQoSUpdate{IOPSLimit: up.IOPSLimit, BandwidthLimit: up.BandwidthLimit})
}

// update is the common PATCH: fetch, apply (which validates and returns the
// new value), then write it, moving the name index when the name changed.
// nameOf reads the name of a T; the caller checked that up names a field.
func update[T any](ctx context.Context, s *Store, kind, ref string, apply func(T) (T, []clientv3.Cmp, error), nameOf, idOf func(T) string) (T, error) {
	return updateWithSecret(ctx, s, kind, ref, nil, apply, nameOf, idOf, nil)
}

// updateWithSecret is update for a kind with a secret outside the model
// (keys.go, SecretPrefix): load adds the stored secret to the fetched
// object before apply sees it, and secretOps(new) writes the secret in the
// object's transaction (under the object's mod revision, which guards it).
func updateWithSecret[T any](ctx context.Context, s *Store, kind, ref string, load func(context.Context, *T) error, apply func(T) (T, []clientv3.Cmp, error), nameOf, idOf func(T) string, secretOps func(T) []clientv3.Op) (T, error) {
	v, rev, err := fetch[T](ctx, s, kind, ref)
	if err != nil {
		return v, err
	}
	if load != nil {
		if err := load(ctx, &v); err != nil {
			return v, err
		}
	}
	nv, cmps, err := apply(v)
	if err != nil {
		return v, err
	}
	if reflect.DeepEqual(nv, v) {
		return v, nil // nothing to change: a repeat
	}
	b, err := json.Marshal(nv)
	if err != nil {
		return v, err
	}
	key := Key(kind, idOf(nv))
	cmps = append([]clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(key), "=", rev)}, cmps...)
	ops := []clientv3.Op{clientv3.OpPut(key, string(b))}
	if secretOps != nil {
		ops = append(ops, secretOps(nv)...)
	}
	oldName, newName := nameOf(v), nameOf(nv)
	if oldName != newName {
		if err := ValidateName(kind, newName); err != nil {
			return v, WithField(err, "name")
		}
		cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(NameKey(kind, newName)), "=", 0))
		ops = append(ops, clientv3.OpDelete(NameKey(kind, oldName)), clientv3.OpPut(NameKey(kind, newName), idOf(nv)))
	}
	err = s.txn(ctx, fmt.Sprintf("update %s %q", kindNoun[kind], oldName), cmps, ops...)
	if errors.Is(err, ErrConflict) && oldName != newName {
		if _, lerr := s.Lookup(ctx, kind, newName); lerr == nil {
			return v, WithField(existsf("%s %q already exists; choose another name", kindNoun[kind], newName), "name")
		}
	}
	if err != nil {
		return v, err
	}
	return nv, nil
}

func noChange(kind, name, fields string) error {
	return &opError{ErrNoChange, fmt.Sprintf("%s %q: the request changes nothing; give at least one of %s", kindNoun[kind], name, fields)}
}

func setName(up, cur *string) {
	if up != nil {
		*cur = *up
	}
}

// UpdatePD renames a protection domain.
func (s *Store) UpdatePD(ctx context.Context, ref string, up NameUpdate) (ProtectionDomain, error) {
	if up.Name == nil {
		return ProtectionDomain{}, noChange(KindPD, ref, "name")
	}
	return update(ctx, s, KindPD, ref, func(v ProtectionDomain) (ProtectionDomain, []clientv3.Cmp, error) {
		setName(up.Name, &v.Name)
		return v, nil, nil
	}, func(v ProtectionDomain) string { return v.Name }, func(v ProtectionDomain) string { return v.ID })
}

// UpdateFaultSet renames a fault set.
func (s *Store) UpdateFaultSet(ctx context.Context, ref string, up NameUpdate) (FaultSet, error) {
	if up.Name == nil {
		return FaultSet{}, noChange(KindFaultSet, ref, "name")
	}
	return update(ctx, s, KindFaultSet, ref, func(v FaultSet) (FaultSet, []clientv3.Cmp, error) {
		setName(up.Name, &v.Name)
		return v, nil, nil
	}, func(v FaultSet) string { return v.Name }, func(v FaultSet) string { return v.ID })
}

// UpdateDevice renames a device.
func (s *Store) UpdateDevice(ctx context.Context, ref string, up NameUpdate) (Device, error) {
	if up.Name == nil {
		return Device{}, noChange(KindDevice, ref, "name")
	}
	return update(ctx, s, KindDevice, ref, func(v Device) (Device, []clientv3.Cmp, error) {
		setName(up.Name, &v.Name)
		return v, nil, nil
	}, func(v Device) string { return v.Name }, func(v Device) string { return v.ID })
}

// UpdateSDS renames an SDS and/or changes its rebuild bandwidth cap. A
// concurrent change (e.g. entering maintenance) makes it fail, never lost.
func (s *Store) UpdateSDS(ctx context.Context, ref string, up SDSUpdate) (SDS, error) {
	if up.Name == nil && up.RebuildMBps == nil {
		return SDS{}, noChange(KindSDS, ref, "name, rebuild_mbps")
	}
	return update(ctx, s, KindSDS, ref, func(v SDS) (SDS, []clientv3.Cmp, error) {
		setName(up.Name, &v.Name)
		v, err := applySDSUpdate(v, up)
		return v, nil, err
	}, func(v SDS) string { return v.Name }, func(v SDS) string { return v.ID })
}

// UpdatePool renames a pool and/or changes its spare share and rebuild
// policy. A smaller usable capacity than the thick reservations is refused.
func (s *Store) UpdatePool(ctx context.Context, ref string, up PoolUpdate) (StoragePool, error) {
	if up.Name == nil && up.SparePercent == nil && up.RebuildPolicy == nil && up.RebuildMaxIO == nil &&
		up.QoSIOPSPerGiB == nil && up.QoSBandwidthPerGiB == nil {
		return StoragePool{}, noChange(KindPool, ref, "name, spare_percent, rebuild_policy, rebuild_max_io, qos_iops_per_gib, qos_bandwidth_per_gib")
	}
	return update(ctx, s, KindPool, ref, func(p StoragePool) (StoragePool, []clientv3.Cmp, error) {
		old := p
		setName(up.Name, &p.Name)
		p, err := applyPoolUpdate(p, up)
		if err != nil {
			return p, nil, err
		}
		if up.SparePercent == nil || *up.SparePercent == old.SparePercent {
			return p, nil, nil
		}
		if sp := *up.SparePercent; sp < 0 || sp > 90 {
			return p, nil, invalidField("spare_percent", "pool %q: spare_percent %d must be between 0 and 90 (at least the share of the largest fault set)", p.Name, sp)
		}
		p.SparePercent = *up.SparePercent
		devs, r1, err := listAt[Device](ctx, s, KindDevice)
		if err != nil {
			return p, nil, err
		}
		vols, r2, err := listAt[Volume](ctx, s, KindVolume)
		if err != nil {
			return p, nil, err
		}
		sdss, _, err := listAt[SDS](ctx, s, KindSDS)
		if err != nil {
			return p, nil, err
		}
		c := ComputePoolCapacity(p, devs, sdss, vols)
		if c.ThickUsed > c.Usable {
			return p, nil, invalidField("spare_percent", "pool %q: with spare_percent %d the pool has %s usable, less than the %s its thick volumes reserve; keep a smaller spare or add devices",
				p.Name, p.SparePercent, FormatSize(c.Usable), FormatSize(c.ThickUsed))
		}
		return p, []clientv3.Cmp{unchangedSince(KindDevice, r1), unchangedSince(KindVolume, r2)}, nil
	}, func(v StoragePool) string { return v.Name }, func(v StoragePool) string { return v.ID })
}

// UpdateHost renames a host and/or changes its iSCSI initiator name or CHAP
// credentials (iSCSI hosts only).
func (s *Store) UpdateHost(ctx context.Context, ref string, up HostUpdate) (Host, error) {
	if up.Name == nil && up.IQN == nil && up.CHAPUser == nil && up.CHAPSecret == nil {
		return Host{}, noChange(KindHost, ref, "name, iqn, chap_user, chap_secret")
	}
	return updateWithSecret(ctx, s, KindHost, ref, s.loadCHAPSecret, func(h Host) (Host, []clientv3.Cmp, error) {
		setName(up.Name, &h.Name)
		if h.Type != HostISCSI && (up.IQN != nil || up.CHAPUser != nil || up.CHAPSecret != nil) {
			return h, nil, invalidField("iqn", "NBD host %q: iqn and CHAP apply to iSCSI hosts only", h.Name)
		}
		var cmps []clientv3.Cmp
		if up.IQN != nil {
			iqn, err := NormalizeIQN(*up.IQN)
			if err != nil {
				return h, nil, WithField(err, "iqn")
			}
			if iqn != h.IQN {
				hosts, r, err := listAt[Host](ctx, s, KindHost)
				if err != nil {
					return h, nil, err
				}
				for _, o := range hosts {
					if o.IQN == iqn && o.ID != h.ID {
						return h, nil, WithField(existsf("host %q already has initiator name %s; one host per initiator", o.Name, iqn), "iqn")
					}
				}
				cmps = append(cmps, unchangedSince(KindHost, r))
			}
			h.IQN = iqn
		}
		if up.CHAPUser != nil {
			h.CHAPUser = *up.CHAPUser
		}
		if up.CHAPSecret != nil {
			h.CHAPSecret = *up.CHAPSecret
		}
		if err := checkCHAP(h.Name, h.CHAPUser, h.CHAPSecret); err != nil {
			return h, nil, err
		}
		h.CHAP = h.CHAPSecret != ""
		return h, cmps, nil
	}, func(v Host) string { return v.Name }, func(v Host) string { return v.ID }, chapSecretOps)
}

// checkCHAP: both or neither, and a secret initiators accept.
func checkCHAP(host, user, secret string) error {
	if (user == "") != (secret == "") {
		return invalidField("chap_secret", "iSCSI host %q: give both chap_user and chap_secret, or neither", host)
	}
	if secret != "" && (len(secret) < 12 || len(secret) > 255) {
		return invalidField("chap_secret", "iSCSI host %q: chap_secret must be 12 to 255 characters (initiators refuse shorter ones)", host)
	}
	return nil
}

// UpdateVolume renames and/or grows a volume (and applies the QoS fields
// through applyVolumeQoS). Growing to the current size changes nothing.
func (s *Store) UpdateVolume(ctx context.Context, ref string, up VolumeUpdate) (Volume, error) {
	if reflect.DeepEqual(up, VolumeUpdate{}) {
		return Volume{}, noChange(KindVolume, ref, "name, size, iops_limit, bandwidth_limit")
	}
	return update(ctx, s, KindVolume, ref, func(v Volume) (Volume, []clientv3.Cmp, error) {
		setName(up.Name, &v.Name)
		if up.Size != nil && *up.Size != v.Size {
			size := *up.Size
			if err := checkSize(v.Name, size); err != nil {
				return v, nil, WithField(err, "size")
			}
			if size < v.Size {
				return v, nil, invalidField("size", "volume %q is %s; it can only grow (asked %s): create a new volume and copy the data to shrink", v.Name, FormatSize(v.Size), FormatSize(size))
			}
			var cmps []clientv3.Cmp
			if !v.Thin {
				p, err := s.GetPool(ctx, v.PoolID)
				if err != nil {
					return v, nil, err
				}
				devs, r1, err := listAt[Device](ctx, s, KindDevice)
				if err != nil {
					return v, nil, err
				}
				vols, r2, err := listAt[Volume](ctx, s, KindVolume)
				if err != nil {
					return v, nil, err
				}
				sdss, _, err := listAt[SDS](ctx, s, KindSDS)
				if err != nil {
					return v, nil, err
				}
				if err := checkThick(p, ComputePoolCapacity(p, devs, sdss, vols), v.Name, size-v.Size); err != nil {
					return v, nil, WithField(err, "size")
				}
				cmps = []clientv3.Cmp{unchangedSince(KindDevice, r1), unchangedSince(KindVolume, r2)}
			}
			v.Size = size
			nv, err := applyVolumeQoS(v, up)
			return nv, cmps, err
		}
		nv, err := applyVolumeQoS(v, up)
		return nv, nil, err
	}, func(v Volume) string { return v.Name }, func(v Volume) string { return v.ID })
}
