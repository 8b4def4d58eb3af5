package wire

// retry.go: what a sender does with a StatusStaleEpoch answer. The one
// place that waits for the newer map (WaitIfStale) and the one loop that
// sends a request again at the newer epoch (RetryStale).

import (
	"context"
	"errors"
	"time"
)

// EpochSource is the sender's view of the placement epoch:
// catalog.Catalog implements it.
type EpochSource interface {
	Epoch() uint64
	// WaitEpoch returns once the view has reached epoch e, or ctx ended.
	WaitEpoch(ctx context.Context, e uint64) error
}

// StaleWait bounds how long a stale answer waits for the sender's view to
// reach the responder's epoch. The view normally follows within a watch
// round trip; past the bound the retry goes out anyway and, if still
// stale, is answered stale again.
const StaleWait = 2 * time.Second

// WaitIfStale reports whether err is a StatusStaleEpoch answer. If it is,
// it first waits (at most StaleWait) until view has seen the epoch the
// responder named, so the caller's retry is routed with a map at least as
// new as the responder's.
func WaitIfStale(ctx context.Context, view EpochSource, err error) bool {
	var se *StatusError
	if !errors.As(err, &se) || se.Status != StatusStaleEpoch {
		return false
	}
	wctx, cancel := context.WithTimeout(ctx, StaleWait)
	_ = view.WaitEpoch(wctx, se.Epoch)
	cancel()
	return true
}

// RetryStale sends req to p, each attempt bounded by timeout. Each time the
// answer is StatusStaleEpoch (at most retries times) it waits for view to
// catch up, sets req.Epoch to the newer of the view's and the responder's
// epoch, calls onStale (if not nil) and sends req again. It returns the last
// answer. The caller uses it where the request stays right at a newer
// epoch (the responder checks it again then), so there is nothing to
// re-route.
func RetryStale(ctx context.Context, p *Client, view EpochSource, req *Request, retries int, timeout time.Duration, onStale func()) (*Response, error) {
	for attempt := 0; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, timeout)
		resp, err := p.Do(actx, req, nil)
		cancel()
		var se *StatusError
		if err == nil || attempt >= retries || !errors.As(err, &se) || se.Status != StatusStaleEpoch {
			return resp, err
		}
		if onStale != nil {
			onStale()
		}
		WaitIfStale(ctx, view, err)
		req.Epoch = max(view.Epoch(), se.Epoch)
	}
}
