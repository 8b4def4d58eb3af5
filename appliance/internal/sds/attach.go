package sds

// attach.go: the devices this SDS serves: opening those the model assigns it,
// closing them, and taking one out of service when it fails.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cairn-storage/cairn/appliance/internal/model"
)

// attachDevices opens every device the model assigns to this SDS.
func (s *Server) attachDevices() {
	sys := s.cat.System()
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
// and its state in the model becomes error, so the leader rebuilds its
// copies elsewhere. The SDS itself keeps serving its other devices.
func (s *Server) deviceFailed(d *device, cause error) {
	if !d.failed.CompareAndSwap(false, true) {
		return
	}
	s.log.Error("device failed: taken out of service, its data will be rebuilt elsewhere", "device", d.path, "id", d.id, "err", cause)
	go func() {
		st := model.NewStore(s.cfg.Etcd)
		for i := 0; i < 20; i++ {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			var dev model.Device
			rev, err := st.Get(ctx, model.Key(model.KindDevice, d.id), &dev)
			if err == nil {
				dev.State, dev.Error = model.DeviceError, cause.Error()
				err = st.Update(ctx, model.Key(model.KindDevice, d.id), rev, dev)
			}
			cancel()
			if err == nil || errors.Is(err, model.ErrNotFound) {
				return
			}
			time.Sleep(500 * time.Millisecond)
		}
	}()
}
