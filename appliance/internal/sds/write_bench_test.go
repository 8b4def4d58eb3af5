package sds_test

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-storage/cairn/appliance/internal/testcluster"
)

// BenchmarkMirroredWrite4K times one 4 KiB write at queue depth 1 through
// the data client, the primary and its mirror (all in this process), for
// the cost of the SDS's write path: go test -run - -bench MirroredWrite
// -benchmem ./internal/sds/. Besides ns/op it reports cpu-ns/op, the
// process's CPU time (user + system, every goroutine: client, both SDSs,
// etcd) per write: at QD1 wall time is mostly wake-up latency, which a
// busy machine inflates, while CPU per write is what limits IOPS under load
// (what bench-smoke's "CPU per I/O" column measures end to end). ctxsw/op
// counts the process's context switches per write: a count, not a time, so
// a busy machine disturbs it less (each extra wake-up on the path shows).
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
	cpu0, sw0 := processUsage(b)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := vol.WriteAt(ctx, buf, int64(i*7919%span)*4096, 0); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	cpu1, sw1 := processUsage(b)
	b.ReportMetric(float64(cpu1-cpu0)/float64(b.N), "cpu-ns/op")
	b.ReportMetric(float64(sw1-sw0)/float64(b.N), "ctxsw/op")
}

// processUsage is the CPU time this process has used so far and the number
// of context switches (voluntary and not) of its threads.
func processUsage(b *testing.B) (time.Duration, int64) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), ru.Nvcsw + ru.Nivcsw
}
