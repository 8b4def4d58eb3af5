// Package sdsrpc is the caller's side of the SDS's control requests: the
// gateway (and the test cluster) ask an SDS to take a device with it. The
// SDS serves them in package sds; this package holds their payloads and
// turns the wire answers into the model's errors, so that a caller needs
// neither the server package nor its messages' wording.
package sdsrpc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/cairn-storage/cairn/appliance/internal/model"
	"github.com/cairn-storage/cairn/appliance/internal/wire"
)

// PrepareDeviceRequest is the JSON payload of wire.OpPrepareDevice.
type PrepareDeviceRequest struct {
	ClusterID string `json:"cluster_id"`
	DeviceID  string `json:"device_id"`
	Path      string `json:"path"`
	Force     bool   `json:"force"`
}

// PrepareDeviceResponse is its answer.
type PrepareDeviceResponse struct {
	Capacity int64 `json:"capacity"`
}

// The SDS's answers to OpPrepareDevice, by status:
//
//	StatusOK        the payload is a PrepareDeviceResponse
//	StatusRefused   the device is taken: in use (by a program or by this
//	                SDS as another device) or holding data that only force
//	                may destroy (another cluster's, a filesystem, a
//	                partition table)
//	any other       the device cannot be taken as asked (bad ids or path,
//	                too small, unreadable): the message says why
//
// PrepareDevice maps them to model.ErrInUse and to a plain error with the
// SDS's message; an SDS that cannot be reached (or answers garbage) is
// model.ErrUnavailable.

// PrepareDevice asks the SDS at the other end of peer to take a device and
// returns its usable capacity.
func PrepareDevice(ctx context.Context, peer *wire.Client, req PrepareDeviceRequest) (int64, error) {
	b, _ := json.Marshal(req)
	resp, err := peer.Do(ctx, &wire.Request{Op: wire.OpPrepareDevice, Payload: b}, nil)
	var se *wire.StatusError
	switch {
	case errors.As(err, &se) && se.Status == wire.StatusRefused:
		return 0, fmt.Errorf("%w: %s", model.ErrInUse, se.Message)
	case errors.As(err, &se):
		return 0, errors.New(se.Message)
	case err != nil:
		return 0, unreachable(peer, err)
	}
	var r PrepareDeviceResponse
	if err := json.Unmarshal(resp.Payload, &r); err != nil {
		return 0, unreachable(peer, fmt.Errorf("bad answer: %w", err))
	}
	return r.Capacity, nil
}

func unreachable(peer *wire.Client, err error) error {
	return fmt.Errorf("%w: SDS at %s: %v; is the SDS running? (cairn sds --name ...)", model.ErrUnavailable, peer.Addr(), err)
}

// Prober asks SDSs to take devices; the gateway uses it when an
// administrator adds a device, so that a bad device is refused at once with
// the SDS's reason.
type Prober struct {
	// Security is the data-path handshake (the gateway's certificate;
	// nil: mode none). SDSs accept OpPrepareDevice only from the gateway
	// and MDM roles.
	Security *wire.Security
}

// PrepareDevice implements gateway.DeviceProber.
func (p Prober) PrepareDevice(ctx context.Context, sdsAddress, clusterID, deviceID, path string, force bool) (int64, error) {
	peer := wire.NewClient(sdsAddress, 1)
	peer.Security = p.Security
	defer peer.Close()
	// Preparing zeroes the data area: hole punching is quick, but a block
	// device without discard is written in full.
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	return PrepareDevice(ctx, peer, PrepareDeviceRequest{ClusterID: clusterID, DeviceID: deviceID, Path: path, Force: force})
}
