package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"time"
)

// join-token: the one-time tokens a new node spends for its certificate
// (`cairn pki join`). The token is a secret: it goes to a file of mode 0600,
// never to the terminal.
func init() {
	register(&command{object: "join-token", verb: "create", args: "--role R[,R...] --out FILE [--ttl 1h]",
		help: "create a one-time token a new node spends for its certificate (`cairn pki join --token-file FILE`); written to FILE (0600), never shown",
		setup: func(fs *flag.FlagSet) func(context.Context, *session, []string) error {
			var roles, out string
			var ttl time.Duration
			fs.StringVar(&roles, "role", "", "the roles the token may be spent on, comma-separated: mdm, gateway, sds, target, nbd, client, host")
			fs.StringVar(&out, "out", "", "file to write the token to (mode 0600; must not exist): copy it to the node, then delete it")
			fs.DurationVar(&ttl, "ttl", time.Hour, "how long the token may be spent (1m to 168h)")
			return func(ctx context.Context, s *session, args []string) error {
				if err := needArgs(args, 0, "no arguments"); err != nil {
					return err
				}
				if err := required("join-token create", map[string]string{"role": roles, "out": out}); err != nil {
					return err
				}
				if err := s.setup(); err != nil {
					return err
				}
				f, err := os.OpenFile(out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
				if err != nil {
					return fmt.Errorf("--out: %w (an earlier token file is not overwritten: choose another)", err)
				}
				var v map[string]any
				err = s.api.call(ctx, http.MethodPost, "/system/join-tokens", map[string]any{"roles": splitList(roles), "ttl_seconds": int64(ttl / time.Second)}, &v)
				tok, _ := v["token"].(string)
				if err == nil && tok == "" {
					err = fmt.Errorf("the gateway's answer holds no token")
				}
				if err == nil {
					_, err = f.WriteString(tok + "\n")
				}
				if cerr := f.Close(); err == nil {
					err = cerr
				}
				if err != nil {
					os.Remove(out)
					return err
				}
				delete(v, "token")
				if s.opts.json {
					b, _ := json.Marshal(v)
					return printJSON(s.out, b)
				}
				fmt.Fprintf(s.out, "join token %s for %s, until %s, written to %s\n", text(v["id"]), text(v["roles"]), text(v["expires"]), out)
				fmt.Fprintf(s.out, "on the new node: cairn pki join --url https://MDM:7443[,https://MDM2:7443...] --token-file FILE --role ROLE --name NAME --out PKI_DIR\n")
				return nil
			}
		}})
	register(&command{object: "join-token", verb: "ls", args: "",
		help: "list the join tokens not yet spent or revoked (never their secrets)",
		setup: func(fs *flag.FlagSet) func(context.Context, *session, []string) error {
			return func(ctx context.Context, s *session, args []string) error {
				if err := needArgs(args, 0, "no arguments"); err != nil {
					return err
				}
				_, err := s.listRowsAt(ctx, "/system/join-tokens", []column{{"ID", str("id")}, {"ROLES", str("roles")},
					{"EXPIRES", str("expires")}, {"EXPIRED", yesNo("expired")}, {"CREATED BY", str("created_by")}})
				return err
			}
		}})
	register(&command{object: "join-token", verb: "rm", args: "ID...",
		help: "revoke join tokens: a node can no longer spend them",
		setup: func(fs *flag.FlagSet) func(context.Context, *session, []string) error {
			return func(ctx context.Context, s *session, args []string) error {
				if len(args) == 0 {
					return usagef("give the id of the join token to revoke (cairnctl join-token ls)")
				}
				if err := s.setup(); err != nil {
					return err
				}
				for _, id := range args {
					if err := s.api.call(ctx, http.MethodDelete, "/system/join-tokens/"+url.PathEscape(id), nil, nil); err != nil {
						return fmt.Errorf("join-token rm %s: %w", id, err)
					}
					if !s.opts.json {
						fmt.Fprintf(s.out, "revoked join token %s\n", id)
					}
				}
				return nil
			}
		}})
}
