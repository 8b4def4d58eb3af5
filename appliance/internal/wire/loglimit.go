package wire

import (
	"sync"
	"time"
)

// LogLimiter rate-limits repeated log lines (refused connections and
// requests, which a misconfigured or hostile peer can cause at line rate):
// each key logs at most once per interval, and the next line that does log
// says how many were suppressed in between. The zero value logs each key
// at most once per 10 s.
type LogLimiter struct {
	Interval time.Duration
	mu       sync.Mutex
	keys     map[string]*logKey
}

type logKey struct {
	last       time.Time
	suppressed int
}

// maxLogKeys bounds the limiter's memory: past it, the table starts over
// (at worst a few more lines are logged).
const maxLogKeys = 1024

// Allow reports whether a line with key should be logged now, and how many
// lines of that key were suppressed since the last one logged.
func (l *LogLimiter) Allow(key string) (ok bool, suppressed int) {
	iv := l.Interval
	if iv == 0 {
		iv = 10 * time.Second
	}
	if len(key) > 160 {
		key = key[:160]
	}
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.keys == nil || len(l.keys) >= maxLogKeys {
		l.keys = map[string]*logKey{}
	}
	k := l.keys[key]
	if k == nil {
		l.keys[key] = &logKey{last: now}
		return true, 0
	}
	if now.Sub(k.last) < iv {
		k.suppressed++
		return false, 0
	}
	n := k.suppressed
	k.last, k.suppressed = now, 0
	return true, n
}
