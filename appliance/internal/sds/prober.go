package sds

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/cairn-storage/cairn/appliance/internal/model"
	"github.com/cairn-storage/cairn/appliance/internal/wire"
)

// Prober asks SDSs to take devices; the gateway uses it when an
// administrator adds a device, so that a bad device is refused at once with
// the SDS's reason.
type Prober struct{}

// PrepareDevice implements gateway.DeviceProber.
func (Prober) PrepareDevice(ctx context.Context, sdsAddress, clusterID, deviceID, path string, force bool) (int64, error) {
	peer := wire.NewClient(sdsAddress, 1)
	defer peer.Close()
	// Preparing zeroes the data area: hole punching is quick, but a block
	// device without discard is written in full.
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	capacity, err := PrepareDevice(ctx, peer, PrepareDeviceRequest{ClusterID: clusterID, DeviceID: deviceID, Path: path, Force: force})
	if err == nil {
		return capacity, nil
	}
	msg := err.Error()
	switch {
	case strings.HasPrefix(msg, "SDS at "):
		return 0, fmt.Errorf("%w: %s; is the SDS running? (cairn sds --name ...)", model.ErrUnavailable, msg)
	case strings.Contains(msg, "in use") || strings.Contains(msg, "holds") || strings.Contains(msg, "belongs"):
		return 0, fmt.Errorf("%w: %s", model.ErrInUse, msg)
	}
	return 0, errors.New(msg)
}
