package cli

import (
	"context"
	"flag"
)

func init() {
	register(&command{object: "faultset", verb: "maintenance", args: "enter|exit NAME [--mode instant|protected] [--wait] [--timeout 30m]",
		help: "put every SDS of a fault set into maintenance at once, or take them out (operator)",
		setup: func(fs *flag.FlagSet) func(context.Context, *session, []string) error {
			var o maintenanceOpts
			o.register(fs)
			return func(ctx context.Context, s *session, args []string) error {
				return runMaintenance(ctx, s, &o, "faultset", args)
			}
		}})
}
