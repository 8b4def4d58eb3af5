package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"strings"
)

func init() {
	register(&command{object: "system", verb: "info", args: "", help: "show the system, its health and capacity",
		setup: func(fs *flag.FlagSet) func(context.Context, *session, []string) error {
			return func(ctx context.Context, s *session, args []string) error {
				if err := needArgs(args, 0, "no arguments"); err != nil {
					return err
				}
				raw, err := s.getShown(ctx, "/system")
				if raw == nil || err != nil {
					return err
				}
				var r struct {
					System *struct{ ID, Name string }
					Health struct {
						Status   string
						SDSs     int      `json:"sds_count"`
						SDSsUp   int      `json:"sds_up_count"`
						SDSsDown []string `json:"sds_down_names"`
						Messages []string
					}
					Capacity struct {
						Raw, Usable, Allocated, Free float64
						SpareReserved                float64 `json:"spare_reserved"`
						ThickReserved                float64 `json:"thick_reserved"`
						ThinProvisioned              float64 `json:"thin_provisioned"`
						OverProvisioningRatio        float64 `json:"over_provisioning_ratio"`
					}
					Counts  map[string]int
					Rebuild rebuildInfo
					Leader  string
				}
				if err := json.Unmarshal(raw, &r); err != nil {
					return fmt.Errorf("gateway answer for /system: %w", err)
				}
				name := "(not bootstrapped: run `cairnctl system bootstrap --name NAME`)"
				if r.System != nil {
					name = fmt.Sprintf("%s (id %s)", r.System.Name, r.System.ID)
				}
				fmt.Fprintf(s.out, "system:    %s\n", name)
				fmt.Fprintf(s.out, "health:    %s\n", r.Health.Status)
				leader := r.Leader
				if leader == "" {
					leader = "(none elected: check that a majority of the MDMs is running)"
				}
				fmt.Fprintf(s.out, "leader:    %s\n", leader)
				fmt.Fprintf(s.out, "rebuild:   %s\n", r.Rebuild.summary())
				down := ""
				if len(r.Health.SDSsDown) > 0 {
					down = "; down: " + strings.Join(r.Health.SDSsDown, ", ")
				}
				fmt.Fprintf(s.out, "SDSs:      %d of %d up%s\n", r.Health.SDSsUp, r.Health.SDSs, down)
				fmt.Fprintf(s.out, "capacity:  raw %s; usable %s (after spare %s and 2 copies), allocated %s, free %s\n",
					formatBytes(r.Capacity.Raw), formatBytes(r.Capacity.Usable), formatBytes(r.Capacity.SpareReserved), formatBytes(r.Capacity.Allocated), formatBytes(r.Capacity.Free))
				fmt.Fprintf(s.out, "provision: thin %s, thick %s, over-provisioning %.2fx\n",
					formatBytes(r.Capacity.ThinProvisioned), formatBytes(r.Capacity.ThickReserved), r.Capacity.OverProvisioningRatio)
				c := r.Counts
				fmt.Fprintf(s.out, "objects:   %s, %s, %s, %s, %s, %s, %s\n",
					count(c["protection_domains"], "protection domain"), count(c["fault_sets"], "fault set"), count(c["sds"], "SDS"),
					count(c["devices"], "device"), count(c["pools"], "pool"), count(c["volumes"], "volume"), count(c["hosts"], "host"))
				for _, m := range r.Health.Messages {
					fmt.Fprintf(s.out, "  ! %s\n", m)
				}
				return nil
			}
		}})
}

func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
