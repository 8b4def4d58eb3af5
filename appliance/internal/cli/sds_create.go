package cli

import (
	"context"
	"flag"
	"net/http"
)

func init() {
	register(&command{object: "sds", verb: "create", args: "NAME --pd PD --address HOST:PORT [--fault-set FS]", help: "add an SDS (data server) (admin)",
		setup: func(fs *flag.FlagSet) func(context.Context, *session, []string) error {
			var pd, addr, faultSet string
			fs.StringVar(&pd, "pd", "", "protection domain (name or id)")
			fs.StringVar(&addr, "address", "", "the SDS's data-path address HOST:PORT")
			fs.StringVar(&faultSet, "fault-set", "", "fault set (default: the SDS is its own fault domain)")
			return func(ctx context.Context, s *session, args []string) error {
				if err := needArgs(args, 1, "the SDS's name"); err != nil {
					return err
				}
				if err := required("sds create", map[string]string{"pd": pd, "address": addr}); err != nil {
					return err
				}
				body := map[string]any{"name": args[0], "protection_domain": pd, "address": addr}
				if faultSet != "" {
					body["fault_set"] = faultSet
				}
				return s.show(ctx, http.MethodPost, "/sds", body)
			}
		}})
}
