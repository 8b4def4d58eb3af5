package cli

import (
	"context"
	"flag"
	"fmt"
)

func init() {
	register(&command{object: "upgrade", verb: "ls", args: "",
		help: "list the stored update bundles and each SVM's updater: the version it runs, the version ordered, the state of the order",
		setup: func(fs *flag.FlagSet) func(context.Context, *session, []string) error {
			return func(ctx context.Context, s *session, args []string) error {
				if err := needArgs(args, 0, "no arguments"); err != nil {
					return err
				}
				if !s.opts.json {
					fmt.Fprintln(s.out, "bundles:")
				}
				if _, err := s.listRowsAt(ctx, "/upgrade/bundles", []column{{"VERSION", str("version")}, {"SIZE", str("size")},
					{"UPLOADED", str("uploaded")}, {"SHA256", str("sha256")}}); err != nil {
					return err
				}
				if !s.opts.json {
					fmt.Fprintln(s.out, "\nSVMs:")
				}
				_, err := s.listRowsAt(ctx, "/upgrade/svms", []column{{"NAME", str("name")}, {"RUNNING", str("running")},
					{"ORDERED", str("ordered")}, {"STATE", str("state")}, {"UPDATED", str("updated")}, {"MESSAGE", str("message")}})
				return err
			}
		}})
}
