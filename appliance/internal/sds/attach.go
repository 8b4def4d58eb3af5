package sds

// attach.go: the devices this SDS serves: opening those the model assigns it,
// closing them, and taking one out of service when it fails.

import (
	"context"
	"fmt"
	"time"

	"github.com/cairn-storage/cairn/appliance/internal/model"
)

// attachDevices opens every device the model assigns to this SDS, and
// closes those it no longer has.
func (s *Server) attachDevices() {
	sys := s.cat.System()
	s.detachDevices(sys.ID)
	for _, d := range s.cat.Devices(s.id) {
		s.mu.RLock()
		_, done := s.devices[d.ID]
		s.mu.RUnlock()
		if done || d.State == model.DeviceRemoving {
			continue
		}
		s.mu.Lock()
		dev := s.prepared[d.ID]
		delete(s.prepared, d.ID)
		s.mu.Unlock()
		if dev == nil {
			var err error
			dev, err = s.openExisting(d, sys.ID)
			if err != nil {
				s.log.Error("device unavailable", "device", d.Path, "err", err)
				continue
			}
		}
		if err := s.idx.attach(dev); err != nil {
			s.log.Error("device index", "device", d.Path, "err", err)
			dev.close()
			continue
		}
		s.mu.Lock()
		s.devices[d.ID] = dev
		s.mu.Unlock()
		s.log.Info("device attached", "device", d.Path, "id", d.ID, "slots", dev.super.Slots, "direct_io_align", dev.align)
	}
}

// detachDevices closes the devices this SDS serves that the model no
// longer assigns it (deleted, or removed once drained), so that the disk
// is free again: to wipe, to hand to another system, or to add anew.
// Without a system known (the catalog not loaded) it does nothing.
func (s *Server) detachDevices(clusterID string) {
	if clusterID == "" {
		return
	}
	want := map[string]bool{}
	for _, d := range s.cat.Devices(s.id) {
		want[d.ID] = true
	}
	s.mu.Lock()
	var gone []*device
	for id, dev := range s.devices {
		if !want[id] {
			gone = append(gone, dev)
			delete(s.devices, id)
		}
	}
	s.mu.Unlock()
	for _, dev := range gone {
		n, err := s.idx.detach(dev.id)
		if err != nil {
			s.log.Error("device detached, but its chunk index entries were not dropped", "device", dev.path, "id", dev.id, "err", err)
		}
		dev.close()
		s.log.Info("device detached: no longer in the model", "device", dev.path, "id", dev.id, "chunks_dropped", n)
	}
}

func (s *Server) openExisting(d model.Device, clusterID string) (*device, error) {
	dev, err := openDevice(d.Path, s.cfg.ReadCache)
	if err != nil {
		return nil, err
	}
	sb, _, err := dev.readSuper()
	if err != nil {
		dev.close()
		return nil, fmt.Errorf("device %s: %w", d.Path, err)
	}
	if sb.DeviceID != d.ID || sb.ClusterID != clusterID {
		dev.close()
		return nil, fmt.Errorf("device %s holds device %s of cluster %s, expected device %s of cluster %s: the path now names another disk", d.Path, sb.DeviceID, sb.ClusterID, d.ID, clusterID)
	}
	dev.id, dev.super = d.ID, sb
	return dev, nil
}

func (s *Server) closeDevices() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, d := range s.devices {
		d.close()
	}
	for _, d := range s.prepared {
		d.close()
	}
}

// deviceFailed takes a device out after an I/O error: no more I/O on it,
// and a failure report for the MDM leader, which sets the device's state to
// error (the SDS may not write model objects: mdm/rbac.go) and rebuilds its
// copies elsewhere. The SDS itself keeps serving its other devices.
func (s *Server) deviceFailed(d *device, cause error) {
	if !d.failed.CompareAndSwap(false, true) {
		return
	}
	s.log.Error("device failed: taken out of service, its data will be rebuilt elsewhere", "device", d.path, "id", d.id, "err", cause)
	go func() {
		for i := 0; i < 20; i++ {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			_, err := s.cfg.Etcd.Put(ctx, model.DeviceFailedKey(d.id), cause.Error())
			cancel()
			if err == nil {
				return
			}
			if i == 0 {
				s.log.Warn("device failure report not written yet; retrying", "id", d.id, "err", err)
			}
			time.Sleep(500 * time.Millisecond)
		}
		s.log.Error("device failure report could not be written: this SDS does no more I/O on it, but the MDM still places copies there: check this SDS reaches etcd, then remove the device (cairnctl device rm)", "id", d.id)
	}()
}
