package cli

import (
	"context"
	"flag"
	"net/http"
)

func init() {
	register(&command{object: "user", verb: "create", args: "NAME --role admin|operator|monitor [--password-file F | --password-stdin]",
		help: "create a gateway user (admin)",
		setup: func(fs *flag.FlagSet) func(context.Context, *session, []string) error {
			var role string
			var pw passwordSource
			fs.StringVar(&role, "role", "", "admin (everything), operator (volumes, hosts, mappings) or monitor (read only)")
			fs.StringVar(&pw.file, "password-file", "", "read the new user's password from FILE")
			fs.BoolVar(&pw.stdin, "password-stdin", false, "read the new user's password from standard input")
			return func(ctx context.Context, s *session, args []string) error {
				if err := needArgs(args, 1, "the user's name"); err != nil {
					return err
				}
				if err := required("user create", map[string]string{"role": role}); err != nil {
					return err
				}
				password, err := pw.read(s, "password for new user "+args[0]+": ", "")
				if err != nil {
					return err
				}
				return s.show(ctx, http.MethodPost, "/users", map[string]any{"name": args[0], "role": role, "password": password})
			}
		}})
}
