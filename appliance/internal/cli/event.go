package cli

import (
	"context"
	"flag"
	"net/url"
	"strconv"
)

func init() {
	register(&command{object: "event", verb: "ls", args: "[--after ID] [--severity LEVEL] [--object NAME|ID] [--kind KIND] [--limit N]",
		help: "list events, oldest first (the audit log is --kind audit)",
		setup: func(fs *flag.FlagSet) func(context.Context, *session, []string) error {
			var after, severity, object, kind string
			var limit int
			fs.StringVar(&after, "after", "", "only events after this event id")
			fs.StringVar(&severity, "severity", "", "that level and above: info, warning, error, critical")
			fs.StringVar(&object, "object", "", "only events about this object (name or id)")
			fs.StringVar(&kind, "kind", "", "audit, login, login-throttled, state, rebuild or alert")
			fs.IntVar(&limit, "limit", 0, "at most this many (default 100, at most 1000)")
			return func(ctx context.Context, s *session, args []string) error {
				if err := needArgs(args, 0, "no arguments"); err != nil {
					return err
				}
				q := url.Values{}
				for k, v := range map[string]string{"after": after, "severity": severity, "object": object, "kind": kind} {
					if v != "" {
						q.Set(k, v)
					}
				}
				if limit > 0 {
					q.Set("limit", strconv.Itoa(limit))
				}
				path := "/events"
				if len(q) > 0 {
					path += "?" + q.Encode()
				}
				return s.listAt(ctx, path, []column{{"ID", str("id")}, {"TIME", str("time")}, {"SEVERITY", str("severity")},
					{"KIND", str("kind")}, {"MESSAGE", str("message")}})
			}
		}})
	register(&command{object: "alert", verb: "ls", args: "[--active]", help: "list alerts, newest first",
		setup: func(fs *flag.FlagSet) func(context.Context, *session, []string) error {
			var active bool
			fs.BoolVar(&active, "active", false, "only alerts not cleared")
			return func(ctx context.Context, s *session, args []string) error {
				if err := needArgs(args, 0, "no arguments"); err != nil {
					return err
				}
				path := "/alerts"
				if active {
					path += "?active=true"
				}
				return s.listAt(ctx, path, []column{{"SEVERITY", str("severity")}, {"KIND", str("kind")},
					{"OBJECT", func(o map[string]any) string { return text(nested(o, "object", "name")) }},
					{"SINCE", str("since")}, {"CLEARED", str("cleared")}, {"MESSAGE", str("message")}})
			}
		}})
}
