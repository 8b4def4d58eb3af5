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

// FuzzParsePHC: a stored hash of any shape is parsed without panicking or
// allocating beyond the bounds, and what parses encodes back to itself.
func FuzzParsePHC(f *testing.F) {
	f.Add(encodePHC(Argon2Default, make([]byte, argonSaltLen), make([]byte, argonKeyLen)))
	f.Add("$argon2id$v=19$m=64,t=1,p=1$c2FsdHNhbHQ$aGFzaGhhc2hoYXNoaGFzaA")
	f.Add("$argon2id$v=19$m=4294967295,t=1,p=255$$")
	f.Add("$2a$04$abcdefghijklmnopqrstuu")
	f.Fuzz(func(t *testing.T, s string) {
		p, salt, key, err := parsePHC(s)
		if err != nil {
			return
		}
		if p.MemoryKiB > maxArgonMemoryKiB || p.Passes > maxArgonPasses || p.Lanes < 1 || len(key) > 64 {
			t.Fatalf("%q parsed to out-of-bounds parameters %+v (key %d bytes)", s, p, len(key))
		}
		p2, salt2, key2, err := parsePHC(encodePHC(p, salt, key))
		if err != nil || p2 != p || string(salt2) != string(salt) || string(key2) != string(key) {
			t.Fatalf("%q does not round-trip: %v", s, err)
		}
	})
}
