package testcluster

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"
)

// LogBuffer collects a cluster's log (Options.LogTo) while its daemons
// write it, for tests that check what was logged.
type LogBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *LogBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *LogBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// WaitLine waits up to 5 s for a line holding every one of want, and
// fails the test without one.
func (l *LogBuffer) WaitLine(t testing.TB, want ...string) {
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
