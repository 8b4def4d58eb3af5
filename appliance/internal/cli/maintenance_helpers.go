package cli

// Shared by `sds maintenance` and `faultset maintenance`: the request and
// the --wait loop that follows the cluster until the change is complete.

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// maintenanceOpts are the flags of the maintenance commands.
type maintenanceOpts struct {
	mode    string
	wait    bool
	timeout time.Duration
	// poll is the progress interval (tests shorten it).
	poll time.Duration
}

func (o *maintenanceOpts) register(fs *flag.FlagSet) {
	fs.StringVar(&o.mode, "mode", "", "enter: instant (copies go away at once, only changed chunks resync on return) or protected (extra copies are built first)")
	fs.BoolVar(&o.wait, "wait", false, "wait until it is safe to shut the SDS down (enter) or until its data is resynced (exit), showing progress")
	fs.DurationVar(&o.timeout, "timeout", 30*time.Minute, "give up waiting after this long (the request itself stays in effect)")
	o.poll = time.Second
}

// maintSDS is what the wait loop reads of an SDS view.
type maintSDS struct {
	Name        string `json:"name"`
	Up          bool   `json:"up"`
	Maintenance struct {
		Mode  string `json:"mode"`
		State string `json:"state"`
	} `json:"maintenance"`
}

// rebuildInfo is GET /system's "rebuild".
type rebuildInfo struct {
	DegradedGroups    int      `json:"degraded_groups"`
	RebuildingGroups  int      `json:"rebuilding_groups"`
	ResyncingGroups   int      `json:"resyncing_groups"`
	RebalancingGroups int      `json:"rebalancing_groups"`
	PendingBytes      float64  `json:"pending_bytes"`
	DoneBytes         float64  `json:"done_bytes"`
	Rate              float64  `json:"rate_bytes_per_second"`
	Percent           float64  `json:"percent"`
	ETA               *float64 `json:"eta_seconds"`
}

// summary is one line: groups by condition, percent, rate, ETA.
func (r rebuildInfo) summary() string {
	if r.DegradedGroups == 0 && r.RebuildingGroups == 0 && r.ResyncingGroups == 0 && r.RebalancingGroups == 0 && r.PendingBytes == 0 {
		return "idle: every placement group has 2 ready copies"
	}
	var parts []string
	for _, p := range []struct {
		n    int
		noun string
	}{{r.DegradedGroups, "degraded"}, {r.RebuildingGroups, "rebuilding"}, {r.ResyncingGroups, "resyncing"}, {r.RebalancingGroups, "rebalancing"}} {
		if p.n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", p.n, p.noun))
		}
	}
	s := "groups: none in progress"
	if len(parts) > 0 {
		s = "groups: " + strings.Join(parts, ", ")
	}
	if r.PendingBytes == 0 {
		return s + "; nothing being copied"
	}
	eta := "unknown"
	if r.ETA != nil {
		eta = (time.Duration(*r.ETA) * time.Second).String()
	}
	return fmt.Sprintf("%s; %.1f%% done, %s/s, %s pending, ETA %s", s, r.Percent, formatBytes(r.Rate), formatBytes(r.PendingBytes), eta)
}

// runMaintenance sends the request for one SDS or a fault set, prints the
// answer and, with --wait, follows progress until done.
func runMaintenance(ctx context.Context, s *session, o *maintenanceOpts, object string, args []string) error {
	if len(args) != 2 || (args[0] != "enter" && args[0] != "exit") {
		return usagef("expected enter|exit and the %s's name, got %q", object, args)
	}
	action, name := args[0], args[1]
	path := "/sds/"
	if object == "faultset" {
		path = "/fault-sets/"
	}
	path += url.PathEscape(name) + "/maintenance"
	method := http.MethodDelete
	var body any
	if action == "enter" {
		if o.mode == "" {
			return usagef("%s maintenance enter: give --mode instant or --mode protected", object)
		}
		method, body = http.MethodPost, map[string]string{"mode": o.mode}
	} else if o.mode != "" {
		return usagef("%s maintenance exit takes no --mode", object)
	}
	if o.timeout <= 0 {
		return usagef("--timeout must be positive")
	}
	if err := s.setup(); err != nil {
		return err
	}
	var raw json.RawMessage
	if err := s.api.call(ctx, method, path, body, &raw); err != nil {
		return fmt.Errorf("%s maintenance %s %s: %w", object, action, name, err)
	}
	var members []string
	if object == "faultset" {
		var list []map[string]any
		if err := json.Unmarshal(raw, &list); err != nil {
			return fmt.Errorf("gateway answer is not a list of SDSs: %w", err)
		}
		for _, m := range list {
			members = append(members, text(m["name"]))
		}
		if !o.wait || s.opts.json {
			if s.opts.json {
				if err := printJSON(s.out, raw); err != nil {
					return err
				}
			} else {
				printTable(s.out, objectNamed("sds").columns, list)
			}
		}
	} else {
		var one map[string]any
		if err := json.Unmarshal(raw, &one); err != nil {
			return fmt.Errorf("gateway answer is not an SDS: %w", err)
		}
		members = []string{text(one["name"])}
		if s.opts.json {
			if err := printJSON(s.out, raw); err != nil {
				return err
			}
		} else if !o.wait {
			if err := printObject(s.out, raw); err != nil {
				return err
			}
		}
	}
	if !o.wait {
		if !s.opts.json {
			if action == "enter" {
				fmt.Fprintf(s.env.Stderr, "follow it with `cairnctl sds info NAME` (maintenance.state in-maintenance: safe to shut down) or use --wait\n")
			} else {
				fmt.Fprintf(s.env.Stderr, "its copies now resync; follow it with `cairnctl system info` or use --wait\n")
			}
		}
		return nil
	}
	return waitMaintenance(ctx, s, o, action, object, name, members)
}

// waitMaintenance polls GET /system and the SDS views every o.poll, prints
// progress to stderr when it changes (and every 10 s), and returns when
// enter: every member is in-maintenance; exit: no member resyncs and no
// placement group is degraded.
func waitMaintenance(ctx context.Context, s *session, o *maintenanceOpts, action, object, name string, members []string) error {
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	start := time.Now()
	var last string
	var lastAt time.Time
	for {
		var sys struct {
			Rebuild rebuildInfo `json:"rebuild"`
		}
		err := s.api.call(ctx, http.MethodGet, "/system", nil, &sys)
		var states []string
		done := err == nil
		for _, m := range members {
			if err != nil {
				break
			}
			var v maintSDS
			if err = s.api.call(ctx, http.MethodGet, "/sds/"+url.PathEscape(m), nil, &v); err != nil {
				break
			}
			st := v.Maintenance.State
			if st == "" {
				st = "normal"
			}
			if !v.Up {
				st += " (down)"
			}
			states = append(states, v.Name+": "+st)
			if action == "enter" && v.Maintenance.State != "in-maintenance" {
				done = false
			}
			if action == "exit" && v.Maintenance.State != "" {
				done = false
			}
		}
		if err == nil && action == "exit" && (sys.Rebuild.DegradedGroups > 0 || sys.Rebuild.ResyncingGroups > 0) {
			done = false
		}
		if err != nil {
			if ctx.Err() == nil {
				// A gateway hiccup during a long wait is not the end:
				// report it and keep polling until the timeout.
				fmt.Fprintf(s.env.Stderr, "[%s] cannot read progress: %v\n", elapsed(start), err)
			}
		} else {
			line := strings.Join(states, ", ") + "; " + sys.Rebuild.summary()
			if line != last || time.Since(lastAt) >= 10*time.Second {
				fmt.Fprintf(s.env.Stderr, "[%s] %s\n", elapsed(start), line)
				last, lastAt = line, time.Now()
			}
			if done {
				if !s.opts.json {
					if action == "enter" {
						fmt.Fprintf(s.out, "%s %s is in maintenance: safe to shut down; afterwards run `cairnctl %s maintenance exit %s`\n", object, name, object, name)
					} else {
						fmt.Fprintf(s.out, "%s %s is out of maintenance and its data is resynced\n", object, name)
					}
				}
				return nil
			}
		}
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				if action == "enter" {
					return fmt.Errorf("%s %s is not in maintenance yet after %s (last: %s): do NOT shut it down; the request stays in effect: check `cairnctl system info` (rebuilds need live partner SDSs and spare capacity) and run `cairnctl %s maintenance enter %s --mode %s --wait` again to keep waiting, or `cairnctl %s maintenance exit %s` to cancel",
						object, name, o.timeout, last, object, name, o.mode, object, name)
				}
				return fmt.Errorf("%s %s has not finished resyncing after %s (last: %s): check that it is up (`cairnctl sds ls`) and watch `cairnctl system info`",
					object, name, o.timeout, last)
			}
			return ctx.Err()
		case <-time.After(o.poll):
		}
	}
}

func elapsed(start time.Time) string { return time.Since(start).Round(time.Second).String() }
