package cli

import (
	"context"
	"flag"
	"net/http"
)

func init() {
	register(&command{object: "pool", verb: "create", args: "NAME --pd PD [--spare-percent N] [--pg-count N]", help: "create a storage pool (admin)",
		setup: func(fs *flag.FlagSet) func(context.Context, *session, []string) error {
			var pd string
			spare, pgs := -1, 0
			fs.StringVar(&pd, "pd", "", "protection domain (name or id)")
			fs.IntVar(&spare, "spare-percent", -1, "capacity kept free for rebuilds, at least the largest fault set's share (default 10)")
			fs.IntVar(&pgs, "pg-count", 0, "placement groups (default 256)")
			return func(ctx context.Context, s *session, args []string) error {
				if err := needArgs(args, 1, "the pool's name"); err != nil {
					return err
				}
				if err := required("pool create", map[string]string{"pd": pd}); err != nil {
					return err
				}
				body := map[string]any{"name": args[0], "protection_domain": pd}
				if spare >= 0 {
					body["spare_percent"] = spare
				}
				if pgs != 0 {
					body["pg_count"] = pgs
				}
				return s.show(ctx, http.MethodPost, "/pools", body)
			}
		}})
}
