package gateway

// Login throttling (docs/api.md section 1, "Login throttling").
//
// Every password attempt (POST /login, POST /bootstrap/admin-password) is
// counted twice before the password is checked: under its user name and
// under the TCP peer address of the request (never X-Forwarded-For, which
// the client writes). A name rotated from one address hits the address
// counter; many addresses on one name hit the name counter.
//
// Counting before the check, not after, is what makes a burst useless: a
// thousand guesses sent at once are all counted before any of them is
// hashed, so at most the limit get through. An attempt is "pending" until
// its password is checked; one that finds its key at the limit while
// attempts are pending waits (up to pendingWait) for them to settle rather
// than starting a lockout, so that a client logging in several times at
// once with the right password (the vSphere plugin's first requests) is
// not locked out by its own logins. A success refunds its count (the
// name's counter is deleted, the address's decremented), so clients that
// log in often and right are never slowed; an error that is not a wrong
// password (etcd down) refunds too.
//
// A key whose counter has reached its limit within Window is locked out at
// its next attempt: that attempt and all others until the lockout ends get
// 429 with Retry-After, whatever the password; the lockout is one event
// (kind login-throttled). The first lockout lasts Base and each next one
// twice the last, up to Max; after a lockout one more attempt is allowed
// before the next. The counters live in etcd so that every gateway of the
// cluster (each accepts every token) sees the same lockout; each is under
// a lease that ends Window after its last attempt or lockout, which is
// also when the lockout level returns to zero. Layout v1:
//
//	key   model.ThrottleUserKey(name) or model.ThrottleAddrKey(address)
//	value {"attempts": n, "pending": p, "last": RFC 3339, "lockouts": k, "until": RFC 3339}
//
// attempts counts the attempts of the window (pending ones included),
// pending those whose password is being checked.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/cairn-storage/cairn/appliance/internal/model"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// LoginThrottle sets the throttle of password attempts; zero fields take
// the defaults below.
type LoginThrottle struct {
	// UserLimit attempts per user name within Window before a lockout.
	UserLimit int
	// AddrLimit attempts per client address within Window: higher than
	// UserLimit because one address may be a jump host or NAT for many
	// people.
	AddrLimit int
	Window    time.Duration
	// Base is the first lockout; each next one doubles, up to Max.
	Base time.Duration
	Max  time.Duration
}

// Throttle defaults.
const (
	DefaultThrottleUserLimit = 5
	DefaultThrottleAddrLimit = 20
	DefaultThrottleWindow    = 15 * time.Minute
	DefaultThrottleBase      = 30 * time.Second
	DefaultThrottleMax       = 15 * time.Minute
)

// EventLoginThrottled is the kind of the event a lockout writes.
const EventLoginThrottled = "login-throttled"

// CodeThrottled is the error code of a 429.
const CodeThrottled = "throttled"

// bootstrapThrottleName is the name bootstrap-token attempts count under:
// one token, so one counter (a user cannot have this name: '/' is not
// allowed in names).
const bootstrapThrottleName = "/bootstrap-token"

func (t LoginThrottle) withDefaults() LoginThrottle {
	if t.UserLimit <= 0 {
		t.UserLimit = DefaultThrottleUserLimit
	}
	if t.AddrLimit <= 0 {
		t.AddrLimit = DefaultThrottleAddrLimit
	}
	if t.Window <= 0 {
		t.Window = DefaultThrottleWindow
	}
	if t.Base <= 0 {
		t.Base = DefaultThrottleBase
	}
	if t.Max <= 0 {
		t.Max = DefaultThrottleMax
	}
	return t
}

// delay is the length of lockout number k (1, 2, ...).
func (t LoginThrottle) delay(k int) time.Duration {
	d := t.Base
	for i := 1; i < k && d < t.Max; i++ {
		d *= 2
	}
	return min(d, t.Max)
}

type throttleRecord struct {
	Attempts int       `json:"attempts"`
	Pending  int       `json:"pending"`
	Last     time.Time `json:"last"`
	Lockouts int       `json:"lockouts"`
	Until    time.Time `json:"until"`
}

// throttleKey is one counter an attempt is counted under.
type throttleKey struct {
	key   string
	what  string // for people: `user "x"`, `address 192.0.2.1`
	limit int
	rec   throttleRecord
	rev   int64            // ModRevision read (0: absent)
	lease clientv3.LeaseID // lease read (revoked once the key moved to a new one)
}

// pendingWait bounds how long an attempt at the limit waits for pending
// attempts to settle without any of them settling (a password check takes
// well under a second, but many queue for the hashing slots); a gateway
// that died mid-check leaves its pending count behind, and the waiter then
// proceeds as if those attempts had failed. admitMax bounds an admission
// in all (waits and compare-and-swap retries).
// Variables so that a test can shorten them.
var (
	pendingWait = 5 * time.Second
	admitMax    = 30 * time.Second
)

// clientAddress is the throttle's key for the peer of r: its IP, or the
// /64 an IPv6 peer is in (one host commonly holds a whole /64).
func clientAddress(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	ip := net.ParseIP(host)
	if ip == nil {
		return host
	}
	if ip4 := ip.To4(); ip4 != nil {
		return ip4.String()
	}
	return (&net.IPNet{IP: ip.Mask(net.CIDRMask(64, 128)), Mask: net.CIDRMask(64, 128)}).String()
}

// loginGate is an admitted password attempt; call done with its outcome.
type loginGate struct {
	s    *Server
	keys []throttleKey
}

// Outcomes of an attempt.
const (
	attemptFailed    = iota // wrong password: stays counted
	attemptSucceeded        // the name's counter is cleared, the address's refunded
	attemptNeutral          // not a guess (etcd down...): refunded
)

// admitLogin counts an attempt for name from the peer of c, or refuses it
// (429, Retry-After) while either key is locked out.
func (s *Server) admitLogin(c *call, name string) (*loginGate, error) {
	t := s.cfg.Throttle
	addr := clientAddress(c.r)
	shown := name
	if name == bootstrapThrottleName {
		shown = "bootstrap-token"
	}
	if len(shown) > 64 {
		shown = shown[:64] + "..."
	}
	who := fmt.Sprintf("user %q", shown)
	if name == bootstrapThrottleName {
		who = "the bootstrap token"
	}
	giveUp := time.Now().Add(admitMax)
	waitUntil := time.Now().Add(pendingWait)
	var lastRev int64
	for time.Now().Before(giveUp) {
		keys := []throttleKey{
			{key: model.ThrottleUserKey(name), what: who, limit: t.UserLimit},
			{key: model.ThrottleAddrKey(addr), what: "address " + addr, limit: t.AddrLimit},
		}
		tr, err := s.cfg.Etcd.Txn(c.ctx).Then(clientv3.OpGet(keys[0].key), clientv3.OpGet(keys[1].key)).Commit()
		if err != nil {
			return nil, errorf(http.StatusServiceUnavailable, "cannot check the login throttle: etcd unavailable (%v); retry", err)
		}
		for i := range keys {
			if kvs := tr.Responses[i].GetResponseRange().Kvs; len(kvs) == 1 {
				keys[i].rev, keys[i].lease = kvs[0].ModRevision, clientv3.LeaseID(kvs[0].Lease)
				_ = json.Unmarshal(kvs[0].Value, &keys[i].rec) // unreadable: start again
			}
		}
		now := time.Now().UTC()
		// Locked out already: refuse without writing.
		var wait time.Duration
		for _, k := range keys {
			if k.rec.Until.After(now) {
				wait = max(wait, k.rec.Until.Sub(now))
			}
		}
		if wait > 0 {
			return nil, s.throttled(c, wait)
		}
		// Count the attempt, or start a lockout on a key at its limit, or
		// wait for the pending attempts that brought it there (for as long
		// as they keep settling).
		if rev := max(keys[0].rev, keys[1].rev); rev != lastRev {
			lastRev, waitUntil = rev, time.Now().Add(pendingWait)
		}
		var started []throttleKey
		wait = 0
		for i := range keys {
			k := &keys[i]
			if now.Sub(k.rec.Last) > t.Window && k.rec.Pending == 0 {
				k.rec.Attempts = 0
			}
			if k.rec.Attempts >= k.limit && k.rec.Pending > 0 && now.Before(waitUntil) {
				wait = 100 * time.Millisecond
			}
		}
		if wait > 0 {
			select {
			case <-c.ctx.Done():
				return nil, errorf(http.StatusServiceUnavailable, "login attempt abandoned while earlier attempts were checked: %v", c.ctx.Err())
			case <-time.After(wait):
			}
			continue
		}
		for i := range keys {
			k := &keys[i]
			if k.rec.Attempts >= k.limit {
				k.rec.Lockouts++
				k.rec.Until = now.Add(t.delay(k.rec.Lockouts))
				// One more attempt when this lockout ends, then the next.
				k.rec.Attempts, k.rec.Pending = k.limit-1, 0
				started = append(started, *k)
				wait = max(wait, k.rec.Until.Sub(now))
			}
		}
		for i := range keys {
			if len(started) == 0 {
				keys[i].rec.Attempts++
				keys[i].rec.Pending++
			}
			keys[i].rec.Last = now
		}
		ok, err := s.putThrottle(c.ctx, keys, now)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue // another attempt on a key meanwhile: read again
		}
		if len(started) > 0 {
			for _, k := range started {
				s.log.Warn("login throttled", "key", k.what, "lockout", k.rec.Lockouts, "for", k.rec.Until.Sub(now).Round(time.Second))
				s.emit(c.ctx, Event{Severity: SeverityWarning, Kind: EventLoginThrottled, User: shown,
					Message: fmt.Sprintf("login throttled: %s reached %d password attempts within %s and is locked out for %s (lockout %d); the refused attempt was for %s from address %s",
						k.what, k.limit, t.Window, k.rec.Until.Sub(now).Round(time.Second), k.rec.Lockouts, who, addr)})
			}
			return nil, s.throttled(c, wait)
		}
		return &loginGate{s: s, keys: keys}, nil
	}
	return nil, errorf(http.StatusServiceUnavailable, "the login throttle is too busy (many attempts on one user or address at once, for %s); retry", admitMax)
}

// putThrottle writes keys (compare-and-swap on the revisions read), each
// under a lease of its own that ends Window after now or after its
// lockout. A lease per key, never shared, so that the old one can be
// revoked as soon as its key moved on: a stream of attempts does not pile
// up leases.
func (s *Server) putThrottle(ctx context.Context, keys []throttleKey, now time.Time) (bool, error) {
	var cmps []clientv3.Cmp
	var ops []clientv3.Op
	var granted []clientv3.LeaseID
	revokeAll := func(ids []clientv3.LeaseID) {
		for _, id := range ids {
			_, _ = s.cfg.Etcd.Revoke(ctx, id)
		}
	}
	for _, k := range keys {
		ttl := int64((maxTime(now, k.rec.Until).Sub(now) + s.cfg.Throttle.Window + time.Second - 1) / time.Second)
		lease, err := s.cfg.Etcd.Grant(ctx, ttl)
		if err != nil {
			revokeAll(granted)
			return false, errorf(http.StatusServiceUnavailable, "cannot record the login attempt: etcd unavailable (%v); retry", err)
		}
		granted = append(granted, lease.ID)
		b, _ := json.Marshal(k.rec)
		cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(k.key), "=", k.rev))
		ops = append(ops, clientv3.OpPut(k.key, string(b), clientv3.WithLease(lease.ID)))
	}
	tr, err := s.cfg.Etcd.Txn(ctx).If(cmps...).Then(ops...).Commit()
	if err != nil {
		revokeAll(granted)
		return false, errorf(http.StatusServiceUnavailable, "cannot record the login attempt: etcd unavailable (%v); retry", err)
	}
	if !tr.Succeeded {
		revokeAll(granted)
		return false, nil
	}
	for _, k := range keys {
		if k.lease != 0 {
			revokeAll([]clientv3.LeaseID{k.lease})
		}
	}
	return true, nil
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// throttled is the 429 of a locked-out attempt. It never says whether the
// user exists: unknown names are counted and locked out alike.
func (s *Server) throttled(c *call, wait time.Duration) error {
	secs := int64((wait + time.Second - 1) / time.Second)
	c.w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
	return &apiError{status: http.StatusTooManyRequests, code: CodeThrottled,
		msg: fmt.Sprintf("too many login attempts for this user name or from this address: wait %d s (Retry-After) and retry; each further lockout doubles the wait, up to %s, and a successful login resets it", secs, s.cfg.Throttle.Max)}
}

// done settles an admitted attempt: it is no longer pending; a success
// deletes the name's counter and takes the attempt back from the address;
// a neutral outcome takes it back from both. Errors are logged, not
// returned: the counters lapse with their lease anyway.
func (g *loginGate) done(ctx context.Context, outcome int) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	for i, k := range g.keys {
		var err error
		switch {
		case i == 0 && outcome == attemptSucceeded:
			err = g.s.resetThrottle(ctx, k.key)
		case outcome == attemptFailed:
			err = g.s.settle(ctx, k.key, 0)
		default:
			err = g.s.settle(ctx, k.key, 1)
		}
		if err != nil {
			g.s.log.Warn("login throttle: attempt not settled", "key", k.what, "err", err)
		}
	}
}

// resetThrottle deletes key and revokes its lease (it holds only key).
func (s *Server) resetThrottle(ctx context.Context, key string) error {
	r, err := s.cfg.Etcd.Delete(ctx, key, clientv3.WithPrevKV())
	if err != nil {
		return err
	}
	if len(r.PrevKvs) == 1 && r.PrevKvs[0].Lease != 0 {
		_, err = s.cfg.Etcd.Revoke(ctx, clientv3.LeaseID(r.PrevKvs[0].Lease))
	}
	return err
}

// settle ends one pending attempt on key and takes refund attempts back
// (keeping the key's lease and lockout).
func (s *Server) settle(ctx context.Context, key string, refund int) error {
	for range 50 {
		r, err := s.cfg.Etcd.Get(ctx, key)
		if err != nil {
			return err
		}
		if len(r.Kvs) == 0 {
			return nil
		}
		var rec throttleRecord
		if json.Unmarshal(r.Kvs[0].Value, &rec) != nil {
			return nil
		}
		rec.Pending = max(rec.Pending-1, 0)
		rec.Attempts = max(rec.Attempts-refund, 0)
		b, _ := json.Marshal(rec)
		tr, err := s.cfg.Etcd.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", r.Kvs[0].ModRevision)).
			Then(clientv3.OpPut(key, string(b), clientv3.WithIgnoreLease())).Commit()
		if err != nil {
			return err
		}
		if tr.Succeeded {
			return nil
		}
	}
	return errors.New("too many concurrent attempts on the key")
}

// outcomeOf classifies the error of a password check.
func outcomeOf(err error) int {
	switch {
	case err == nil:
		return attemptSucceeded
	case errors.Is(err, model.ErrBadCredentials):
		return attemptFailed
	}
	return attemptNeutral
}
