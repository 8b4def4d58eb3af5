package cli

import (
	"context"
	"flag"
	"net/http"
	"net/url"
)

func init() {
	register(&command{object: "volume", verb: "map", args: "NAME|ID --host HOST [--read-only] [--iops-limit N] [--bandwidth-limit SIZE]",
		help: "expose a volume to a host (again: change the mapping's QoS limits)",
		setup: func(fs *flag.FlagSet) func(context.Context, *session, []string) error {
			var host string
			var ro bool
			fs.StringVar(&host, "host", "", "host (name or id), see `cairnctl host ls`")
			fs.BoolVar(&ro, "read-only", false, "map read-only")
			var iops int64
			var bwText string
			fs.Int64Var(&iops, "iops-limit", 0, "I/Os per second on this host only (NBD); 0: none")
			fs.StringVar(&bwText, "bandwidth-limit", "0", "bytes per second on this host only (NBD), e.g. 50MiB; 0: none")
			return func(ctx context.Context, s *session, args []string) error {
				if err := needArgs(args, 1, "the volume's name or id"); err != nil {
					return err
				}
				if err := required("volume map", map[string]string{"host": host}); err != nil {
					return err
				}
				bw, err := parseSize(bwText)
				if err != nil {
					return usagef("volume map: --bandwidth-limit: %v", err)
				}
				body := map[string]any{"host": host, "read_only": ro}
				if iops != 0 || bw != 0 {
					body["iops_limit"], body["bandwidth_limit"] = iops, bw
				}
				return s.show(ctx, http.MethodPost, "/volumes/"+url.PathEscape(args[0])+"/map", body)
			}
		}})
}
