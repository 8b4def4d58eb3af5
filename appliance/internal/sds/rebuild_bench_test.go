package sds_test

import (
	"context"
	"math/rand"
	"testing"
	"time"

	"github.com/cairn-storage/cairn/appliance/internal/testcluster"
)

// BenchmarkRebuild times one rebuild after an SDS stops (4 SDSs, 256 MiB
// written, so the stopped SDS held about 128 MiB of copies), for profiling
// fills: go test -run - -bench Rebuild -benchtime 1x -cpuprofile cpu.out.
func BenchmarkRebuild(b *testing.B) {
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		c := testcluster.Start(b, testcluster.Options{SDSs: 4, DevicesPerSDS: 1, DeviceSize: 1 << 30, PGCount: 64})
		vol := c.CreateVolume("bench", 1<<30, true)
		data := make([]byte, 256*MiB)
		rand.New(rand.NewSource(int64(i))).Read(data)
		if err := vol.WriteAt(context.Background(), data, 0, 0); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		start := time.Now()
		c.StopSDS(1)
		for !c.Healthy(c.SDSs[1].ID) {
			if time.Since(start) > 60*time.Second {
				b.Fatal("not healthy after 60 s")
			}
			time.Sleep(5 * time.Millisecond)
		}
		b.ReportMetric(128/time.Since(start).Seconds(), "MiB/s~")
		b.StopTimer()
		c.Stop()
	}
}
