package client_test

import (
	"bytes"
	"context"
	"errors"
	"math/rand"
	"testing"

	"github.com/cairn-storage/cairn/appliance/internal/blockdev"
	"github.com/cairn-storage/cairn/appliance/internal/model"
	"github.com/cairn-storage/cairn/appliance/internal/placement"
	"github.com/cairn-storage/cairn/appliance/internal/testcluster"
)

// TestColocatedSDS: a client in the same process as an SDS that serves it
// without the network (sds.Config.Local, what cairn colocate sets) reads
// and writes the same data as over the network, through the sync and the
// async paths and compare-and-write; it never opens a connection to that
// SDS although it is primary of some chunks; and when that SDS stops, the
// client carries on with the others.
func TestColocatedSDS(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{LocalSDSs: []int{0}})
	local := c.SDSs[0]
	vol := c.CreateVolume("colocated", 16*MiB, true)
	ctx := context.Background()

	// The volume has chunks whose primary is the local SDS, and others.
	primaries := map[bool]int{}
	for ch := uint64(0); ch < 16; ch++ {
		r, ok := c.Cat.ChunkRoute(vol.ID(), ch, func(v, ch uint64, n int) int { return placement.PG(v, ch, n) })
		if !ok || len(r.Copies) == 0 {
			t.Fatalf("chunk %d has no route", ch)
		}
		primaries[r.Copies[0].SDSID == local.ID]++
	}
	if primaries[true] == 0 || primaries[false] == 0 {
		t.Fatalf("chunks with the local SDS as primary: %d, others: %d; the test needs both", primaries[true], primaries[false])
	}

	data := make([]byte, vol.Size())
	rng := rand.New(rand.NewSource(5))
	rng.Read(data)
	if err := vol.WriteAt(ctx, data, 0, 0); err != nil {
		t.Fatal(err)
	}
	// Small writes through the async path, some inline (hold false).
	for i := 0; i < 64; i++ {
		n := int64(rng.Intn(16)+1) * 512
		off := int64(rng.Int63n((vol.Size()-n)/512)) * 512
		p := make([]byte, n)
		rng.Read(p)
		ch := make(chan error, 1)
		vol.WriteAtAsync(ctx, p, off, 0, i%2 == 0, func(err error) { ch <- err })
		vol.FlushHeld()
		if err := <-ch; err != nil {
			t.Fatalf("async write %d: %v", i, err)
		}
		copy(data[off:], p)
	}
	verify := func(what string) {
		t.Helper()
		got := make([]byte, len(data))
		if err := vol.ReadAt(ctx, got, 0); err != nil {
			t.Fatalf("%s: read: %v", what, err)
		}
		if !bytes.Equal(got, data) {
			t.Fatalf("%s: data differs", what)
		}
		for ch := int64(0); ch < 16; ch++ {
			p := make([]byte, 4096)
			if err := readAsync(vol, p, ch*model.ChunkSize+8192); err != nil {
				t.Fatalf("%s: async read of chunk %d: %v", what, ch, err)
			}
			if !bytes.Equal(p, data[ch*model.ChunkSize+8192:][:4096]) {
				t.Fatalf("%s: async read of chunk %d differs", what, ch)
			}
		}
	}
	verify("colocated")

	// Compare-and-write on every chunk: a miscompare is reported as such
	// (a status from the local handler), a match writes.
	for ch := int64(0); ch < 16; ch++ {
		off := ch * model.ChunkSize
		wrong := make([]byte, 512)
		err := vol.CompareAndWrite(ctx, wrong, wrong, off, 0)
		var mc *blockdev.MiscompareError
		if !errors.As(err, &mc) {
			t.Fatalf("chunk %d: compare-and-write against wrong data: %v, want a miscompare", ch, err)
		}
		next := bytes.Repeat([]byte{byte(ch)}, 512)
		if err := vol.CompareAndWrite(ctx, data[off:off+512], next, off, 0); err != nil {
			t.Fatalf("chunk %d: compare-and-write: %v", ch, err)
		}
		copy(data[off:], next)
	}
	verify("after compare-and-write")

	if n := c.Client.Peer(local.Addr).Dialled(); n != 0 {
		t.Fatalf("the client opened %d connections to the SDS in its own process, want none", n)
	}
	for _, s := range c.SDSs[1:] {
		if c.Client.Peer(s.Addr).Dialled() == 0 {
			t.Fatalf("no connection to %s: the remote SDSs were not used over the network", s.Name)
		}
	}

	// The local SDS stops: its copies are served by the others, and writes
	// go on.
	c.StopSDS(0)
	patch := bytes.Repeat([]byte{0xa5}, 3*MiB)
	if err := vol.WriteAt(ctx, patch, 5*MiB, 0); err != nil {
		t.Fatalf("write with the local SDS stopped: %v", err)
	}
	copy(data[5*MiB:], patch)
	verify("local SDS stopped")
}
