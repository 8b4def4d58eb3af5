// Package refusals reports the connections a daemon refused (no
// certificate, another cluster's, the wrong role, a forbidden operation) to
// the administrators: each daemon collects them and hands them to the
// gateways through etcd; a gateway turns each report into a warning event
// (GET /api/v1/events, the UI's event list) and deletes it, once, in one
// transaction.
//
// A report is a Batch at model.RefusedKey(role, name, seq), under a lease of
// its own (an hour: reports no gateway consumed do not pile up). A daemon
// writes at most one batch per interval (2 s), each holding up to
// MaxPerBatch refusals in full and a count of the rest, so an attacker
// hammering a port costs etcd one small write every 2 s, not one per try.
package refusals

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/cairn-storage/cairn/appliance/internal/model"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// MaxPerBatch bounds the refusals a batch lists in full.
const MaxPerBatch = 8

// Refusal is one refused attempt.
type Refusal struct {
	Time    time.Time `json:"time"`
	Service string    `json:"service"` // "data path", "nbd", "etcd"...
	Remote  string    `json:"remote"`  // the peer's address
	Peer    string    `json:"peer"`    // role/name its certificate claims, if any
	Reason  string    `json:"reason"`
}

// Batch is what a daemon reports at once.
type Batch struct {
	Role     string    `json:"role"`
	Name     string    `json:"name"`
	Refusals []Refusal `json:"refusals"`
	More     int       `json:"more"` // refused besides those listed
}

// Reporter collects one daemon's refusals. Its zero value is not usable;
// a nil *Reporter accepts and drops everything (daemons without etcd).
type Reporter struct {
	role, name string
	log        *slog.Logger

	mu      sync.Mutex
	pending []Refusal
	more    int
	seq     uint64
	logged  time.Time // last refusal written to the daemon's own log
}

// New makes a reporter for the daemon role/name.
func New(role, name string, log *slog.Logger) *Reporter {
	return &Reporter{role: role, name: name, log: log}
}

// Refused records an attempt. It never blocks and keeps at most
// MaxPerBatch in memory; the daemon's log gets one line per second at most.
func (r *Reporter) Refused(service, remote, peer, reason string) {
	if r == nil {
		return
	}
	now := time.Now().UTC()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.pending) < MaxPerBatch {
		r.pending = append(r.pending, Refusal{Time: now, Service: service, Remote: remote, Peer: peer, Reason: reason})
	} else {
		r.more++
	}
	if now.Sub(r.logged) >= time.Second {
		r.logged = now
		r.log.Warn("connection refused", "service", service, "remote", remote, "peer", peer, "reason", reason)
	}
}

func (r *Reporter) take() (Batch, uint64, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.pending) == 0 {
		return Batch{}, 0, false
	}
	b := Batch{Role: r.role, Name: r.name, Refusals: r.pending, More: r.more}
	r.pending, r.more = nil, 0
	r.seq++
	return b, r.seq, true
}

// Run hands the collected refusals to etcd every interval until ctx ends.
// A batch etcd refuses is dropped (logged): reporting never holds up the
// daemon.
func (r *Reporter) Run(ctx context.Context, cli *clientv3.Client, interval time.Duration) {
	if interval <= 0 {
		interval = 2 * time.Second
	}
	// Sequence numbers start at the time of start, so a restarted daemon
	// does not overwrite a batch its predecessor left unconsumed.
	r.mu.Lock()
	r.seq = uint64(time.Now().UnixNano())
	r.mu.Unlock()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		b, seq, ok := r.take()
		if !ok {
			continue
		}
		if err := put(ctx, cli, model.RefusedKey(r.role, r.name, fmt.Sprintf("%016x", seq)), b); err != nil {
			r.log.Warn("refused connections not reported to the gateways (they stay in this log)", "count", len(b.Refusals)+b.More, "err", err)
		}
	}
}

func put(ctx context.Context, cli *clientv3.Client, key string, b Batch) error {
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	l, err := cli.Grant(pctx, int64(time.Hour/time.Second))
	if err != nil {
		return err
	}
	v, _ := json.Marshal(b)
	_, err = cli.Put(pctx, key, string(v), clientv3.WithLease(l.ID))
	return err
}

// Message is the one-line text of a batch, for an event.
func (b Batch) Message() string {
	if len(b.Refusals) == 0 {
		return fmt.Sprintf("%s %s refused %d connections", b.Role, b.Name, b.More)
	}
	f := b.Refusals[0]
	who := f.Remote
	if f.Peer != "" {
		who += " (certificate of " + f.Peer + ")"
	}
	msg := fmt.Sprintf("%s %s refused %s on the %s: %s", b.Role, b.Name, who, f.Service, f.Reason)
	if n := len(b.Refusals) - 1 + b.More; n > 0 {
		msg += fmt.Sprintf("; and %d more refusals", n)
	}
	return msg
}

// Pending is what r holds and has not handed to etcd yet (for tests and
// diagnostics).
func Pending(r *Reporter) []Refusal {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Refusal(nil), r.pending...)
}
