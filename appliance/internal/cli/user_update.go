package cli

import (
	"context"
	"flag"
	"net/http"
	"net/url"
)

func init() {
	register(&command{object: "user", verb: "update", args: "NAME [--role ROLE] [--password-file F | --password-stdin]",
		help: "change a user's role or password (admin)",
		setup: func(fs *flag.FlagSet) func(context.Context, *session, []string) error {
			var role string
			var pw passwordSource
			fs.StringVar(&role, "role", "", "new role: admin, operator or monitor")
			fs.StringVar(&pw.file, "password-file", "", "read the new password from FILE")
			fs.BoolVar(&pw.stdin, "password-stdin", false, "read the new password from standard input")
			return func(ctx context.Context, s *session, args []string) error {
				if err := needArgs(args, 1, "the user's name"); err != nil {
					return err
				}
				body := map[string]any{}
				if role != "" {
					body["role"] = role
				}
				if pw.file != "" || pw.stdin {
					password, err := pw.read(s, "", "")
					if err != nil {
						return err
					}
					body["password"] = password
				}
				if len(body) == 0 {
					return usagef("user update: give --role and/or --password-file / --password-stdin")
				}
				return s.show(ctx, http.MethodPatch, "/users/"+url.PathEscape(args[0]), body)
			}
		}})
}
