package sds_test

import (
	"bytes"
	"context"
	"math/rand"
	"testing"
	"time"

	"github.com/cairn-storage/cairn/appliance/internal/model"
	"github.com/cairn-storage/cairn/appliance/internal/placement"
	"github.com/cairn-storage/cairn/appliance/internal/testcluster"
)

const MiB = 1 << 20

func doneBytes(t *testing.T, c *testcluster.Cluster, id string) int64 {
	t.Helper()
	var st model.SDSStats
	if _, err := c.Store.Get(context.Background(), model.StatsKey(id), &st); err != nil {
		t.Fatalf("stats of SDS %s: %v", id, err)
	}
	return st.Rebuild.DoneBytes
}

// TestRebuildBandwidthCap: a rebuild under a per-SDS cap, set through the
// model while the SDSs run, sends no faster than the cap (with a margin),
// completes, and loses nothing.
func TestRebuildBandwidthCap(t *testing.T) {
	const capMBs = 10
	c := testcluster.Start(t, testcluster.Options{SDSs: 4, DevicesPerSDS: 1, DeviceSize: 512 * MiB, PGCount: 32})
	vol := c.CreateVolume("capped", 1<<30, true)
	ctx := context.Background()
	data := make([]byte, 96*MiB)
	rand.New(rand.NewSource(7)).Read(data)
	if err := vol.WriteAt(ctx, data, 0, 0); err != nil {
		t.Fatal(err)
	}
	for _, s := range c.SDSs {
		up := capMBs
		if _, err := c.Store.UpdateSDS(ctx, s.Name, model.SDSUpdate{RebuildMBps: &up}); err != nil {
			t.Fatal(err)
		}
	}
	// The SDSs' catalogs follow the same etcd watch as this one.
	deadline := time.Now().Add(5 * time.Second)
	for _, s := range c.SDSs {
		for x, _ := c.Cat.SDS(s.ID); x.RebuildMBps != capMBs; x, _ = c.Cat.SDS(s.ID) {
			if time.Now().After(deadline) {
				t.Fatalf("SDS %s: cap not seen after 5 s", s.Name)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	time.Sleep(200 * time.Millisecond)

	// Stop the SDS holding the most chunk copies, and expect the survivors
	// to rebuild exactly those (placement is random: with 32 groups one SDS
	// may hold far fewer than a quarter of the copies).
	held := map[string]int64{}
	m, ok := c.Cat.Map(c.PoolID)
	if !ok {
		t.Fatal("no placement map")
	}
	for chunk := uint64(0); chunk < uint64(len(data)/MiB); chunk++ {
		for _, cp := range m.PGs[placement.PG(vol.ID(), chunk, m.PGCount)] {
			held[cp.SDSID] += MiB
		}
	}
	stop := 0
	for i, s := range c.SDSs {
		if held[s.ID] > held[c.SDSs[stop].ID] {
			stop = i
		}
	}
	want := held[c.SDSs[stop].ID]
	var survivors []int
	for i := range c.SDSs {
		if i != stop {
			survivors = append(survivors, i)
		}
	}
	done0 := map[int]int64{}
	for _, i := range survivors {
		done0[i] = doneBytes(t, c, c.SDSs[i].ID)
	}
	start := time.Now()
	c.StopSDS(stop) // a graceful stop revokes the lease: the rebuild starts at once
	c.WaitHealthy(c.SDSs[stop].ID, 60*time.Second)
	took := time.Since(start)
	time.Sleep(1200 * time.Millisecond) // statistics are published every 500 ms
	var total int64
	for _, i := range survivors {
		sent := doneBytes(t, c, c.SDSs[i].ID) - done0[i]
		total += sent
		rate := float64(sent) / 1e6 / took.Seconds()
		t.Logf("%s sent %d MiB in %s: %.1f MB/s (cap %d MB/s)", c.SDSs[i].Name, sent/MiB, took.Round(time.Millisecond), rate, capMBs)
		if rate > 1.5*capMBs {
			t.Errorf("%s sent at %.1f MB/s, more than 1.5 × its %d MB/s cap", c.SDSs[i].Name, rate, capMBs)
		}
	}
	// Every copy the stopped SDS held was sent again (at least half the
	// 96 MiB: it holds the most of the 2 × 96 MiB on four SDSs).
	if total < want {
		t.Fatalf("%d MiB rebuilt, but %s held %d MiB of copies", total/MiB, c.SDSs[stop].Name, want/MiB)
	}
	got := make([]byte, len(data))
	if err := vol.ReadAt(ctx, got, 0); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data) {
		t.Fatal("data differs after the capped rebuild")
	}
}
