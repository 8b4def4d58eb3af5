package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"time"
)

// upgradeSVM is one SVM in GET /upgrade/svms.
type upgradeSVM struct {
	Name, Running, Ordered, State, Message, Updated string
}

func init() {
	register(&command{object: "upgrade", verb: "order", args: "SVM --version V [--wait]",
		help: "order one SVM to install a stored version (its updater switches, checks and rolls back on failure); put its SDS in maintenance first",
		setup: func(fs *flag.FlagSet) func(context.Context, *session, []string) error {
			version := fs.String("version", "", "the stored bundle's version (cairnctl upgrade ls)")
			wait := fs.Bool("wait", false, "wait until the SVM is done, failed or rolled back; exit non-zero unless done")
			timeout := fs.Duration("timeout", 15*time.Minute, "with --wait: how long to wait")
			return func(ctx context.Context, s *session, args []string) error {
				if err := needArgs(args, 1, "the SVM's name"); err != nil {
					return err
				}
				if *version == "" {
					return usagef("--version is required")
				}
				if err := s.setup(); err != nil {
					return err
				}
				name := args[0]
				var before upgradeSVM
				if err := s.api.call(ctx, http.MethodPost, "/upgrade/svms/"+url.PathEscape(name), map[string]string{"version": *version}, &before); err != nil {
					return err
				}
				if !*wait {
					fmt.Fprintf(s.out, "ordered %s to run %s (it runs %s); follow it with `cairnctl upgrade ls`\n", name, *version, before.Running)
					return nil
				}
				// The order is carried out when the updater writes a final
				// state after the one the order found.
				deadline := time.Now().Add(*timeout)
				for {
					var all []upgradeSVM
					var raw json.RawMessage
					if err := s.api.call(ctx, http.MethodGet, "/upgrade/svms", nil, &raw); err != nil {
						return err
					}
					if err := json.Unmarshal(raw, &all); err != nil {
						return fmt.Errorf("gateway answer for /upgrade/svms: %w", err)
					}
					for _, st := range all {
						if st.Name != name || st.Updated == before.Updated || st.Ordered != *version {
							continue
						}
						switch st.State {
						case "done":
							fmt.Fprintf(s.out, "%s runs %s: %s\n", name, *version, st.Message)
							return nil
						case "failed", "rolled-back":
							return fmt.Errorf("%s %s: %s", name, st.State, st.Message)
						}
					}
					if time.Now().After(deadline) {
						return fmt.Errorf("%s did not finish the update to %s within %s; see `cairnctl upgrade ls`", name, *version, *timeout)
					}
					select {
					case <-ctx.Done():
						return ctx.Err()
					case <-time.After(2 * time.Second):
					}
				}
			}
		}})
}
