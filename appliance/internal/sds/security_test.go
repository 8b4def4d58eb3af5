package sds_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/cairn-storage/cairn/appliance/internal/testcluster"
)

// TestMirroredIOInEveryMode: writes mirrored SDS to SDS and read back in
// each data-path security mode, both copies checked on the devices,
// nothing refused.
func TestMirroredIOInEveryMode(t *testing.T) {
	for _, mode := range []string{"authenticated", "secure", "none"} {
		t.Run(mode, func(t *testing.T) {
			log := &testcluster.LogBuffer{}
			c := testcluster.Start(t, testcluster.Options{SDSs: 2, DevicesPerSDS: 1, DeviceSize: 64 * MiB, PGCount: 8, DataSecurity: mode, LogTo: log})
			vol := c.CreateVolume("v", 4*MiB, true)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			data := make([]byte, 3*MiB)
			if _, err := rand.Read(data); err != nil {
				t.Fatal(err)
			}
			if err := vol.WriteAt(ctx, data, 512*1024, 0); err != nil {
				t.Fatal(err)
			}
			got := make([]byte, len(data))
			if err := vol.ReadAt(ctx, got, 512*1024); err != nil || !bytes.Equal(got, data) {
				t.Fatalf("read back differs (err %v)", err)
			}
			if err := vol.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			// Both copies hold the data: the primaries mirrored to the
			// other SDS through its handshake.
			for _, s := range c.SDSs {
				dev, err := os.ReadFile(s.Devices[0])
				if err != nil {
					t.Fatal(err)
				}
				for off := 0; off < len(data); off += MiB / 2 {
					if !bytes.Contains(dev, data[off:off+64]) {
						t.Fatalf("%s's device lacks the data at volume offset %d: not mirrored", s.Name, 512*1024+off)
					}
				}
			}
			if strings.Contains(log.String(), "refused") {
				t.Fatalf("a connection or request was refused:\n%s", log.String())
			}
		})
	}
}
