// Package poll is the one wait loop of the plugin's engines (deploy,
// datastore, maintenance, the e2e driver): ask until the answer is done,
// every interval, for at most a timeout, and stop as soon as the context
// ends. The timeout error says what was awaited and what to do next.
package poll

import (
	"context"
	"fmt"
	"time"
)

// Check asks once. done ends the wait; otherwise pending says what is
// still awaited, in words for the operator ("sds sds-1 is not up"): it
// becomes the subject of the timeout error. A non-nil error ends the wait
// at once and is returned as it is (a check that wants to retry an error
// reports it in pending instead).
type Check func() (done bool, pending string, err error)

// Until calls check every interval until it is done or fails, ctx ends
// (then it returns ctx.Err()), or timeout has passed since Until was
// called. Invariant: check runs at least once, and once more after the
// deadline has passed, so a zero timeout still asks once; the error after
// the deadline reads "<pending> after <timeout>: <hint>", so hint says
// what to do next.
func Until(ctx context.Context, timeout, interval time.Duration, hint string, check Check) error {
	deadline := time.Now().Add(timeout)
	for {
		done, pending, err := check()
		if err != nil {
			return err
		}
		if done {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s after %s: %s", pending, timeout, hint)
		}
		t := time.NewTimer(interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}
