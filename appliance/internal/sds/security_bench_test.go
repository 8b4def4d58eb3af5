package sds_test

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-storage/cairn/appliance/internal/client"
	"github.com/cairn-storage/cairn/appliance/internal/testcluster"
)

// The data path's cost per security mode: 4 KiB writes (mirrored) and
// reads at queue depth 1 through the data client and the SDSs, all in this
// process, so the process's CPU time (user+system, getrusage) per I/O is
// the whole path's, reported as cpu-ns/op beside ns/op. Connections are
// set up before the timer: the handshake is not per I/O. Compare modes
// within one run, repeated alternately (the machine is shared):
//
//	for i in 1 2 3 4 5; do go test -run - -bench 'DataSecurity' -benchtime 3000x ./internal/sds/; done
func BenchmarkDataSecurityWrite4K(b *testing.B) {
	benchModes(b, func(ctx context.Context, vol *client.Volume, buf []byte, i int) error {
		return vol.WriteAt(ctx, buf, int64(i*7919%benchSpan)*4096, 0)
	})
}

func BenchmarkDataSecurityRead4K(b *testing.B) {
	benchModes(b, func(ctx context.Context, vol *client.Volume, buf []byte, i int) error {
		return vol.ReadAt(ctx, buf, int64(i*7919%benchSpan)*4096)
	})
}

const benchSpan = 64 * MiB / 4096 // 4 KiB blocks in the volume

func benchModes(b *testing.B, op func(ctx context.Context, vol *client.Volume, buf []byte, i int) error) {
	for _, mode := range []string{"none", "authenticated", "secure"} {
		b.Run(mode, func(b *testing.B) {
			c := testcluster.Start(b, testcluster.Options{SDSs: 2, DevicesPerSDS: 1, DeviceSize: 256 * MiB, PGCount: 8, DataSecurity: mode})
			vol := c.CreateVolume("bench", 64*MiB, true)
			ctx := context.Background()
			buf := make([]byte, 4096)
			for i := 0; i < benchSpan; i += 256 { // allocate every chunk first: overwrites and reads of data
				if err := vol.WriteAt(ctx, buf, int64(i)*4096, 0); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			cpu0 := cpuTime()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := op(ctx, vol, buf, i); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}

// cpuTime is the process's user+system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
