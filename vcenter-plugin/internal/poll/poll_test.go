package poll_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cairn-storage/cairn/vcenter-plugin/internal/poll"
)

func TestUntilDone(t *testing.T) {
	calls := 0
	err := poll.Until(context.Background(), time.Second, time.Millisecond, "unused", func() (bool, string, error) {
		calls++
		return calls == 3, "not yet", nil
	})
	if err != nil || calls != 3 {
		t.Fatalf("err %v after %d calls, want nil after 3", err, calls)
	}
}

func TestUntilTimeoutSaysWhatAndWhatNext(t *testing.T) {
	calls := 0
	start := time.Now()
	err := poll.Until(context.Background(), 30*time.Millisecond, 5*time.Millisecond, "check the SDS, then resume", func() (bool, string, error) {
		calls++
		return false, "sds sds-1 is not up", nil
	})
	if err == nil || err.Error() != "sds sds-1 is not up after 30ms: check the SDS, then resume" {
		t.Fatalf("timeout error %v", err)
	}
	if time.Since(start) < 30*time.Millisecond || calls < 2 {
		t.Fatalf("gave up after %s and %d calls, before the timeout", time.Since(start), calls)
	}
}

func TestUntilZeroTimeoutAsksOnce(t *testing.T) {
	calls := 0
	err := poll.Until(context.Background(), 0, time.Hour, "hint", func() (bool, string, error) {
		calls++
		return false, "x", nil
	})
	if err == nil || calls != 1 {
		t.Fatalf("err %v after %d calls, want a timeout after 1", err, calls)
	}
}

func TestUntilErrorStops(t *testing.T) {
	boom := errors.New("boom")
	calls := 0
	err := poll.Until(context.Background(), time.Hour, time.Millisecond, "hint", func() (bool, string, error) {
		calls++
		return false, "", boom
	})
	if !errors.Is(err, boom) || calls != 1 {
		t.Fatalf("err %v after %d calls, want boom after 1", err, calls)
	}
}

func TestUntilContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	calls := 0
	start := time.Now()
	err := poll.Until(ctx, time.Hour, time.Hour, "hint", func() (bool, string, error) {
		calls++
		cancel() // ends the wait during the first interval
		return false, "x", nil
	})
	if !errors.Is(err, context.Canceled) || calls != 1 || time.Since(start) > 10*time.Second {
		t.Fatalf("err %v after %d calls in %s", err, calls, time.Since(start))
	}
	if strings.Contains(err.Error(), "hint") {
		t.Fatalf("a cancelled wait is not a timeout: %v", err)
	}
}
