package model

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestHashSlotsBound: no more than hashSlots hashes run at once; a request
// that cannot get a slot before its context ends gets ErrUnavailable.
func TestHashSlotsBound(t *testing.T) {
	var running, peak atomic.Int32
	release := make(chan struct{})
	var wg sync.WaitGroup
	for range hashSlots + 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = withHashSlot(context.Background(), func() {
				n := running.Add(1)
				for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
				}
				<-release
				running.Add(-1)
			})
		}()
	}
	deadline := time.Now().Add(10 * time.Second)
	for running.Load() < hashSlots && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := hashPassword(ctx, "while-all-slots-are-busy"); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("hash with every slot busy: %v, want ErrUnavailable", err)
	}
	close(release)
	wg.Wait()
	if p := peak.Load(); p != hashSlots {
		t.Fatalf("%d hashes ran at once, want at most (and, with %d waiting, exactly) %d", p, hashSlots+3, hashSlots)
	}
}

// BenchmarkArgon2Default measures one login's hash at the product's cost.
func BenchmarkArgon2Default(b *testing.B) {
	saved := PasswordHashParams
	PasswordHashParams = Argon2Default
	defer func() { PasswordHashParams = saved }()
	for b.Loop() {
		if _, err := hashPassword(context.Background(), "correct horse battery"); err != nil {
			b.Fatal(err)
		}
	}
}
