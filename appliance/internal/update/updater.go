package update

// The updater (`cairn updater`, cairn-updater.service on every SVM) carries
// out the orders the gateway stores for its SVM: it reads its order, and
// when the order is new (its etcd revision is not the one its state
// records), it fetches the bundle from etcd, verifies it and runs the same
// Installer.Update as `cairn update`, writing its State at each step.
//
// Restarting itself: the updater is one of the Cairn units, and a process
// that restarts its own unit is killed by that restart half way through. So
// its Installer skips cairn-updater.service; once every other unit is
// healthy on the new version, the updater records "done" and Run returns
// nil: the process exits, and systemd (Restart=always) starts the unit
// again from /usr/local/bin/cairn, which is the new version now. The new
// updater reads its state, sees the order's revision carried out, and only
// updates "running". An updater that stops during an update (the SVM
// reboots) finds the state downloading or installing at its next start and
// records the update as failed, with the version that runs: the order is
// given again by whoever gave it.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/cairn-storage/cairn/appliance/internal/buildinfo"
)

// Updater is one SVM's updater.
type Updater struct {
	Name      string // the SVM's name (its host name, CAIRN_HOSTNAME)
	Store     Store
	Installer *Installer
	Poll      time.Duration // how often the order is read
	Log       *slog.Logger
}

// Run carries out orders until ctx ends (then it returns ctx's error) or
// until an update switched this SVM to a new version (then it returns nil,
// and the caller exits so that the updater restarts on that version).
func (u *Updater) Run(ctx context.Context) error {
	st, err := u.start(ctx)
	if err != nil {
		return err
	}
	for {
		o, rev, err := u.Store.Order(ctx, u.Name)
		switch {
		case errors.Is(err, ErrNotFound):
		case err != nil:
			u.Log.Debug("read order; retrying", "err", err)
		case rev != st.Order:
			if switched := u.carryOut(ctx, &st, o, rev); switched {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(u.Poll):
		}
	}
}

// start reads this SVM's state (waiting for etcd) and records the version
// it runs.
func (u *Updater) start(ctx context.Context) (State, error) {
	for {
		st, err := u.Store.State(ctx, u.Name)
		if err == nil || errors.Is(err, ErrNotFound) {
			if errors.Is(err, ErrNotFound) {
				st = State{State: StateIdle}
			}
			st.Name, st.Running = u.Name, buildinfo.Version()
			if st.State == StateDownloading || st.State == StateInstalling {
				st.State = StateFailed
				st.Message = fmt.Sprintf("the update to %s was interrupted (the updater stopped during it); %s runs; order it again", st.Ordered, st.Running)
			}
			u.put(ctx, st)
			u.Log.Info("updater started", "svm", u.Name, "running", st.Running, "state", st.State)
			return st, nil
		}
		u.Log.Debug("read state; retrying", "err", err)
		select {
		case <-ctx.Done():
			return st, ctx.Err()
		case <-time.After(u.Poll):
		}
	}
}

// put writes st, retrying for a minute (an MDM restarted by the update
// may be away a moment).
func (u *Updater) put(ctx context.Context, st State) {
	deadline := time.Now().Add(time.Minute)
	for {
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := u.Store.PutState(pctx, st)
		cancel()
		if err == nil || ctx.Err() != nil {
			return
		}
		if time.Now().After(deadline) {
			u.Log.Warn("state not written", "state", st.State, "err", err)
			return
		}
		time.Sleep(time.Second)
	}
}

// carryOut updates to o.Version; switched is true when the new version
// runs (the updater must restart).
func (u *Updater) carryOut(ctx context.Context, st *State, o Order, rev int64) (switched bool) {
	st.Order, st.Ordered = rev, o.Version
	set := func(state, format string, a ...any) {
		st.State, st.Message = state, fmt.Sprintf(format, a...)
		u.Log.Info("update", "svm", u.Name, "version", o.Version, "state", state, "message", st.Message)
		u.put(ctx, *st)
	}
	if o.Version == st.Running {
		set(StateDone, "already runs %s", o.Version)
		return false
	}
	set(StateDownloading, "fetching bundle %s", o.Version)
	b, err := u.Store.Bundle(ctx, o.Version)
	if err != nil {
		set(StateFailed, "fetch bundle %s: %v; %s runs", o.Version, err, st.Running)
		return false
	}
	set(StateInstalling, "installing %s", o.Version)
	in := *u.Installer
	in.Skip = UpdaterUnit
	in.Progress = func(msg string) { st.Message = msg; u.put(ctx, *st) }
	res, err := in.Update(ctx, b)
	switch {
	case errors.Is(err, ErrRolledBack):
		set(StateRolledBack, "%v", err)
		return false
	case err != nil:
		set(StateFailed, "%v", err)
		return false
	}
	set(StateDone, "%d units run %s (%s kept for a roll back); the updater restarts on it", len(res.Units), res.To, res.From)
	return true
}
