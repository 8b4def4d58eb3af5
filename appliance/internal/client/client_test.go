package client_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math/rand"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cairn-storage/cairn/appliance/internal/blockdev"
	"github.com/cairn-storage/cairn/appliance/internal/model"
	"github.com/cairn-storage/cairn/appliance/internal/testcluster"
)

const MiB = 1 << 20

func TestReadWriteAgainstModel(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{})
	vol := c.CreateVolume("v1", 64*MiB, true)
	ctx := context.Background()
	shadow := make([]byte, vol.Size())
	rng := rand.New(rand.NewSource(1))
	for i := 0; i < 200; i++ {
		n := int64(rng.Intn(16)+1) * 512
		if i%10 == 0 {
			n = int64(rng.Intn(3*MiB/512)+1) * 512 // crosses chunks
		}
		off := int64(rng.Int63n((vol.Size()-n)/512)) * 512
		buf := make([]byte, n)
		rng.Read(buf)
		if err := vol.WriteAt(ctx, buf, off, 0); err != nil {
			t.Fatalf("write %d+%d: %v", off, n, err)
		}
		copy(shadow[off:], buf)
	}
	got := make([]byte, vol.Size())
	if err := vol.ReadAt(ctx, got, 0); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, shadow) {
		t.Fatal("volume content differs from the writes")
	}
	if err := vol.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := vol.WriteAt(ctx, make([]byte, 512), vol.Size(), 0); !errors.Is(err, blockdev.ErrOutOfRange) {
		t.Fatalf("write past end: %v", err)
	}
	// Every allocated chunk exists twice (primary and secondary).
	used := usedBytes(t, c)
	if used == 0 || used%(2*MiB) != 0 {
		t.Fatalf("used %d bytes: not two copies of whole chunks", used)
	}
}

// usedBytes sums device usage over the SDSs' published statistics, waiting
// for a fresh publication.
func usedBytes(t *testing.T, c *testcluster.Cluster) int64 {
	t.Helper()
	time.Sleep(1200 * time.Millisecond) // > 2 stats intervals
	r, err := c.Etcd.Get(context.Background(), model.Prefix+"stats/sds/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	var used int64
	live := c.Cat.LiveSDSs()
	for _, kv := range r.Kvs {
		var st model.SDSStats
		if err := json.Unmarshal(kv.Value, &st); err != nil {
			t.Fatal(err)
		}
		if _, ok := live[st.SDSID]; !ok {
			continue // a stopped SDS's last report
		}
		for _, d := range st.Devices {
			used += d.Used
		}
	}
	return used
}

func TestUnmapAndWriteZeroesReadZerosAndFreeSpace(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{})
	vol := c.CreateVolume("thin", 32*MiB, true)
	ctx := context.Background()
	data := bytes.Repeat([]byte{0xAB}, 8*MiB)
	if err := vol.WriteAt(ctx, data, 0, 0); err != nil {
		t.Fatal(err)
	}
	before := usedBytes(t, c)
	if before != 2*8*MiB {
		t.Fatalf("used %d bytes after writing 8 MiB, want two copies = %d", before, 2*8*MiB)
	}
	// Unmap chunks 0-3 and part of chunk 4; write zeroes over chunks 6-7.
	if err := vol.Unmap(ctx, 0, 4*MiB+4096); err != nil {
		t.Fatal(err)
	}
	if err := vol.WriteZeroes(ctx, 6*MiB, 2*MiB, true); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 8*MiB)
	if err := vol.ReadAt(ctx, got, 0); err != nil {
		t.Fatal(err)
	}
	want := append([]byte(nil), data...)
	clear(want[:4*MiB+4096])
	clear(want[6*MiB:])
	if !bytes.Equal(got, want) {
		t.Fatal("unmapped or zeroed ranges do not read back as zeros")
	}
	after := usedBytes(t, c)
	if after != 2*2*MiB {
		t.Fatalf("used %d bytes after freeing 6 chunks, want %d", after, 2*2*MiB)
	}
	ext, err := vol.Extents(ctx, 0, 8*MiB)
	if err != nil {
		t.Fatal(err)
	}
	if len(ext) != 3 || ext[0].Mapped || !ext[1].Mapped || ext[1].Offset != 4*MiB || ext[1].Length != 2*MiB || ext[2].Mapped {
		t.Fatalf("extents: %+v", ext)
	}
}

func TestWriteSameAndServerSideCopy(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{})
	a := c.CreateVolume("a", 16*MiB, true)
	b := c.CreateVolume("b", 16*MiB, false)
	ctx := context.Background()
	pat := make([]byte, 512)
	for i := range pat {
		pat[i] = byte(i)
	}
	if err := a.WriteSame(ctx, pat, 512*3, 3*MiB); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 3*MiB)
	if err := a.ReadAt(ctx, got, 512*3); err != nil {
		t.Fatal(err)
	}
	for o := 0; o < len(got); o += 512 {
		if !bytes.Equal(got[o:o+512], pat) {
			t.Fatalf("write same: block at %d differs", o)
		}
	}
	if err := b.CopyFrom(ctx, a, 512*3, 5*MiB+1024, 3*MiB); err != nil {
		t.Fatal(err)
	}
	got2 := make([]byte, 3*MiB)
	if err := b.ReadAt(ctx, got2, 5*MiB+1024); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, got2) {
		t.Fatal("copy between volumes differs from the source")
	}
	// Overlapping copy within one volume.
	if err := a.CopyFrom(ctx, a, 512*3, 512*3+4096, MiB); err != nil {
		t.Fatal(err)
	}
	got3 := make([]byte, MiB)
	if err := a.ReadAt(ctx, got3, 512*3+4096); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got3, got[:MiB]) {
		t.Fatal("overlapping copy within a volume is wrong")
	}
}

// TestCompareAndWriteRace: clients race compare-and-write on one block;
// every round exactly one wins, and the history is consistent: each
// winner's compare value is the previous winner's data.
func TestCompareAndWriteRace(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{})
	vol := c.CreateVolume("ats", 4*MiB, true)
	ctx := context.Background()
	const clients, rounds = 4, 40
	off := int64(MiB - 512) // the last block of chunk 0
	type win struct{ round, client int }
	var mu sync.Mutex
	var wins []win
	block := func(round, client int) []byte {
		b := make([]byte, 512)
		binary.BigEndian.PutUint64(b, uint64(round))
		binary.BigEndian.PutUint64(b[8:], uint64(client))
		return b
	}
	// Round r: every client reads the block (holding round r), all wait
	// until everyone has read, then all race to install (r+1, me) with
	// compare-and-write against what they read; then the next round.
	var wg sync.WaitGroup
	read := newBarrier(clients)
	raced := newBarrier(clients)
	for cl := 0; cl < clients; cl++ {
		wg.Add(1)
		go func(cl int) {
			defer wg.Done()
			for r := 0; r < rounds; r++ {
				cur := make([]byte, 512)
				err := vol.ReadAt(ctx, cur, off)
				if got := binary.BigEndian.Uint64(cur); err == nil && got != uint64(r) {
					t.Errorf("round %d: block says round %d", r, got)
				}
				read.wait()
				if err == nil {
					err = vol.CompareAndWrite(ctx, cur, block(r+1, cl), off, 0)
				}
				var mc *blockdev.MiscompareError
				switch {
				case err == nil:
					mu.Lock()
					wins = append(wins, win{r, cl})
					mu.Unlock()
				case errors.As(err, &mc):
					if mc.Offset < 0 || mc.Offset >= 16 {
						t.Errorf("miscompare offset %d outside the header", mc.Offset)
					}
				default:
					t.Errorf("client %d round %d: %v", cl, r, err)
				}
				raced.wait()
			}
		}(cl)
	}
	wg.Wait()
	perRound := map[int]int{}
	last := -1
	for _, w := range wins {
		perRound[w.round]++
		if w.round == rounds-1 {
			last = w.client
		}
	}
	for r := 0; r < rounds; r++ {
		if perRound[r] != 1 {
			t.Fatalf("round %d had %d winners", r, perRound[r])
		}
	}
	final := make([]byte, 512)
	if err := vol.ReadAt(ctx, final, off); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(final, block(rounds, last)) {
		t.Fatal("final block is not the last winner's write")
	}
}

func TestDataSurvivesSDSRestart(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{})
	vol := c.CreateVolume("persist", 16*MiB, true)
	ctx := context.Background()
	data := make([]byte, 16*MiB)
	rand.New(rand.NewSource(2)).Read(data)
	if err := vol.WriteAt(ctx, data, 0, 0); err != nil {
		t.Fatal(err)
	}
	if err := vol.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	for i := range c.SDSs {
		c.StopSDS(i)
	}
	for i := range c.SDSs {
		c.StartSDS(i)
	}
	got := make([]byte, len(data))
	if err := vol.ReadAt(ctx, got, 0); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data) {
		t.Fatal("data differs after restarting every SDS")
	}
}

// barrier is a reusable rendezvous of n goroutines.
type barrier struct {
	mu    sync.Mutex
	n, in int
	gen   chan struct{}
}

func newBarrier(n int) *barrier { return &barrier{n: n, gen: make(chan struct{})} }

func (b *barrier) wait() {
	b.mu.Lock()
	b.in++
	g := b.gen
	if b.in == b.n {
		b.in = 0
		b.gen = make(chan struct{})
		close(g)
		b.mu.Unlock()
		return
	}
	b.mu.Unlock()
	<-g
}
