package sdsrpc_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cairn-storage/cairn/appliance/internal/model"
	"github.com/cairn-storage/cairn/appliance/internal/pki"
	"github.com/cairn-storage/cairn/appliance/internal/porttest"
	"github.com/cairn-storage/cairn/appliance/internal/sdsrpc"
	"github.com/cairn-storage/cairn/appliance/internal/testcluster"
)

// TestPrepareDeviceAnswers: a real SDS's refusals reach the caller as the
// model's sentinels (which pick the gateway's HTTP status), with the SDS's
// reason as the message, and a refused device is left as it was.
func TestPrepareDeviceAnswers(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{SDSs: 2, DevicesPerSDS: 1, DeviceSize: 64 << 20, PGCount: 8})
	ctx := context.Background()
	sys, err := c.Store.GetSystem(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sds := c.SDSs[0]
	prober := sdsrpc.Prober{Security: c.Security(pki.RoleGateway, "gateway")}
	newFile := func(name string, head []byte, size int64) string {
		t.Helper()
		path := filepath.Join(t.TempDir(), name)
		if err := os.WriteFile(path, head, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(path, size); err != nil {
			t.Fatal(err)
		}
		return path
	}
	ext4 := make([]byte, 4096)
	ext4[1080], ext4[1081] = 0x53, 0xEF // the ext2/3/4 superblock magic

	cases := []struct {
		name, path string
		force      bool
		want       error  // the sentinel, or nil for a plain refusal
		says       string // in the message
	}{
		{"taken by this SDS as another device", sds.Devices[0], false, model.ErrInUse, "already in use by this SDS"},
		{"holds a filesystem", newFile("ext4.img", ext4, 64<<20), false, model.ErrInUse, "an ext2/3/4 filesystem"},
		{"kernel name", "/dev/sdz", false, nil, "kernel name"},
		{"too small", newFile("small.img", nil, 4<<20), false, nil, "a device needs at least"},
		{"missing", "/nonexistent/dev.img", false, nil, "no such file"},
	}
	// The SDS registers as live before it has attached its devices; until
	// then its own device is refused as locked by "another process" (also
	// ErrInUse). Wait for the attach, so the first case sees the SDS's view.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		_, err := prober.PrepareDevice(ctx, sds.Addr, sys.ID, model.NewID(), sds.Devices[0], false)
		if err != nil && strings.Contains(err.Error(), "already in use by this SDS") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("SDS has not attached %s after 10 s (last answer: %v)", sds.Devices[0], err)
		}
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := prober.PrepareDevice(ctx, sds.Addr, sys.ID, model.NewID(), tc.path, tc.force)
			if err == nil {
				t.Fatalf("device %s was taken; want a refusal", tc.path)
			}
			if !strings.Contains(err.Error(), tc.says) {
				t.Errorf("error %q does not say %q", err, tc.says)
			}
			for _, s := range []error{model.ErrInUse, model.ErrUnavailable} {
				if got, want := errors.Is(err, s), s == tc.want; got != want {
					t.Errorf("error %q: errors.Is(%v) = %v, want %v", err, s, got, want)
				}
			}
		})
	}

	// The filesystem is left alone when refused, and overwritten with force.
	fs := cases[1].path
	if b, err := os.ReadFile(fs); err != nil || b[1080] != 0x53 {
		t.Fatalf("a refused device was changed (err %v)", err)
	}
	capacity, err := prober.PrepareDevice(ctx, sds.Addr, sys.ID, model.NewID(), fs, true)
	if err != nil || capacity <= 0 {
		t.Fatalf("with force: capacity %d, err %v; want the device taken", capacity, err)
	}

	// An SDS that does not answer is unavailable.
	gone := porttest.Addr(t)
	_, err = prober.PrepareDevice(ctx, gone, sys.ID, model.NewID(), newFile("any.img", nil, 64<<20), false)
	if !errors.Is(err, model.ErrUnavailable) || errors.Is(err, model.ErrInUse) || !strings.Contains(err.Error(), "is the SDS running?") {
		t.Fatalf("no SDS at %s: error %v; want unavailable, saying what to check", gone, err)
	}
}

// TestDeletedDeviceIsReleased: a device deleted from the model is closed
// by its SDS, so the disk can be added again (here: with force, as it still
// holds the old superblock) without restarting the SDS. Before, the SDS
// kept it open and refused it as "already in use by this SDS" until it
// restarted.
func TestDeletedDeviceIsReleased(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{SDSs: 2, DevicesPerSDS: 1, DeviceSize: 64 << 20, PGCount: 8})
	ctx := context.Background()
	sys, err := c.Store.GetSystem(ctx)
	if err != nil {
		t.Fatal(err)
	}
	pool1, err := c.Store.GetPool(ctx, "pool1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Store.CreatePool(ctx, model.PoolSpec{Name: "spare", PD: pool1.PDID}); err != nil {
		t.Fatal(err)
	}
	sds := c.SDSs[0]
	prober := sdsrpc.Prober{Security: c.Security(pki.RoleGateway, "gateway")}
	prepare := func(ctx context.Context, x model.SDS, clusterID, deviceID, path string, force bool) (int64, error) {
		return prober.PrepareDevice(ctx, x.Address, clusterID, deviceID, path, force)
	}
	path := filepath.Join(t.TempDir(), "extra.img")
	if err := os.Truncate(mustCreate(t, path), 64<<20); err != nil {
		t.Fatal(err)
	}
	d, err := c.Store.AddDevice(ctx, model.DeviceSpec{Name: "extra", SDS: sds.Name, Pool: "spare", Path: path}, prepare)
	if err != nil {
		t.Fatal(err)
	}
	// Attached: another id for the same path is refused as this SDS's.
	waitAnswer(t, func() (bool, string) {
		_, err := prober.PrepareDevice(ctx, sds.Addr, sys.ID, model.NewID(), path, true)
		return err != nil && strings.Contains(err.Error(), "already in use by this SDS as device "+d.ID), fmt.Sprint(err)
	})
	if err := c.Store.DeleteDevice(ctx, "extra"); err != nil {
		t.Fatal(err)
	}
	// Released: the same disk is taken again as a new device.
	waitAnswer(t, func() (bool, string) {
		capacity, err := prober.PrepareDevice(ctx, sds.Addr, sys.ID, model.NewID(), path, true)
		return err == nil && capacity > 0, fmt.Sprint(err)
	})
}

func mustCreate(t *testing.T, path string) string {
	t.Helper()
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// waitAnswer polls ok for up to 10 s; last describes the last answer.
func waitAnswer(t *testing.T, ok func() (bool, string)) {
	t.Helper()
	var last string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		var done bool
		if done, last = ok(); done {
			return
		}
	}
	t.Fatalf("not reached after 10 s; last answer: %s", last)
}
