package refusals

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

func TestBatchingBoundsMemoryAndLog(t *testing.T) {
	var logbuf bytes.Buffer
	r := New("nbd", "n1", slog.New(slog.NewTextHandler(&logbuf, nil)))
	for i := 0; i < 1000; i++ {
		r.Refused("NBD port", "10.0.0.9:1234", "", "no certificate")
	}
	b, _, ok := r.take()
	if !ok || len(b.Refusals) != MaxPerBatch || b.More != 1000-MaxPerBatch {
		t.Fatalf("batch: %d listed, %d more, ok %v", len(b.Refusals), b.More, ok)
	}
	if n := strings.Count(logbuf.String(), "connection refused"); n != 1 {
		t.Errorf("%d log lines for a burst within a second; want 1", n)
	}
	if _, _, ok := r.take(); ok {
		t.Error("a second batch from nothing")
	}
	want := "nbd n1 refused 10.0.0.9:1234 on the NBD port: no certificate; and 999 more refusals"
	if got := b.Message(); got != want {
		t.Errorf("message %q, want %q", got, want)
	}
	var nilRep *Reporter
	nilRep.Refused("x", "y", "", "z") // daemons without a reporter
}
