package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"sort"
	"strings"

	"github.com/cairn-storage/cairn/appliance/internal/buildinfo"
)

func init() {
	register(&command{object: "system", verb: "versions", args: "",
		help: "list the Cairn version each running daemon runs, and say when the system runs more than one (a rolling upgrade)",
		setup: func(fs *flag.FlagSet) func(context.Context, *session, []string) error {
			return func(ctx context.Context, s *session, args []string) error {
				if err := needArgs(args, 0, "no arguments"); err != nil {
					return err
				}
				raw, err := s.getShown(ctx, "/system/versions")
				if raw == nil || err != nil {
					return err
				}
				var v struct {
					Gateway  string
					Versions map[string]int
					Mixed    bool
					Daemons  []map[string]any
				}
				if err := json.Unmarshal(raw, &v); err != nil {
					return fmt.Errorf("gateway answer for /system/versions: %w", err)
				}
				printTable(s.out, []column{{"ROLE", str("role")}, {"NAME", str("name")}, {"VERSION", str("version")}}, v.Daemons)
				counts := make([]string, 0, len(v.Versions))
				for ver, n := range v.Versions {
					counts = append(counts, fmt.Sprintf("%s on %s", ver, count(n, "daemon")))
				}
				sort.Strings(counts)
				if v.Mixed {
					fmt.Fprintf(s.out, "! more than one version runs (%s): a rolling upgrade is under way or stopped part way; finish it\n", strings.Join(counts, ", "))
				} else {
					fmt.Fprintf(s.out, "one version runs: %s; this cairnctl is %s\n", strings.Join(counts, ", "), buildinfo.Version())
				}
				return nil
			}
		}})
}
