package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
)

func init() {
	register(&command{object: "system", verb: "certificates", args: "",
		help: "list every certificate of the cluster (daemons' and gateways' HTTPS) with its expiry",
		setup: func(fs *flag.FlagSet) func(context.Context, *session, []string) error {
			return func(ctx context.Context, s *session, args []string) error {
				if err := needArgs(args, 0, "no arguments"); err != nil {
					return err
				}
				if err := s.setup(); err != nil {
					return err
				}
				var raw json.RawMessage
				if err := s.api.call(ctx, http.MethodGet, "/system/certificates", nil, &raw); err != nil {
					return err
				}
				if s.opts.json {
					return printJSON(s.out, raw)
				}
				var rows []map[string]any
				if err := json.Unmarshal(raw, &rows); err != nil {
					return fmt.Errorf("gateway answer for /system/certificates is not a list: %w", err)
				}
				printTable(s.out, []column{{"ROLE", str("role")}, {"NAME", str("name")}, {"SERIAL", str("serial")},
					{"NOT AFTER", str("not_after")}, {"DAYS LEFT", str("days_left")}, {"STATUS", str("status")}}, rows)
				due := 0
				for _, r := range rows {
					if r["status"] != "ok" {
						due++
					}
				}
				if due > 0 {
					fmt.Fprintf(s.out, "! %s expired or expire within 30 days: renew them (how: `cairnctl alert ls --active`)\n", count(due, "certificate"))
				}
				return nil
			}
		}})
}
