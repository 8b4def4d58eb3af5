package cli

import (
	"context"
	"flag"
	"net/http"
)

func init() {
	register(&command{object: "system", verb: "bootstrap", args: "--name NAME", help: "create the system (once, admin)",
		setup: func(fs *flag.FlagSet) func(context.Context, *session, []string) error {
			var name string
			fs.StringVar(&name, "name", "", "system name (required)")
			return func(ctx context.Context, s *session, args []string) error {
				if len(args) == 1 && name == "" {
					name = args[0]
				} else if err := needArgs(args, 0, "no arguments besides --name"); err != nil {
					return err
				}
				if name == "" {
					return usagef("system bootstrap: give --name NAME")
				}
				return s.show(ctx, http.MethodPost, "/system/bootstrap", map[string]string{"name": name})
			}
		}})
}
