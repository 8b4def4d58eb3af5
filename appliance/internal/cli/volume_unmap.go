package cli

import (
	"context"
	"flag"
	"net/http"
	"net/url"
)

func init() {
	register(&command{object: "volume", verb: "unmap", args: "NAME|ID --host HOST", help: "remove a volume's mapping to a host",
		setup: func(fs *flag.FlagSet) func(context.Context, *session, []string) error {
			var host string
			fs.StringVar(&host, "host", "", "host (name or id)")
			return func(ctx context.Context, s *session, args []string) error {
				if err := needArgs(args, 1, "the volume's name or id"); err != nil {
					return err
				}
				if err := required("volume unmap", map[string]string{"host": host}); err != nil {
					return err
				}
				return s.show(ctx, http.MethodPost, "/volumes/"+url.PathEscape(args[0])+"/unmap", map[string]any{"host": host})
			}
		}})
}
