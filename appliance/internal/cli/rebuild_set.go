package cli

import (
	"context"
	"flag"
	"net/http"
	"net/url"
	"strings"

	"github.com/cairn-storage/cairn/appliance/internal/model"
)

// "pool set" and "sds set": rebuild pacing (PATCH /pools/{ref}, /sds/{ref}).
// Only the flags given are sent; the gateway validates them.
func init() {
	register(&command{object: "pool", verb: "set", args: "NAME --rebuild-policy POLICY [--rebuild-max-io N]",
		help: "change a pool's rebuild policy (admin): how fast rebuild, resync and rebalance copy data on each SDS",
		setup: func(fs *flag.FlagSet) func(context.Context, *session, []string) error {
			var policy string
			var maxIO int
			fs.StringVar(&policy, "rebuild-policy", "", "one of "+strings.Join(model.RebuildPolicies, ", ")+
				" (favor-app-io: one fill I/O at a time while the SDS serves application I/O, full speed when idle)")
			fs.IntVar(&maxIO, "rebuild-max-io", 0, "fill I/Os (1 MiB each) in flight per SDS, with limit-concurrent-io")
			return func(ctx context.Context, s *session, args []string) error {
				if err := needArgs(args, 1, "the pool's name or id"); err != nil {
					return err
				}
				body := map[string]any{}
				given(fs, "rebuild-policy", func() { body["rebuild_policy"] = policy })
				given(fs, "rebuild-max-io", func() { body["rebuild_max_io"] = maxIO })
				if len(body) == 0 {
					return usagef("pool set: give --rebuild-policy and/or --rebuild-max-io")
				}
				return s.show(ctx, http.MethodPatch, "/pools/"+url.PathEscape(args[0]), body)
			}
		}})
	register(&command{object: "sds", verb: "set", args: "NAME --rebuild-mbps N",
		help: "cap the rebuild, resync and rebalance traffic an SDS sends (admin)",
		setup: func(fs *flag.FlagSet) func(context.Context, *session, []string) error {
			var mbps int
			fs.IntVar(&mbps, "rebuild-mbps", 0, "cap in MB/s (10^6 bytes per second); 0 removes the cap")
			return func(ctx context.Context, s *session, args []string) error {
				if err := needArgs(args, 1, "the SDS's name or id"); err != nil {
					return err
				}
				body := map[string]any{}
				given(fs, "rebuild-mbps", func() { body["rebuild_mbps"] = mbps })
				if len(body) == 0 {
					return usagef("sds set: give --rebuild-mbps")
				}
				return s.show(ctx, http.MethodPatch, "/sds/"+url.PathEscape(args[0]), body)
			}
		}})
}

// given runs f if the flag name was set on the command line.
func given(fs *flag.FlagSet, name string, f func()) {
	fs.Visit(func(fl *flag.Flag) {
		if fl.Name == name {
			f()
		}
	})
}
