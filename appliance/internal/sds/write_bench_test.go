package sds_test

import (
	"context"
	"testing"

	"github.com/cairn-storage/cairn/appliance/internal/testcluster"
)

// BenchmarkMirroredWrite4K times one 4 KiB write at queue depth 1 through
// the data client, the primary and its mirror (all in this process), for
// the cost of the SDS's write path: go test -run - -bench MirroredWrite
// -benchmem ./internal/sds/.
func BenchmarkMirroredWrite4K(b *testing.B) {
	c := testcluster.Start(b, testcluster.Options{SDSs: 2, DevicesPerSDS: 1, DeviceSize: 256 * MiB, PGCount: 8})
	vol := c.CreateVolume("bench", 64*MiB, true)
	ctx := context.Background()
	buf := make([]byte, 4096)
	const span = 64 * MiB / 4096
	for i := 0; i < span; i += 256 { // allocate the chunks first: measure overwrites
		if err := vol.WriteAt(ctx, buf, int64(i)*4096, 0); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := vol.WriteAt(ctx, buf, int64(i*7919%span)*4096, 0); err != nil {
			b.Fatal(err)
		}
	}
}
