package cli

import (
	"context"
	"flag"
	"net/http"
	"net/url"
)

// `<object> rename NAME|ID NEW` for every object with a name of its own.
func init() {
	for _, o := range objects {
		if o.name == "user" {
			continue // users are keyed by name
		}
		o := o
		register(&command{object: o.name, verb: "rename", args: "NAME|ID NEW-NAME", help: "rename a " + o.noun,
			setup: func(fs *flag.FlagSet) func(context.Context, *session, []string) error {
				return func(ctx context.Context, s *session, args []string) error {
					if err := needArgs(args, 2, "the "+o.noun+"'s name or id and its new name"); err != nil {
						return err
					}
					return s.show(ctx, http.MethodPatch, o.path+"/"+url.PathEscape(args[0]), map[string]any{"name": args[1]})
				}
			}})
	}
}
