package client_test

import (
	"bytes"
	"context"
	"math/rand"
	"testing"
	"time"

	"github.com/cairn-storage/cairn/appliance/internal/model"
	"github.com/cairn-storage/cairn/appliance/internal/testcluster"
)

func TestRebuildAfterSDSLoss(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{SDSs: 4, DevicesPerSDS: 1})
	vol := c.CreateVolume("heal", 48*MiB, true)
	ctx := context.Background()
	data := make([]byte, 48*MiB)
	rand.New(rand.NewSource(3)).Read(data)
	if err := vol.WriteAt(ctx, data, 0, 0); err != nil {
		t.Fatal(err)
	}
	for round, victim := range []int{1, 2} {
		c.StopSDS(victim)
		// Writes keep working during the rebuild and reach the new copies.
		patch := bytes.Repeat([]byte{byte(round + 1)}, 3*MiB)
		off := int64(round*7) * MiB
		if err := vol.WriteAt(ctx, patch, off, 0); err != nil {
			t.Fatalf("write while SDS %d is down: %v", victim, err)
		}
		copy(data[off:], patch)
		took := c.WaitHealthy(c.SDSs[victim].ID, 60*time.Second)
		t.Logf("lost SDS %s: pool healthy again after %s", c.SDSs[victim].Name, took)
		got := make([]byte, len(data))
		if err := vol.ReadAt(ctx, got, 0); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, data) {
			t.Fatalf("round %d: data differs after rebuild", round)
		}
	}
	// Two SDSs are gone; the two left hold every chunk twice (each holds
	// one copy), so losing either of them next would still lose nothing
	// that a rebuild could not... and the data was rebuilt from copies
	// that themselves were rebuilt in round 1: both rounds verified above.
	if used := usedBytes(t, c); used != 2*48*MiB {
		t.Fatalf("used %d bytes after two rebuilds, want exactly two copies (%d)", used, 2*48*MiB)
	}
}

func TestGracefulRemovalDrainsFirst(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{SDSs: 4, DevicesPerSDS: 1})
	vol := c.CreateVolume("drain", 32*MiB, true)
	ctx := context.Background()
	data := make([]byte, 32*MiB)
	rand.New(rand.NewSource(4)).Read(data)
	if err := vol.WriteAt(ctx, data, 0, 0); err != nil {
		t.Fatal(err)
	}
	victim := c.SDSs[3]
	var s model.SDS
	rev, err := c.Store.Get(ctx, model.Key(model.KindSDS, victim.ID), &s)
	if err != nil {
		t.Fatal(err)
	}
	s.State = model.SDSRemoving
	if err := c.Store.Update(ctx, model.Key(model.KindSDS, victim.ID), rev, s); err != nil {
		t.Fatal(err)
	}
	took := c.WaitHealthy(victim.ID, 60*time.Second)
	t.Logf("drained in %s", took)
	// The SDS stays up while it drains: its data is moved, not rebuilt.
	// Once drained the leader deletes it.
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := c.Store.Get(ctx, model.Key(model.KindSDS, victim.ID), &s); err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("drained SDS was not removed")
		}
		time.Sleep(100 * time.Millisecond)
	}
	c.StopSDS(3)
	got := make([]byte, len(data))
	if err := vol.ReadAt(ctx, got, 0); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data) {
		t.Fatal("data differs after draining an SDS")
	}
}
