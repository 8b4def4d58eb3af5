package sdsrpc_test

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cairn-storage/cairn/appliance/internal/model"
	"github.com/cairn-storage/cairn/appliance/internal/pki"
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
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gone := l.Addr().String()
	l.Close()
	_, err = prober.PrepareDevice(ctx, gone, sys.ID, model.NewID(), newFile("any.img", nil, 64<<20), false)
	if !errors.Is(err, model.ErrUnavailable) || errors.Is(err, model.ErrInUse) || !strings.Contains(err.Error(), "is the SDS running?") {
		t.Fatalf("no SDS at %s: error %v; want unavailable, saying what to check", gone, err)
	}
}
