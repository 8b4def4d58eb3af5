// Package progress carries what the engines are doing to the people
// watching: a bounded in-memory event log with live subscribers (the
// plugin's server-sent events), a structured log line per event, and
// vCenter events and tasks so the work shows in the vSphere Client.
package progress

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cairn-storage/cairn/vcenter-plugin/internal/poll"
)

// Event levels.
const (
	Info  = "info"
	Warn  = "warn"
	Error = "error"
)

// Event is one step of a job. JSON is the plugin's SSE payload.
type Event struct {
	Seq     int64     `json:"seq"`
	Time    time.Time `json:"time"`
	Job     string    `json:"job"`            // deploy:<system>, maintenance:<system>, volume:<name>
	Level   string    `json:"level"`          // info | warn | error
	Step    string    `json:"step"`           // e.g. clone, power-on, sds-maintenance
	Host    string    `json:"host,omitempty"` // ESXi host the step is about
	Message string    `json:"message"`
	// Percent and ETASeconds: the share done and the seconds left of a
	// job that knows them (a device drain); nil otherwise.
	Percent    *float64 `json:"percent,omitempty"`
	ETASeconds *float64 `json:"eta_seconds,omitempty"`
}

// Log keeps the last Capacity events and fans them out to subscribers.
// A subscriber that does not keep up loses events (it can re-read from
// the buffer by Seq); the engines never block on a slow browser.
type Log struct {
	Capacity int
	Logger   *slog.Logger

	mu     sync.Mutex
	seq    int64
	events []Event
	subs   map[chan Event]struct{}
}

// NewLog returns a log keeping capacity events.
func NewLog(capacity int, logger *slog.Logger) *Log {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Log{Capacity: capacity, Logger: logger, subs: map[chan Event]struct{}{}}
}

// Emit records an event.
func (l *Log) Emit(job, level, step, host, format string, args ...any) Event {
	return l.emit(Event{Job: job, Level: level, Step: step, Host: host, Message: fmt.Sprintf(format, args...)})
}

func (l *Log) emit(e Event) Event {
	e.Time = time.Now().UTC()
	job, level, step, host := e.Job, e.Level, e.Step, e.Host
	l.mu.Lock()
	l.seq++
	e.Seq = l.seq
	l.events = append(l.events, e)
	if over := len(l.events) - l.Capacity; over > 0 {
		l.events = append([]Event(nil), l.events[over:]...)
	}
	for ch := range l.subs {
		select {
		case ch <- e:
		default:
		}
	}
	l.mu.Unlock()
	lvl := slog.LevelInfo
	switch level {
	case Warn:
		lvl = slog.LevelWarn
	case Error:
		lvl = slog.LevelError
	}
	l.Logger.Log(context.Background(), lvl, e.Message, "job", job, "step", step, "host", host, "seq", e.Seq)
	return e
}

// EmitProgress records an event with the job's share done (0–100) and,
// when known, the seconds left.
func (l *Log) EmitProgress(job, step, host string, percent float64, eta *float64, format string, args ...any) Event {
	return l.emit(Event{Job: job, Level: Info, Step: step, Host: host, Message: fmt.Sprintf(format, args...), Percent: &percent, ETASeconds: eta})
}

// Since returns the buffered events with Seq > after, optionally of one job.
func (l *Log) Since(after int64, job string) []Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []Event
	for _, e := range l.events {
		if e.Seq > after && (job == "" || e.Job == job) {
			out = append(out, e)
		}
	}
	return out
}

// Subscribe returns a channel of new events; cancel releases it.
func (l *Log) Subscribe() (<-chan Event, func()) {
	ch := make(chan Event, 256)
	l.mu.Lock()
	l.subs[ch] = struct{}{}
	l.mu.Unlock()
	return ch, func() {
		l.mu.Lock()
		delete(l.subs, ch)
		l.mu.Unlock()
	}
}

// VCenter posts events and tasks to vCenter on behalf of the plugin.
type VCenter struct {
	C *vim25.Client
}

// Event posts a user event on entity (a host, a VM, a cluster).
func (v VCenter) Event(ctx context.Context, entity types.ManagedObjectReference, msg string) error {
	if v.C == nil {
		return nil
	}
	ev := &types.GeneralUserEvent{GeneralEvent: types.GeneralEvent{Event: types.Event{FullFormattedMessage: "Cairn: " + msg}, Message: "Cairn: " + msg}}
	switch entity.Type {
	case "HostSystem":
		ev.Host = &types.HostEventArgument{Host: entity}
	case "VirtualMachine":
		ev.Vm = &types.VmEventArgument{Vm: entity}
	}
	ev.Entity = &types.ManagedEntityEventArgument{Entity: entity}
	_, err := methods.PostEvent(ctx, v.C, &types.PostEvent{This: *v.C.ServiceContent.EventManager, EventToPost: ev})
	return err
}

// Task types the plugin's extension registers (see the extension descriptor).
const (
	TaskDeploy      = "com.cairn.vcenter.deploy"
	TaskMaintenance = "com.cairn.vcenter.maintenance"
	TaskDatastore   = "com.cairn.vcenter.datastore"
)

// StartTask creates a running vCenter task of taskType on entity. It
// fails when the plugin's extension (with that task type) is not
// registered; callers then carry on with events only.
func (v VCenter) StartTask(ctx context.Context, entity types.ManagedObjectReference, taskType string) (*object.Task, error) {
	if v.C == nil {
		return nil, fmt.Errorf("no vCenter client")
	}
	res, err := methods.CreateTask(ctx, v.C, &types.CreateTask{This: *v.C.ServiceContent.TaskManager, Obj: entity, TaskTypeId: taskType, InitiatedBy: "Cairn", Cancelable: false})
	if err != nil {
		return nil, err
	}
	t := object.NewTask(v.C, res.Returnval.Task)
	// vCenter (and vcsim, asynchronously) registers the task object just
	// after answering; retry briefly until it accepts the running state.
	err = poll.Until(ctx, 2*time.Second, 20*time.Millisecond, "the job goes on without a task in the vSphere Client; if this repeats, check vCenter's health (its vpxd log)", func() (bool, string, error) {
		err := t.SetState(ctx, types.TaskInfoStateRunning, nil, nil)
		return err == nil, fmt.Sprintf("vCenter did not accept the running state of task %s (%v)", t.Reference().Value, err), nil
	})
	if err != nil {
		return nil, err
	}
	return t, nil
}

// EndTask marks t successful (err nil) or failed with err's message.
func EndTask(ctx context.Context, t *object.Task, err error) {
	if t == nil {
		return
	}
	if err == nil {
		_ = t.SetState(ctx, types.TaskInfoStateSuccess, nil, nil)
		return
	}
	_ = t.SetState(ctx, types.TaskInfoStateError, nil, &types.LocalizedMethodFault{Fault: &types.SystemError{Reason: err.Error()}, LocalizedMessage: err.Error()})
}
