// Package testlog is a log destination tests read while the code under test
// writes it (safe for concurrent writers), and waits for a line.
package testlog

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"
)

// Buffer collects a log while it is written, for tests that check what was
// logged (a testcluster's Options.LogTo, a server's slog handler).
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *Buffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *Buffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// WaitLine waits up to 5 s for a line holding every one of want, and
// fails the test without one.
func (l *Buffer) WaitLine(t testing.TB, want ...string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		for _, line := range strings.Split(l.String(), "\n") {
			all := true
			for _, w := range want {
				all = all && strings.Contains(line, w)
			}
			if all {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no log line with all of %q", want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
