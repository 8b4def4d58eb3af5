package cli

import (
	"context"
	"flag"
	"fmt"
	"path/filepath"
	"time"
)

func init() {
	register(&command{verb: "login", args: "[--user NAME] [--password-file FILE | --password-stdin]",
		help: "log in to the gateway and save the token in the config file",
		setup: func(fs *flag.FlagSet) func(context.Context, *session, []string) error {
			var user string
			var pw passwordSource
			fs.StringVar(&user, "user", "", "user name (default: the config's username, else admin)")
			fs.StringVar(&pw.file, "password-file", "", "read the password from the first line of FILE; saved in the config for automatic re-login")
			fs.BoolVar(&pw.stdin, "password-stdin", false, "read the password from standard input")
			return func(ctx context.Context, s *session, args []string) error {
				if err := needArgs(args, 0, "no arguments"); err != nil {
					return err
				}
				if err := s.setup(); err != nil {
					return err
				}
				if user == "" {
					user = s.cfg.Username
				}
				if user == "" {
					user = "admin"
				}
				fallback := ""
				if user == s.cfg.Username {
					fallback = s.cfg.PasswordFile
				}
				password, err := pw.read(s, fmt.Sprintf("password for %s at %s: ", user, s.api.base()), fallback)
				if err != nil {
					return err
				}
				r, err := s.api.login(ctx, user, password)
				if err != nil {
					return err
				}
				cfg := s.cfg
				cfg.URL = s.api.urlList()
				if s.opts.caFile != "" {
					cfg.CAFile = absPath(s.opts.caFile)
				}
				if user != cfg.Username {
					cfg.PasswordFile = ""
				}
				cfg.Username, cfg.Token = user, r.Token
				if pw.file != "" {
					cfg.PasswordFile = absPath(pw.file)
				}
				if err := saveConfig(s.cfgPath, cfg); err != nil {
					return err
				}
				if s.opts.json {
					return printJSONValue(s.out, r)
				}
				fmt.Fprintf(s.out, "logged in to %s as %s (role %s) until %s; saved in %s\n",
					cfg.URL, r.User, r.Role, r.Expires.Local().Format(time.RFC1123), s.cfgPath)
				return nil
			}
		}})
}

func absPath(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}
