package sds

import (
	"context"
	"encoding/json"
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

// PrepareDevice asks the SDS at addr to take a device (used by the gateway).
func PrepareDevice(ctx context.Context, peer *wire.Client, req PrepareDeviceRequest) (int64, error) {
	b, _ := json.Marshal(req)
	resp, err := peer.Do(ctx, &wire.Request{Op: wire.OpPrepareDevice, Payload: b}, nil)
	if err != nil {
		var se *wire.StatusError
		if errors.As(err, &se) {
			return 0, errors.New(se.Message)
		}
		return 0, fmt.Errorf("SDS at %s: %w", peer.Addr(), err)
	}
	var r PrepareDeviceResponse
	if err := json.Unmarshal(resp.Payload, &r); err != nil {
		return 0, fmt.Errorf("SDS at %s: bad answer: %w", peer.Addr(), err)
	}
	return r.Capacity, nil
}
