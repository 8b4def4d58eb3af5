package sds

// prepare.go: preparing a device the administrator adds (OpPrepareDevice):
// the checks that refuse a device in use or holding data, and the superblock.

import (
	"errors"
	"fmt"
	"time"

	"github.com/cairn-storage/cairn/appliance/internal/model"
	"github.com/cairn-storage/cairn/appliance/internal/sdsrpc"
)

// errDeviceTaken marks a refusal because the device is taken: in use by a
// program or by this SDS, or holding data that only force may destroy. It
// is answered with wire.StatusRefused (which sdsrpc turns into
// model.ErrInUse); any other refusal with wire.StatusInvalid.
var errDeviceTaken = errors.New("device taken")

// takenError is an errDeviceTaken with its own message (the sentinel's
// text is not shown: the message says what to do).
type takenError struct{ msg string }

func (e *takenError) Error() string        { return e.msg }
func (e *takenError) Is(target error) bool { return target == errDeviceTaken }

func deviceTaken(format string, a ...any) error {
	return &takenError{fmt.Sprintf(format, a...)}
}

// prepareDevice checks that a device may be taken and writes its
// superblock (or finds it already prepared as asked), returning its
// capacity for chunks.
func (s *Server) prepareDevice(p sdsrpc.PrepareDeviceRequest) (int64, error) {
	if p.ClusterID == "" || p.DeviceID == "" || len(p.DeviceID) > 32 || len(p.ClusterID) > 32 {
		return 0, errors.New("cluster id and device id are required (at most 32 characters)")
	}
	if err := CheckStablePath(p.Path, p.Force); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, d := range s.devices {
		if d.path == p.Path {
			if d.id == p.DeviceID {
				return int64(d.super.Slots) * model.ChunkSize, nil
			}
			return 0, deviceTaken("device %s is already in use by this SDS as device %s", p.Path, d.id)
		}
	}
	if d, ok := s.prepared[p.DeviceID]; ok && d.path == p.Path {
		return int64(d.super.Slots) * model.ChunkSize, nil
	}
	dev, err := openDevice(p.Path, s.cfg.ReadCache)
	if err != nil {
		return 0, err
	}
	sb, raw, err := dev.readSuper()
	switch {
	case err == nil && sb.ClusterID == p.ClusterID && sb.DeviceID == p.DeviceID:
		// Re-adding the same device (a retried request): keep its data.
		dev.id, dev.super = p.DeviceID, sb
		s.prepared[p.DeviceID] = dev
		return int64(sb.Slots) * model.ChunkSize, nil
	case err == nil && !p.Force:
		dev.close()
		if sb.ClusterID != p.ClusterID {
			return 0, deviceTaken("device %s holds data of another Cairn cluster (%s): if that data is no longer needed, add it with force", p.Path, sb.ClusterID)
		}
		return 0, deviceTaken("device %s already belongs to this cluster as device %s: remove that device first, or add with force to wipe it", p.Path, sb.DeviceID)
	case err != nil && !errors.Is(err, errNoSuperblock) && !p.Force:
		dev.close()
		return 0, fmt.Errorf("device %s: %w; add with force to overwrite it", p.Path, err)
	case err != nil && !p.Force:
		if sig := foreignSignature(raw); sig != "" {
			dev.close()
			return 0, deviceTaken("device %s holds %s: wipe it first (wipefs), or add with force to overwrite it", p.Path, sig)
		}
	}
	size, err := dev.size()
	if err != nil {
		dev.close()
		return 0, fmt.Errorf("device %s: size: %w", p.Path, err)
	}
	if size < minDeviceSize {
		dev.close()
		return 0, fmt.Errorf("device %s has %d bytes; a device needs at least %d MiB", p.Path, size, minDeviceSize>>20)
	}
	slots := uint64(size-DataOffset) / model.ChunkSize
	dev.id = p.DeviceID
	dev.super = &superblock{ChunkSize: model.ChunkSize, ClusterID: p.ClusterID, DeviceID: p.DeviceID, SDSID: s.id, DataOffset: DataOffset, Slots: slots, Created: time.Now()}
	// Zero the data area (punching holes where possible) so a fresh slot
	// never shows old contents, then write the superblock last.
	if err := dev.zero(DataOffset, int64(slots)*model.ChunkSize); err != nil {
		dev.close()
		return 0, fmt.Errorf("device %s: clear data area: %w", p.Path, err)
	}
	if _, err := dev.f.WriteAt(dev.super.encode(), 0); err != nil {
		dev.close()
		return 0, fmt.Errorf("device %s: write superblock: %w", p.Path, err)
	}
	if err := dev.f.Sync(); err != nil {
		dev.close()
		return 0, fmt.Errorf("device %s: sync: %w", p.Path, err)
	}
	s.prepared[p.DeviceID] = dev
	s.log.Info("device prepared", "device", p.Path, "id", p.DeviceID, "slots", slots)
	return int64(slots) * model.ChunkSize, nil
}
