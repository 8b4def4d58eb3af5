// Stopping a roll (Engine.Stop). What is safe: a stop never leaves a host
// in maintenance mode, an SVM off or an SDS in maintenance. The roll stops
// between steps; of the steps that can wait long, only two are cut short,
// because cutting them loses nothing: the wait for SDSs to finish entering
// protected maintenance (their copies stay where they are), and the wait
// for the operator's patch confirmation. A patch hook, an SVM shutdown and
// a host entering maintenance mode run to their end.
//
// Then, by where the roll was in its unit (a host or a fault set):
//   - nothing taken away yet (health checked at most): it stops at once;
//     a resume starts with this unit, health check included;
//   - SDS maintenance entered, patch not done: the unit is brought back
//     unpatched (host-exit, svm-power-on, sds-exit, resync), counted as
//     done and listed in State.Unpatched; a resume continues with the
//     next unit;
//   - patched: it finishes bringing the unit back, and stops before the next.
// The job ends with ErrStopped (the server's job state "stopped").

package maintenance

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
)

// ErrStopped ends a roll stopped by the operator (Stop), the unit it was
// on brought back.
var ErrStopped = errors.New("rolling maintenance stopped by the operator")

// interruptible says whether a stop cuts step short (see the file
// comment): the wait for SDS maintenance, and the patch step only while
// it waits for the operator (a hook or Patch function runs to its end).
func (r *roll) interruptible(step string) bool {
	switch step {
	case "sds-maintenance":
		return true
	case "patch":
		return r.Patch == nil && len(r.st.Request.Hook) == 0
	}
	return false
}

// upSteps bring a unit back, in order.
var upSteps = []string{"host-exit", "svm-power-on", "sds-exit", "resync"}

// stopper is a running roll's stop switch and where the roll is.
type stopper struct {
	mu   sync.Mutex
	ch   chan struct{}
	once sync.Once
	unit []string
	step string
	cut  bool // a stop cuts step short
	done []string
	plan *StopPlan
}

func (s *stopper) requested() bool {
	select {
	case <-s.ch:
		return true
	default:
		return false
	}
}

// context is ctx cancelled also when a stop is requested.
func (s *stopper) context(ctx context.Context) (context.Context, context.CancelFunc) {
	c, cancel := context.WithCancel(ctx)
	go func() {
		select {
		case <-s.ch:
			cancel()
		case <-c.Done():
		}
	}()
	return c, cancel
}

func (s *stopper) at(unit []string, step string, done []string, cut bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.unit, s.step, s.cut, s.done = append([]string(nil), unit...), step, cut, append([]string(nil), done...)
}

// StopPlan says what a stop will do (the answer of Stop).
type StopPlan struct {
	Hosts []string `json:"hosts"` // the unit the roll is on
	Step  string   `json:"step"`  // the step it is in
	// Actions: what the roll does before it stops, in order, for people.
	Actions []string `json:"actions"`
	// Unpatched: the unit goes back without its patch (roll it again later).
	Unpatched bool `json:"unpatched"`
}

func has(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// Stop asks the running roll of system to stop safely and says what it
// will do; asking again answers the same. Error when no roll runs.
func (e *Engine) Stop(system string) (*StopPlan, error) {
	e.mu.Lock()
	s := e.running[system]
	e.mu.Unlock()
	if s == nil {
		return nil, fmt.Errorf("no rolling maintenance of %s is running: nothing to stop", system)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.plan != nil {
		return s.plan, nil
	}
	hosts := strings.Join(s.unit, ", ")
	p := &StopPlan{Hosts: s.unit, Step: s.step}
	touched := has(s.done, "sds-maintenance") || s.step == "sds-maintenance"
	patched := has(s.done, "patch") || (s.step == "patch" && !s.cut)
	switch {
	case len(s.unit) == 0 || !touched:
		p.Actions = []string{fmt.Sprintf("nothing has been taken away from %s yet: stop at once", orAll(hosts)),
			"a resume starts again with " + orAll(hosts) + ", health check first"}
	case !patched:
		p.Unpatched = true
		switch s.step {
		case "sds-maintenance", "patch":
			p.Actions = append(p.Actions, "stop waiting in step "+s.step)
		default:
			p.Actions = append(p.Actions, "let step "+s.step+" finish (it is not safe to cut short)")
		}
		p.Actions = append(p.Actions,
			"bring "+hosts+" back without patching: exit vSphere maintenance mode, power on the SVM and wait for it, take the SDS out of maintenance, wait for the resync",
			"a resume continues with the next host; roll "+hosts+" again later to patch it")
	default:
		if s.step == "patch" {
			p.Actions = append(p.Actions, "let the patch of "+hosts+" finish (a patch command is never cut short)")
		}
		p.Actions = append(p.Actions, "finish bringing "+hosts+" back (patched): "+strings.Join(upSteps, ", "),
			"stop before the next host; a resume continues with it")
	}
	s.plan = p
	s.once.Do(func() { close(s.ch) })
	return p, nil
}

func orAll(hosts string) string {
	if hosts == "" {
		return "the first host"
	}
	return hosts
}

func (e *Engine) register(system string) (*stopper, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.running == nil {
		e.running = map[string]*stopper{}
	}
	if e.running[system] != nil {
		return nil, fmt.Errorf("a rolling maintenance of %s is already running", system)
	}
	s := &stopper{ch: make(chan struct{})}
	e.running[system] = s
	return s, nil
}

func (e *Engine) unregister(system string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.running, system)
}

// stopUnit ends the unit at a stop request; cut is the step a stop cut
// short ("" when it came between steps). It returns nil once the unit is
// back (the caller counts it done), ErrStopped when it was never touched.
func (r *roll) stopUnit(ctx context.Context, unit []string, cut string) error {
	hosts := strings.Join(unit, ", ")
	touched := r.st.Stopping || r.done("sds-maintenance") || cut == "sds-maintenance"
	if !touched {
		r.st.DoneSteps = nil
		if err := r.st.save(r.StateDir); err != nil {
			return err
		}
		return fmt.Errorf("%w before touching %s; a resume starts with them", ErrStopped, hosts)
	}
	r.st.Stopping = true
	if err := r.st.save(r.StateDir); err != nil {
		return err
	}
	patched := r.done("patch")
	if !patched {
		r.info("roll", unit, "stop requested: bringing %s back without patching", hosts)
	}
	steps := map[string]func(context.Context, []string) error{
		"host-exit": r.exitHost, "svm-power-on": r.powerOnSVM, "sds-exit": r.exitSDS, "resync": r.resync,
	}
	for _, name := range upSteps {
		if r.done(name) {
			continue
		}
		r.stop.at(unit, name, r.st.DoneSteps, false)
		r.info(name, unit, "%s: started (stopping)", name)
		if err := steps[name](ctx, unit); err != nil {
			// Not stopped: the unit is not back. The error says what to
			// do; a resume carries on bringing it back.
			return fmt.Errorf("stopping: %s: %w", name, err)
		}
		if err := r.mark(name); err != nil {
			return err
		}
		r.info(name, unit, "%s: done", name)
	}
	if !patched {
		r.st.Unpatched = append(r.st.Unpatched, unit)
	}
	r.st.Stopping = false
	return nil // the caller counts the unit done and saves
}

// stopped is the error a stopped roll ends with, after unit.
func (r *roll) stopped(unit []string) error {
	hosts := strings.Join(unit, ", ")
	what := "patched and back"
	if n := len(r.st.Unpatched); n > 0 && strings.Join(r.st.Unpatched[n-1], ", ") == hosts {
		what = "back, NOT patched: roll them again later"
	}
	next := "nothing: every unit is done"
	if r.st.DoneUnits < len(r.st.Units) {
		next = strings.Join(r.st.Units[r.st.DoneUnits], ", ")
	}
	return fmt.Errorf("%w: hosts %s %s; a resume continues with %s", ErrStopped, hosts, what, next)
}
