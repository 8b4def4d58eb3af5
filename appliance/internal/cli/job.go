package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"time"
)

var jobColumns = []column{
	{"ID", str("id")}, {"KIND", str("kind")},
	{"OBJECT", func(o map[string]any) string { return text(nested(o, "object", "name")) }},
	{"STATE", str("state")}, {"PERCENT", str("percent")}, {"ETA", str("eta_seconds")},
	{"USER", str("user")}, {"MESSAGE", str("message")},
}

func init() {
	register(&command{object: "job", verb: "ls", args: "[--state STATE]", help: "list jobs (long operations), newest first",
		setup: func(fs *flag.FlagSet) func(context.Context, *session, []string) error {
			var state string
			fs.StringVar(&state, "state", "", "only jobs in this state: queued, running, succeeded, failed")
			return func(ctx context.Context, s *session, args []string) error {
				if err := needArgs(args, 0, "no arguments"); err != nil {
					return err
				}
				path := "/jobs"
				if state != "" {
					path += "?state=" + url.QueryEscape(state)
				}
				return s.listAt(ctx, path, jobColumns)
			}
		}})
	register(&command{object: "job", verb: "info", args: "ID [--wait]", help: "show a job; --wait follows it to its end",
		setup: func(fs *flag.FlagSet) func(context.Context, *session, []string) error {
			var wait bool
			fs.BoolVar(&wait, "wait", false, "follow the job's progress until it ends")
			return func(ctx context.Context, s *session, args []string) error {
				if err := needArgs(args, 1, "the job's id"); err != nil {
					return err
				}
				if !wait {
					return s.show(ctx, http.MethodGet, "/jobs/"+url.PathEscape(args[0]), nil)
				}
				if err := s.setup(); err != nil {
					return err
				}
				return s.followJob(ctx, args[0])
			}
		}})
}

// jobPoll is how often followJob reads a running job at most; it starts
// at firstJobPoll and doubles, so a job of a moment (adding a small
// device) is seen done at once and a long one costs a read a second.
var (
	jobPoll      = time.Second
	firstJobPoll = 50 * time.Millisecond
)

// followJob prints a job's progress, one line per change, until it ends
// (with --json, the finished job); a failed job is an error.
func (s *session) followJob(ctx context.Context, id string) error {
	raw, err := s.waitJob(ctx, id)
	if raw != nil && s.opts.json {
		if perr := printJSON(s.out, raw); err == nil {
			err = perr
		}
	}
	return err
}

// waitJob follows a job to its end, printing its progress one line per
// change (not with --json), and returns the finished job; a failed job is
// an error (returned with the job).
func (s *session) waitJob(ctx context.Context, id string) (json.RawMessage, error) {
	last := ""
	poll := min(firstJobPoll, jobPoll)
	for {
		var raw json.RawMessage
		if err := s.api.call(ctx, http.MethodGet, "/jobs/"+url.PathEscape(id), nil, &raw); err != nil {
			return nil, err
		}
		var j struct {
			State      string   `json:"state"`
			Percent    float64  `json:"percent"`
			ETASeconds *float64 `json:"eta_seconds"`
			Message    string   `json:"message"`
			Error      *struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal(raw, &j); err != nil {
			return nil, fmt.Errorf("gateway answer for job %s: %w", id, err)
		}
		eta := ""
		if j.ETASeconds != nil {
			eta = fmt.Sprintf(", ETA %s", time.Duration(*j.ETASeconds)*time.Second)
		}
		line := fmt.Sprintf("job %s: %s %.1f%%%s: %s", id, j.State, j.Percent, eta, j.Message)
		if line != last && !s.opts.json {
			fmt.Fprintln(s.out, line)
			last = line
		}
		switch j.State {
		case "succeeded":
			return raw, nil
		case "failed":
			msg := j.Message
			if j.Error != nil {
				msg = j.Error.Message
			}
			return raw, fmt.Errorf("job %s failed: %s", id, msg)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("stopped following job %s (it goes on): %w; see `cairnctl job info %s`", id, ctx.Err(), id)
		case <-time.After(poll):
		}
		poll = min(2*poll, jobPoll)
	}
}

// listAt prints the list at path (with a query) as a table or JSON.
func (s *session) listAt(ctx context.Context, path string, cols []column) error {
	_, err := s.listRowsAt(ctx, path, cols)
	return err
}

// listRowsAt is listAt that also returns the rows it printed (nil with
// --json), for a command that adds a note under its table.
func (s *session) listRowsAt(ctx context.Context, path string, cols []column) ([]map[string]any, error) {
	raw, err := s.getShown(ctx, path)
	if raw == nil || err != nil {
		return nil, err
	}
	var rows []map[string]any
	if err := json.Unmarshal(raw, &rows); err != nil {
		return nil, fmt.Errorf("gateway answer for %s is not a list: %w", path, err)
	}
	printTable(s.out, cols, rows)
	return rows, nil
}

// getShown GETs path; with --json it prints the answer and returns nil (the
// command is done), else the answer for the command to render.
func (s *session) getShown(ctx context.Context, path string) (json.RawMessage, error) {
	if err := s.setup(); err != nil {
		return nil, err
	}
	var raw json.RawMessage
	if err := s.api.call(ctx, http.MethodGet, path, nil, &raw); err != nil {
		return nil, err
	}
	if s.opts.json {
		return nil, printJSON(s.out, raw)
	}
	return raw, nil
}
