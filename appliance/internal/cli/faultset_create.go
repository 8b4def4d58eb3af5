package cli

import (
	"context"
	"flag"
	"net/http"
)

func init() {
	register(&command{object: "faultset", verb: "create", args: "NAME --pd PD", help: "create a fault set: SDSs that may fail together (admin)",
		setup: func(fs *flag.FlagSet) func(context.Context, *session, []string) error {
			var pd string
			fs.StringVar(&pd, "pd", "", "protection domain (name or id)")
			return func(ctx context.Context, s *session, args []string) error {
				if err := needArgs(args, 1, "the fault set's name"); err != nil {
					return err
				}
				if err := required("faultset create", map[string]string{"pd": pd}); err != nil {
					return err
				}
				return s.show(ctx, http.MethodPost, "/fault-sets", map[string]any{"name": args[0], "protection_domain": pd})
			}
		}})
}
