package cli

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"net/url"
)

func init() {
	register(&command{object: "mdm", verb: "ls", args: "", help: "list the MDM members (etcd voters, learners) and their roles",
		setup: func(fs *flag.FlagSet) func(context.Context, *session, []string) error {
			return func(ctx context.Context, s *session, args []string) error {
				if err := needArgs(args, 0, "no arguments"); err != nil {
					return err
				}
				return s.listAt(ctx, "/mdm/members", []column{{"NAME", str("name")}, {"ID", str("id")}, {"PEER URLS", str("peer_urls")},
					{"LEARNER", yesNo("learner")}, {"TIE-BREAKER", yesNo("tie_breaker")}, {"RAFT LEADER", yesNo("raft_leader")}, {"CAIRN LEADER", yesNo("cairn_leader")}})
			}
		}})
	register(&command{object: "mdm", verb: "add", args: "NAME --peer-url URL [--tie-breaker]", help: "add an MDM member (admin); prints how to start it",
		setup: func(fs *flag.FlagSet) func(context.Context, *session, []string) error {
			var peer string
			var tie bool
			fs.StringVar(&peer, "peer-url", "", "the new member's etcd peer URL, e.g. https://10.0.0.14:2380")
			fs.BoolVar(&tie, "tie-breaker", false, "the member votes but never leads")
			return func(ctx context.Context, s *session, args []string) error {
				if err := needArgs(args, 1, "the new member's name"); err != nil {
					return err
				}
				if peer == "" {
					return usagef("mdm add: give --peer-url")
				}
				if err := s.setup(); err != nil {
					return err
				}
				var m struct {
					InitialCluster string `json:"initial_cluster"`
				}
				if err := s.api.call(ctx, http.MethodPost, "/mdm/members", map[string]any{"name": args[0], "peer_url": peer, "tie_breaker": tie}, &m); err != nil {
					return fmt.Errorf("mdm add %s: %w", args[0], err)
				}
				tb := ""
				if tie {
					tb = " --tie-breaker"
				}
				fmt.Fprintf(s.out, "added %s as a learner; start it on its host (with its --pki and --client-url) with\n  cairn mdm --name %s --peer-url %s --join --initial-cluster %s%s\nit becomes a voting member once it has caught up (cairnctl mdm ls)\n",
					args[0], args[0], peer, m.InitialCluster, tb)
				return nil
			}
		}})
	register(&command{object: "mdm", verb: "rm", args: "NAME", help: "remove an MDM member (admin)",
		setup: func(fs *flag.FlagSet) func(context.Context, *session, []string) error {
			return func(ctx context.Context, s *session, args []string) error {
				if err := needArgs(args, 1, "the member's name"); err != nil {
					return err
				}
				if err := s.setup(); err != nil {
					return err
				}
				if err := s.api.call(ctx, http.MethodDelete, "/mdm/members/"+url.PathEscape(args[0]), nil, nil); err != nil {
					return fmt.Errorf("mdm rm %s: %w", args[0], err)
				}
				fmt.Fprintf(s.out, "removed MDM member %s\n", args[0])
				return nil
			}
		}})
	register(&command{object: "mdm", verb: "leader", args: "NAME", help: "make a full member both raft and control-loop (Cairn) leader (admin)",
		setup: func(fs *flag.FlagSet) func(context.Context, *session, []string) error {
			return func(ctx context.Context, s *session, args []string) error {
				if err := needArgs(args, 1, "the member to lead"); err != nil {
					return err
				}
				return s.show(ctx, http.MethodPost, "/mdm/leader", map[string]any{"name": args[0]})
			}
		}})
}
