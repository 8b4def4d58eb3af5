package cli

import (
	"context"
	"flag"
	"net/http"
	"net/url"
)

// "volume qos": set or remove a volume's limits, live (PATCH /volumes/{ref}).
func init() {
	register(&command{object: "volume", verb: "qos", args: "NAME|ID [--iops-limit N] [--bandwidth-limit SIZE]",
		help: "set or remove a volume's QoS limits, live (0 removes a limit)",
		setup: func(fs *flag.FlagSet) func(context.Context, *session, []string) error {
			var iops int64
			var bwText string
			fs.Int64Var(&iops, "iops-limit", 0, "I/O requests per second; 0: unlimited (or the pool's per-GiB rule)")
			fs.StringVar(&bwText, "bandwidth-limit", "", "bytes per second, e.g. 100MiB; 0: unlimited (or the pool's per-GiB rule)")
			return func(ctx context.Context, s *session, args []string) error {
				if err := needArgs(args, 1, "the volume's name or id"); err != nil {
					return err
				}
				body := map[string]any{}
				given(fs, "iops-limit", func() { body["iops_limit"] = iops })
				var bwErr error
				given(fs, "bandwidth-limit", func() {
					var bw int64
					if bwText != "0" {
						bw, bwErr = parseSize(bwText)
					}
					body["bandwidth_limit"] = bw
				})
				if bwErr != nil {
					return usagef("volume qos: --bandwidth-limit: %v", bwErr)
				}
				if len(body) == 0 {
					return usagef("volume qos: give --iops-limit and/or --bandwidth-limit")
				}
				return s.show(ctx, http.MethodPatch, "/volumes/"+url.PathEscape(args[0]), body)
			}
		}})
	register(&command{object: "stats", verb: "show", args: "[pools|volumes|sds|devices|hosts NAME|ID]",
		help: "I/O statistics: IOPS, bandwidth, mean and p99 latency over the last interval (the system without arguments)",
		setup: func(fs *flag.FlagSet) func(context.Context, *session, []string) error {
			return func(ctx context.Context, s *session, args []string) error {
				switch len(args) {
				case 0:
					return s.show(ctx, http.MethodGet, "/statistics", nil)
				case 2:
					return s.show(ctx, http.MethodGet, "/statistics/"+url.PathEscape(args[0])+"/"+url.PathEscape(args[1]), nil)
				}
				return usagef("stats show: give nothing (the system) or a kind and an object: stats show volumes vol1")
			}
		}})
}
