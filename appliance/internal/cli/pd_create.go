package cli

import (
	"context"
	"flag"
	"net/http"
)

func init() {
	register(&command{object: "pd", verb: "create", args: "NAME", help: "create a protection domain (admin)",
		setup: func(fs *flag.FlagSet) func(context.Context, *session, []string) error {
			return func(ctx context.Context, s *session, args []string) error {
				if err := needArgs(args, 1, "the protection domain's name"); err != nil {
					return err
				}
				return s.show(ctx, http.MethodPost, "/protection-domains", map[string]any{"name": args[0]})
			}
		}})
}
