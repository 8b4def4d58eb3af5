package cli

import (
	"context"
	"flag"
	"fmt"
)

func init() {
	register(&command{object: "system", verb: "certificates", args: "",
		help: "list every certificate of the cluster (daemons' and gateways' HTTPS) with its expiry",
		setup: func(fs *flag.FlagSet) func(context.Context, *session, []string) error {
			return func(ctx context.Context, s *session, args []string) error {
				if err := needArgs(args, 0, "no arguments"); err != nil {
					return err
				}
				rows, err := s.listRowsAt(ctx, "/system/certificates", []column{{"ROLE", str("role")}, {"NAME", str("name")},
					{"SERIAL", str("serial")}, {"NOT AFTER", str("not_after")}, {"DAYS LEFT", str("days_left")}, {"STATUS", str("status")}})
				if err != nil {
					return err
				}
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
