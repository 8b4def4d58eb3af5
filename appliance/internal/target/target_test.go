package target

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cairn-storage/cairn/appliance/internal/blockdev"
	"github.com/cairn-storage/cairn/appliance/internal/lio"
	"github.com/cairn-storage/cairn/appliance/internal/tcmu"
)

// fakeLIO keeps LIO's state in memory (lio.State.Simulate) and checks the
// ordering rule Run must follow: a backstore is deleted only after its ring
// server stopped.
type fakeLIO struct {
	mu      sync.Mutex
	st      lio.State
	serving map[string]bool
	t       *testing.T
	applies int
}

func (f *fakeLIO) Read() (lio.State, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	// a deep enough copy: Diff only reads
	st := lio.State{Backstores: maps.Clone(f.st.Backstores)}
	if f.st.Target != nil {
		t := *f.st.Target
		t.LUNs = maps.Clone(t.LUNs)
		t.ACLs = map[string]lio.ACL{}
		for k, a := range f.st.Target.ACLs {
			a.LUNs = maps.Clone(a.LUNs)
			t.ACLs[k] = a
		}
		t.Portals = slices.Clone(t.Portals)
		st.Target = &t
	}
	return st, nil
}

func (f *fakeLIO) Apply(_ context.Context, acts []lio.Action) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.applies++
	for _, a := range acts {
		if a.Op == lio.OpDeleteBackstore && f.serving[a.Name] {
			f.t.Errorf("backstore %s deleted while its ring is served", a.Name)
		}
	}
	return f.st.Simulate(acts)
}

func (f *fakeLIO) serve(ctx context.Context, name string, h tcmu.Handler) error {
	f.mu.Lock()
	if _, ok := f.st.Backstores[name]; !ok {
		f.t.Errorf("serving %s before its backstore exists", name)
	}
	f.serving[name] = true
	f.mu.Unlock()
	<-ctx.Done()
	f.mu.Lock()
	f.serving[name] = false
	f.mu.Unlock()
	return nil
}

func (f *fakeLIO) snapshot() (backstores, serving []string, acls map[string][]int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	backstores = slices.Sorted(maps.Keys(f.st.Backstores))
	for n, on := range f.serving {
		if on {
			serving = append(serving, n)
		}
	}
	slices.Sort(serving)
	acls = map[string][]int{}
	if f.st.Target != nil {
		for ini, a := range f.st.Target.ACLs {
			acls[ini] = slices.Sorted(maps.Keys(a.LUNs))
		}
	}
	return
}

func TestRunFollowsMappings(t *testing.T) {
	f := &fakeLIO{serving: map[string]bool{}, t: t}
	vols := map[string]*blockdev.MemVolume{
		"00000000000000a1": blockdev.NewMemVolume("a", 0xa1, 1<<20),
		"00000000000000b2": blockdev.NewMemVolume("b", 0xb2, 2<<20),
	}
	var mu sync.Mutex
	mappings := []Mapping{{VolumeID: "00000000000000a1", LUN: -1, Hosts: []Host{{IQN: "iqn.h1"}, {IQN: "iqn.h2"}}}}
	changed := make(chan struct{}, 1)
	setMappings := func(m []Mapping) {
		mu.Lock()
		mappings = m
		mu.Unlock()
		changed <- struct{}{}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Config{
			IQN: "iqn.2026-01.io.cairn:svm-1",
			Mappings: func(context.Context) ([]Mapping, error) {
				mu.Lock()
				defer mu.Unlock()
				return slices.Clone(mappings), nil
			},
			Changed:  changed,
			Interval: time.Hour, // only Changed drives syncs here
			Open: func(_ context.Context, id string) (blockdev.Volume, error) {
				if v, ok := vols[id]; ok {
					return v, nil
				}
				return nil, fmt.Errorf("no volume %s", id)
			},
			NewHandler: func(blockdev.Volume) tcmu.Handler { return nil },
			LIO:        f,
			Serve:      f.serve,
		})
	}()
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for !ok() {
			if time.Now().After(deadline) {
				b, s, a := f.snapshot()
				t.Fatalf("timed out waiting for %s: backstores %v serving %v acls %v", what, b, s, a)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitFor("a1 exported to h1 and h2", func() bool {
		b, s, a := f.snapshot()
		return slices.Equal(b, []string{"cairn-00000000000000a1"}) && slices.Equal(s, b) &&
			slices.Equal(a["iqn.h1"], []int{0}) && slices.Equal(a["iqn.h2"], []int{0})
	})
	// h2 loses a1, b2 appears for h2 on an automatic LUN (1), a missing
	// volume is skipped without blocking the others.
	setMappings([]Mapping{
		{VolumeID: "00000000000000a1", LUN: -1, Hosts: []Host{{IQN: "iqn.h1"}}},
		{VolumeID: "00000000000000b2", LUN: -1, Hosts: []Host{{IQN: "iqn.h2"}}},
		{VolumeID: "missing", LUN: 7, Hosts: []Host{{IQN: "iqn.h2"}}},
	})
	waitFor("b2 on LUN 1 for h2 only", func() bool {
		b, s, a := f.snapshot()
		return len(b) == 2 && slices.Equal(s, b) && slices.Equal(a["iqn.h1"], []int{0}) && slices.Equal(a["iqn.h2"], []int{1})
	})
	setMappings([]Mapping{{VolumeID: "00000000000000b2", LUN: -1, Hosts: []Host{{IQN: "iqn.h2"}}}})
	waitFor("a1 gone, b2 kept its LUN", func() bool {
		b, s, a := f.snapshot()
		_, h1 := a["iqn.h1"]
		return slices.Equal(b, []string{"cairn-00000000000000b2"}) && slices.Equal(s, b) && !h1 && slices.Equal(a["iqn.h2"], []int{1})
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, s, _ := f.snapshot(); len(s) != 0 {
		t.Fatalf("still serving after Run returned: %v", s)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.applies > 6 {
		t.Errorf("%d rtslib runs for 3 changes: plans are not batched", f.applies)
	}
}

// blockingLIO holds its first Apply until released, to stop the target
// in the middle of it.
type blockingLIO struct {
	*fakeLIO
	in      chan context.Context
	release chan struct{}
	once    sync.Once
}

func (b *blockingLIO) Apply(ctx context.Context, acts []lio.Action) error {
	b.once.Do(func() {
		b.in <- ctx
		<-b.release
	})
	if err := ctx.Err(); err != nil {
		b.t.Errorf("rtslib's context was cancelled in the middle of a change: %v", err)
	}
	return b.fakeLIO.Apply(ctx, acts)
}

// A target stopped while rtslib applies a change lets the change finish
// (configfs and saveconfig.json agree) before Run returns: killed half way,
// a restore at the next boot brought back an ACL it had removed
// (tests/lio/access.sh).
func TestStopFinishesTheRunningChange(t *testing.T) {
	f := &blockingLIO{fakeLIO: &fakeLIO{serving: map[string]bool{}, t: t}, in: make(chan context.Context, 1), release: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Config{
			IQN: "iqn.2026-01.io.cairn:svm-1",
			Mappings: func(context.Context) ([]Mapping, error) {
				return []Mapping{{VolumeID: "00000000000000a1", LUN: -1, Hosts: []Host{{IQN: "iqn.h1"}}}}, nil
			},
			Interval: time.Hour,
			Open: func(context.Context, string) (blockdev.Volume, error) {
				return blockdev.NewMemVolume("a", 0xa1, 1<<20), nil
			},
			NewHandler: func(blockdev.Volume) tcmu.Handler { return nil },
			LIO:        f,
			Serve:      f.serve,
		})
	}()
	var actx context.Context
	select {
	case actx = <-f.in:
	case <-time.After(5 * time.Second):
		t.Fatal("no LIO change in 5 s")
	}
	cancel() // SIGTERM while rtslib runs
	select {
	case err := <-done:
		t.Fatalf("Run returned (%v) while its LIO change was still running", err)
	case <-time.After(100 * time.Millisecond):
	}
	if actx.Err() != nil {
		t.Fatalf("the change's context ended with the target's: %v", actx.Err())
	}
	close(f.release)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after the change ended")
	}
	if b, s, a := f.snapshot(); !slices.Equal(b, []string{"cairn-00000000000000a1"}) || len(s) != 0 || !slices.Equal(a["iqn.h1"], []int{0}) {
		t.Fatalf("after the stop: backstores %v, serving %v, acls %v; want the whole change made and nothing served", b, s, a)
	}
}
