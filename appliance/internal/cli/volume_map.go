package cli

import (
	"context"
	"flag"
	"net/http"
	"net/url"
)

func init() {
	register(&command{object: "volume", verb: "map", args: "NAME|ID --host HOST [--read-only]", help: "expose a volume to a host",
		setup: func(fs *flag.FlagSet) func(context.Context, *session, []string) error {
			var host string
			var ro bool
			fs.StringVar(&host, "host", "", "host (name or id), see `cairnctl host ls`")
			fs.BoolVar(&ro, "read-only", false, "map read-only")
			return func(ctx context.Context, s *session, args []string) error {
				if err := needArgs(args, 1, "the volume's name or id"); err != nil {
					return err
				}
				if err := required("volume map", map[string]string{"host": host}); err != nil {
					return err
				}
				return s.show(ctx, http.MethodPost, "/volumes/"+url.PathEscape(args[0])+"/map", map[string]any{"host": host, "read_only": ro})
			}
		}})
}
