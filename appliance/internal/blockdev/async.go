package blockdev

import "context"

// This file holds the data path's asynchronous volume interface and the one
// description of its hold/flush batching scheme; nbd, scsi, tcmu, client
// and wire point here.

// AsyncVolume is a Volume that can start a read or a write without a
// goroutine of its own (the client library, client.Volume, and the frontend
// wrapper around it, frontend.Volume). A frontend checks for it once per
// connection or LUN, not per request, and keeps the synchronous methods for
// everything else (and for requests the async path gives back).
//
// # Completion
//
// done runs exactly once per ReadAtAsync/WriteAtAsync: usually on the
// reader goroutine of the wire connection the answer arrived on, possibly
// before the call returns (an invalid range, a connection already failed),
// or on a goroutine of its own when the request needed the retrying path
// (several chunks, no route yet, a failed first attempt). done must not
// block: it holds up every other answer on that connection. p is the
// volume's until done runs: the caller must neither touch nor recycle it
// before.
//
// # Hold and flush (requests)
//
// The frontend's request loop (the NBD connection reader, the TCMU ring
// loop) knows whether more requests are already at hand. It passes hold
// true for such a request: the volume then appends it to the send buffer of
// its SDS connection without writing it, so a burst of requests reaches
// each SDS in one system call. The last request of a burst is sent with
// hold false, or the loop calls FlushHeld, which writes every held request
// on every connection. A frontend must call FlushHeld before it waits for
// anything (the network, a request budget, a free worker, a QoS delay) and
// before it returns: a held request is not on the wire, and waiting with
// one would wait for an answer that never comes. A send without hold, or a
// full buffer, writes the held ones too.
//
// # Idle hook (replies)
//
// OnIdle registers f to run once a burst of done callbacks is over: when a
// wire connection's reader has handled the answers it had buffered and is
// about to wait for the network, and after each done run anywhere else. A
// frontend whose done only queues its reply (NBD's send with hold) writes
// the queued replies from f, one system call for the burst. f runs on
// several goroutines at once (one per SDS connection), must be safe for
// that and must not block; the frontend unregisters it (the returned
// cancel) when its connection ends. TCMU writes each completion into the
// ring in done and rings the kernel's doorbell from f, once per burst
// (tcmu.IdleHandler).
type AsyncVolume interface {
	Volume
	// ReadAtAsync reads like ReadAt and reports the outcome to done.
	ReadAtAsync(ctx context.Context, p []byte, off int64, hold bool, done func(error))
	// WriteAtAsync writes like WriteAt and reports the outcome to done.
	WriteAtAsync(ctx context.Context, p []byte, off int64, flags WriteFlags, hold bool, done func(error))
	// FlushHeld sends every request held back with hold.
	FlushHeld()
	// OnIdle registers f as an idle hook; cancel unregisters it.
	OnIdle(f func()) (cancel func())
}
