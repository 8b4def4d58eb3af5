package cli

import (
	"context"
	"flag"
)

func init() {
	register(&command{object: "sds", verb: "maintenance", args: "enter|exit NAME [--mode instant|protected] [--wait] [--timeout 30m]",
		help: "put an SDS into maintenance or take it out (operator)",
		setup: func(fs *flag.FlagSet) func(context.Context, *session, []string) error {
			var o maintenanceOpts
			o.register(fs)
			return func(ctx context.Context, s *session, args []string) error {
				return runMaintenance(ctx, s, &o, "sds", args)
			}
		}})
}
