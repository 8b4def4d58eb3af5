package cli

import (
	"context"
	"flag"
	"fmt"
	"net/http"
)

func init() {
	register(&command{verb: "logout", args: "", help: "end the session and forget the token",
		setup: func(fs *flag.FlagSet) func(context.Context, *session, []string) error {
			return func(ctx context.Context, s *session, args []string) error {
				if err := needArgs(args, 0, "no arguments"); err != nil {
					return err
				}
				if err := s.setup(); err != nil {
					return err
				}
				if s.cfg.Token != "" {
					status, body, err := s.api.do(ctx, http.MethodPost, "/logout", s.cfg.Token, nil)
					// An expired token is as good as logged out.
					if err == nil && status != http.StatusUnauthorized {
						if err := decodeAnswer(status, body, nil); err != nil {
							return err
						}
					}
				}
				s.cfg.Token = ""
				if err := saveConfig(s.cfgPath, s.cfg); err != nil {
					return err
				}
				fmt.Fprintln(s.out, "logged out")
				return nil
			}
		}})
}
