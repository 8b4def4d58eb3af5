package gateway

// Events (the audit log included) and alerts, stored in etcd with bounded
// retention (docs/api.md section 5).
//
// Layout v1, under model.LogPrefix (outside the model's prefix, so that
// reading the model never reads the log): the keys and their values are in
// the table of model/keys.go; an event's id is its number (16 hex digits).
//
// An event is written in the same transaction as the sequence number it
// takes (and as the change it reports, where there is one), so ids are
// dense and strictly increasing in commit order and a reported change is
// never without its event or the reverse. An alert is raised only while
// its "active" key is absent, so gateways observing the same condition
// raise it once.

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/cairn-storage/cairn/appliance/internal/model"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Severities, in increasing order.
const (
	SeverityInfo     = "info"
	SeverityWarning  = "warning"
	SeverityError    = "error"
	SeverityCritical = "critical"
)

var severityRank = map[string]int{SeverityInfo: 1, SeverityWarning: 2, SeverityError: 3, SeverityCritical: 4}

// Event kinds.
const (
	EventAudit   = "audit"
	EventLogin   = "login"
	EventState   = "state"
	EventRebuild = "rebuild"
	EventAlert   = "alert"
)

// Retention.
const (
	eventMaxKept  = 10000
	eventKeep     = 30 * 24 * time.Hour
	alertKeep     = 7 * 24 * time.Hour
	eventPageMax  = 1000
	eventPageSize = 100
)

// Event is one thing that happened.
type Event struct {
	ID       string     `json:"id"`
	Time     time.Time  `json:"time"`
	Severity string     `json:"severity"`
	Kind     string     `json:"kind"`
	Object   *objectRef `json:"object"`
	Message  string     `json:"message"`
	User     string     `json:"user,omitempty"`
	// OnBehalfOf is the person a delegate user acted for (audit events).
	OnBehalfOf string `json:"on_behalf_of,omitempty"`
	Method     string `json:"method,omitempty"`
	Path       string `json:"path,omitempty"`
	Status     int    `json:"status,omitempty"`
}

func eventID(n uint64) string { return fmt.Sprintf("%016x", n) }

// commitEvent writes ev (taking the next id) together with ops, under
// cmps. It returns false, writing nothing, when cmps do not hold.
func (s *Server) commitEvent(ctx context.Context, ev Event, cmps []clientv3.Cmp, ops []clientv3.Op) (bool, error) {
	s.eventMu.Lock()
	defer s.eventMu.Unlock()
	for attempt := 0; attempt < 20; attempt++ {
		if attempt > 0 {
			// Another gateway moved the sequence: let it finish its round.
			select {
			case <-ctx.Done():
				return false, fmt.Errorf("store event: %v: %w", ctx.Err(), model.ErrUnavailable)
			case <-time.After(time.Duration(rand.Int64N(int64(attempt)*int64(5*time.Millisecond)) + 1)):
			}
		}
		r, err := s.cfg.Etcd.Get(ctx, model.EventSeqKey)
		if err != nil {
			return false, fmt.Errorf("read event sequence: %v: %w", err, model.ErrUnavailable)
		}
		var seq uint64
		var rev int64
		if len(r.Kvs) == 1 {
			seq, _ = strconv.ParseUint(string(r.Kvs[0].Value), 10, 64)
			rev = r.Kvs[0].ModRevision
		}
		seq++
		e := ev
		e.ID = eventID(seq)
		if e.Time.IsZero() {
			e.Time = time.Now().UTC()
		}
		b, _ := json.Marshal(e)
		seqCmp := clientv3.Compare(clientv3.ModRevision(model.EventSeqKey), "=", rev)
		all := append([]clientv3.Op{clientv3.OpPut(model.EventSeqKey, strconv.FormatUint(seq, 10)), clientv3.OpPut(model.EventPrefix+e.ID, string(b))}, ops...)
		tr, err := s.cfg.Etcd.Txn(ctx).If(append([]clientv3.Cmp{seqCmp}, cmps...)...).Then(all...).
			Else(clientv3.OpTxn([]clientv3.Cmp{seqCmp}, nil, nil)).Commit()
		if err != nil {
			return false, fmt.Errorf("store event: %v: %w", err, model.ErrUnavailable)
		}
		if tr.Succeeded {
			if seq%100 == 0 && seq > eventMaxKept {
				// Bound the count: drop everything older than the last
				// eventMaxKept events.
				s.cfg.Etcd.Delete(ctx, model.EventPrefix, clientv3.WithRange(model.EventPrefix+eventID(seq-eventMaxKept)))
			}
			return true, nil
		}
		// The nested transaction tells whether the sequence moved (retry)
		// or one of cmps failed (give up).
		if tr.Responses[0].GetResponseTxn().Succeeded {
			return false, nil
		}
	}
	return false, fmt.Errorf("store event: the event sequence is too busy; retry: %w", model.ErrConflict)
}

// emit stores an event on its own; failures are logged, not returned: an
// event must never fail the request it reports.
func (s *Server) emit(ctx context.Context, ev Event) {
	// 15 s: on a loaded machine a slow etcd must not lose the event (a
	// lockout's, say) that the request it reports is waiting for.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
	defer cancel()
	if _, err := s.commitEvent(ctx, ev, nil, nil); err != nil {
		s.log.Warn("event not stored", "kind", ev.Kind, "message", ev.Message, "err", err)
	}
}

// audit records a mutating request (refused ones too) and logins.
func (s *Server) audit(ctx context.Context, c *call, user string, status int, body any) {
	ev := Event{Severity: SeverityInfo, Kind: EventAudit, Object: c.object, User: user, OnBehalfOf: c.onBehalfOf, Method: c.r.Method, Path: c.r.URL.Path, Status: status}
	if status >= 400 {
		ev.Severity = SeverityWarning
	}
	if c.r.URL.Path == APIPrefix+"/login" {
		ev.Kind = EventLogin
	}
	who := user
	if c.onBehalfOf != "" {
		who = fmt.Sprintf("%s for %s", user, c.onBehalfOf)
	}
	ev.Message = fmt.Sprintf("%s: %s %s -> %d", who, c.r.Method, c.r.URL.Path, status)
	if eb, ok := body.(errorBody); ok {
		ev.Message += " " + eb.Code + ": " + eb.Message
	}
	s.emit(ctx, ev)
}

// eventFilter is a parsed ?after=&severity=&object=&kind=.
type eventFilter struct {
	after    uint64
	severity int
	object   string
	kind     string
}

func parseEventFilter(c *call, allowLimit bool) (eventFilter, int, error) {
	q := c.r.URL.Query()
	var f eventFilter
	limit := eventPageSize
	for p := range q {
		v := q.Get(p)
		switch p {
		case "after":
			n, err := strconv.ParseUint(v, 16, 64)
			if err != nil {
				return f, 0, model.WithField(errorf(http.StatusBadRequest, "after=%q is not an event id (16 hex digits)", v), p)
			}
			f.after = n
		case "severity":
			r, ok := severityRank[v]
			if !ok {
				return f, 0, model.WithField(errorf(http.StatusBadRequest, "severity=%q: use info, warning, error or critical (that level and above)", v), p)
			}
			f.severity = r
		case "object":
			f.object = v
		case "kind":
			f.kind = v
		case "limit":
			n, err := strconv.Atoi(v)
			if !allowLimit || err != nil || n < 1 || n > eventPageMax {
				return f, 0, model.WithField(errorf(http.StatusBadRequest, "limit=%q: give 1 to %d", v, eventPageMax), p)
			}
			limit = n
		default:
			return f, 0, model.WithField(errorf(http.StatusBadRequest, "unknown filter %q; events accept after, severity, object, kind and limit", p), queryField(p))
		}
	}
	if id := c.r.Header.Get("Last-Event-ID"); id != "" && !q.Has("after") {
		if n, err := strconv.ParseUint(id, 16, 64); err == nil {
			f.after = n
		}
	}
	return f, limit, nil
}

func (f eventFilter) match(e Event) bool {
	if severityRank[e.Severity] < f.severity || (f.kind != "" && e.Kind != f.kind) {
		return false
	}
	if f.object != "" && (e.Object == nil || (e.Object.ID != f.object && e.Object.Name != f.object)) {
		return false
	}
	return true
}

// readEvents returns matching events after f.after (oldest first, at most
// limit) and the revision of the read.
func (s *Server) readEvents(ctx context.Context, f eventFilter, limit int) ([]Event, int64, error) {
	r, err := s.cfg.Etcd.Get(ctx, model.EventPrefix+eventID(f.after+1), clientv3.WithRange(clientv3.GetPrefixRangeEnd(model.EventPrefix)))
	if err != nil {
		return nil, 0, fmt.Errorf("read events: %v: %w", err, model.ErrUnavailable)
	}
	out := []Event{}
	for _, kv := range r.Kvs {
		var e Event
		if json.Unmarshal(kv.Value, &e) != nil || !f.match(e) {
			continue
		}
		out = append(out, e)
		if len(out) == limit {
			break
		}
	}
	return out, r.Header.Revision, nil
}

func (s *Server) listEvents(c *call) (int, any, error) {
	f, limit, err := parseEventFilter(c, true)
	if err != nil {
		return 0, nil, err
	}
	evs, _, err := s.readEvents(c.ctx, f, limit)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, evs, nil
}

// sseKeepalive is how often an idle stream gets a comment line.
var sseKeepalive = 15 * time.Second

// streamEvents serves GET /events/stream: the backlog after ?after= (or
// Last-Event-ID), then every new matching event as it is stored.
func (s *Server) streamEvents(c *call) (int, any, error) {
	f, _, err := parseEventFilter(c, false)
	if err != nil {
		return 0, nil, err
	}
	backlog, rev, err := s.readEvents(c.ctx, f, eventMaxKept)
	if err != nil {
		return 0, nil, err
	}
	rc := http.NewResponseController(c.w)
	// The server's WriteTimeout would cut a long stream: each write gets
	// its own deadline instead.
	deadline := func() { rc.SetWriteDeadline(time.Now().Add(sseKeepalive + 30*time.Second)) }
	deadline()
	h := c.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	c.w.WriteHeader(http.StatusOK)
	send := func(e Event) error {
		b, _ := json.Marshal(e)
		deadline()
		if _, err := fmt.Fprintf(c.w, "id: %s\nevent: event\ndata: %s\n\n", e.ID, b); err != nil {
			return err
		}
		return rc.Flush()
	}
	for _, e := range backlog {
		if send(e) != nil {
			return 0, streamed{}, nil
		}
	}
	rc.Flush()
	ctx, cancel := context.WithCancel(c.ctx)
	defer cancel()
	wch := s.cfg.Etcd.Watch(clientv3.WithRequireLeader(ctx), model.EventPrefix, clientv3.WithPrefix(), clientv3.WithRev(rev+1))
	tick := time.NewTicker(sseKeepalive)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return 0, streamed{}, nil
		case <-tick.C:
			deadline()
			if _, err := fmt.Fprint(c.w, ": keepalive\n\n"); err != nil || rc.Flush() != nil {
				return 0, streamed{}, nil
			}
		case wr, ok := <-wch:
			if !ok || wr.Err() != nil {
				// etcd lost or compacted: the client reconnects with
				// Last-Event-ID and misses nothing that is still kept.
				return 0, streamed{}, nil
			}
			for _, ev := range wr.Events {
				if ev.Type != clientv3.EventTypePut {
					continue
				}
				var e Event
				if json.Unmarshal(ev.Kv.Value, &e) != nil || !f.match(e) {
					continue
				}
				if send(e) != nil {
					return 0, streamed{}, nil
				}
			}
		}
	}
}

// Alert kinds.
const (
	AlertSDSDown          = "sds-down"
	AlertDeviceError      = "device-error"
	AlertPoolNotRedundant = "pool-not-redundant"
	AlertDataDegraded     = "data-degraded"
	AlertSDSMaintenance   = "sds-maintenance"
)

// Alert is an ongoing condition; Cleared is set when it ends.
type Alert struct {
	ID       string     `json:"id"`
	Severity string     `json:"severity"`
	Kind     string     `json:"kind"`
	Object   *objectRef `json:"object"`
	Message  string     `json:"message"`
	Since    time.Time  `json:"since"`
	Cleared  *time.Time `json:"cleared"`
}

// condition is an alert the current model calls for; key identifies it.
type condition struct {
	Alert
	key string
}

// conditions derives the alerts the model calls for now.
func (w *world) conditions(rb rebuildView) map[string]condition {
	out := map[string]condition{}
	add := func(kind, sev string, obj *objectRef, msg string) {
		id := "system"
		if obj != nil {
			id = obj.ID
		}
		k := kind + "/" + id
		out[k] = condition{Alert{Severity: sev, Kind: kind, Object: obj, Message: msg}, k}
	}
	if w.system == nil {
		return out
	}
	for _, x := range w.sdss {
		obj := &objectRef{Kind: model.KindSDS, ID: x.ID, Name: x.Name}
		if mode := model.MaintenanceMode(x.State); mode != "" {
			add(AlertSDSMaintenance, SeverityInfo, obj, fmt.Sprintf("SDS %s is in %s maintenance; exit with `cairnctl sds maintenance exit %s`", x.Name, mode, x.Name))
			continue
		}
		if !w.up(x.ID) {
			add(AlertSDSDown, SeverityError, obj, fmt.Sprintf("SDS %s is down (no liveness lease): check `cairn sds` on its host", x.Name))
		}
	}
	for _, d := range w.devices {
		if v := w.deviceView(d); d.State == model.DeviceError || v.ReportedState == model.DeviceError {
			add(AlertDeviceError, SeverityError, &objectRef{Kind: model.KindDevice, ID: d.ID, Name: d.Name},
				fmt.Sprintf("device %s is in error (%s): replace it, then remove it with `cairnctl device rm --drain %s`", d.Name, v.Error, d.Name))
		}
	}
	for _, p := range w.pools {
		if v := w.poolView(p); !v.Redundant && v.DeviceCount > 0 {
			add(AlertPoolNotRedundant, SeverityWarning, &objectRef{Kind: model.KindPool, ID: p.ID, Name: p.Name},
				fmt.Sprintf("pool %s has devices on fewer than 2 fault domains: add devices on another SDS/fault set", p.Name))
		}
	}
	if rb.DegradedGroups > 0 {
		add(AlertDataDegraded, SeverityCritical, nil, fmt.Sprintf("%d placement groups have fewer than 2 complete copies; data is served but not protected: watch `cairnctl system info`", rb.DegradedGroups))
	}
	return out
}

// observe raises and clears alerts (with their events) from w, and
// refreshes jobs. Every gateway may run it: the transactions make each
// raise, clear and job step happen once.
func (s *Server) observe(ctx context.Context) error {
	w, err := s.loadWorld(ctx)
	if err != nil {
		return err
	}
	jobs, err := s.refreshJobs(ctx, w)
	if err != nil {
		return err
	}
	s.takeOverDeviceAdds(ctx, jobs)
	s.promoteLearners(ctx)
	if err := s.consumeRefusals(ctx); err != nil {
		return err
	}
	want := w.conditions(s.prog.rebuildView(w))
	certs, err := s.publishedConditions(ctx, time.Now())
	if err != nil {
		return err
	}
	maps.Copy(want, certs)
	r, err := s.cfg.Etcd.Get(ctx, model.AlertActivePrefix, clientv3.WithPrefix())
	if err != nil {
		return err
	}
	active := map[string]string{} // condition key -> alert id
	for _, kv := range r.Kvs {
		active[strings.TrimPrefix(string(kv.Key), model.AlertActivePrefix)] = string(kv.Value)
	}
	now := time.Now().UTC()
	for k, cnd := range want {
		if _, ok := active[k]; ok {
			continue
		}
		a := cnd.Alert
		a.ID, a.Since = model.NewID(), now
		b, _ := json.Marshal(a)
		kind := EventState
		if a.Kind == AlertDataDegraded {
			kind = EventRebuild
		}
		_, err := s.commitEvent(ctx, Event{Severity: a.Severity, Kind: kind, Object: a.Object, Message: "alert raised: " + a.Message},
			[]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(model.AlertActivePrefix+k), "=", 0)},
			[]clientv3.Op{clientv3.OpPut(model.AlertActivePrefix+k, a.ID), clientv3.OpPut(model.AlertPrefix+a.ID, string(b))})
		if err != nil {
			return err
		}
	}
	for k, id := range active {
		if _, ok := want[k]; ok {
			continue
		}
		var a Alert
		if _, err := s.store.Get(ctx, model.AlertPrefix+id, &a); err != nil {
			s.cfg.Etcd.Delete(ctx, model.AlertActivePrefix+k) // a dangling index entry
			continue
		}
		a.Cleared = &now
		b, _ := json.Marshal(a)
		kind := EventState
		msg := "alert cleared: " + a.Message
		if a.Kind == AlertDataDegraded {
			kind, msg = EventRebuild, "alert cleared: every placement group has 2 complete copies again"
		}
		_, err := s.commitEvent(ctx, Event{Severity: SeverityInfo, Kind: kind, Object: a.Object, Message: msg},
			[]clientv3.Cmp{clientv3.Compare(clientv3.Value(model.AlertActivePrefix+k), "=", id)},
			[]clientv3.Op{clientv3.OpDelete(model.AlertActivePrefix + k), clientv3.OpPut(model.AlertPrefix+a.ID, string(b))})
		if err != nil {
			return err
		}
	}
	return s.pruneAlertsAndEvents(ctx, now)
}

// pruneAlertsAndEvents drops cleared alerts older than alertKeep and events
// older than eventKeep (the count bound is kept by commitEvent).
func (s *Server) pruneAlertsAndEvents(ctx context.Context, now time.Time) error {
	alerts, err := model.ListPrefix[Alert](ctx, s.store, model.AlertPrefix)
	if err != nil {
		return err
	}
	for _, a := range alerts {
		if a.Cleared != nil && now.Sub(*a.Cleared) > alertKeep {
			s.cfg.Etcd.Delete(ctx, model.AlertPrefix+a.ID)
		}
	}
	r, err := s.cfg.Etcd.Get(ctx, model.EventPrefix, clientv3.WithPrefix(), clientv3.WithLimit(eventPageSize))
	if err != nil {
		return err
	}
	for _, kv := range r.Kvs {
		var e Event
		if json.Unmarshal(kv.Value, &e) == nil && now.Sub(e.Time) <= eventKeep {
			break
		}
		s.cfg.Etcd.Delete(ctx, string(kv.Key))
	}
	return nil
}

func (s *Server) listAlerts(c *call) (int, any, error) {
	q := c.r.URL.Query()
	sev := 0
	for p := range q {
		v := q.Get(p)
		switch p {
		case "severity":
			r, ok := severityRank[v]
			if !ok {
				return 0, nil, model.WithField(errorf(http.StatusBadRequest, "severity=%q: use info, warning, error or critical (that level and above)", v), p)
			}
			sev = r
		case "active":
			if v != "true" && v != "false" {
				return 0, nil, model.WithField(errorf(http.StatusBadRequest, "active=%q: use true (not cleared) or false (cleared)", v), p)
			}
		case "object":
		default:
			return 0, nil, model.WithField(errorf(http.StatusBadRequest, "unknown filter %q; alerts accept severity, object and active", p), queryField(p))
		}
	}
	alerts, err := model.ListPrefix[Alert](c.ctx, s.store, model.AlertPrefix)
	if err != nil {
		return 0, nil, fmt.Errorf("read alerts: %v: %w", err, model.ErrUnavailable)
	}
	out := []Alert{}
	for _, a := range alerts {
		if severityRank[a.Severity] < sev || (q.Get("active") == "true" && a.Cleared != nil) || (q.Get("active") == "false" && a.Cleared == nil) {
			continue
		}
		if o := q.Get("object"); o != "" && (a.Object == nil || (a.Object.ID != o && a.Object.Name != o)) {
			continue
		}
		out = append(out, a)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Since.After(out[j].Since) })
	return http.StatusOK, out, nil
}

// Run runs the gateway's background work until ctx ends: every interval it
// observes the model (alerts, their events, job progress). Serve runs it;
// tests that build a Server with New run it themselves.
func (s *Server) Run(ctx context.Context) {
	t := time.NewTicker(s.cfg.ObserveInterval)
	defer t.Stop()
	for {
		if err := s.observe(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("gateway observer: model not observed; retrying", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
