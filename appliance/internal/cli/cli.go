// Package cli implements cairnctl, Cairn's command line over the gateway's
// REST API: one command per file, the same verbs across objects (ls, info,
// create, rm), tables by default and --json.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"github.com/cairn-storage/cairn/appliance/internal/buildinfo"
	"io"
	"os"
	"sort"
	"strings"
)

// Env is what a cairnctl run sees of its process; tests supply their own.
type Env struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	Getenv         func(string) string
}

// OSEnv is the real process environment.
func OSEnv() Env {
	return Env{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv}
}

// globalOpts are accepted before the object and after every command.
type globalOpts struct {
	url, caFile, config string
	json                bool
}

func (g *globalOpts) register(fs *flag.FlagSet) {
	fs.StringVar(&g.url, "url", g.url, "gateway URL, e.g. https://10.0.0.11:8443; several gateways of one system comma separated, tried in turn when one is down (default: from the config file)")
	fs.StringVar(&g.caFile, "ca-file", g.caFile, "PEM certificate(s) to trust for the gateway (its cert.pem)")
	fs.StringVar(&g.config, "config", g.config, "config file (default $CAIRNCTL_CONFIG, else ~/.config/cairn/cairnctl.json)")
	fs.BoolVar(&g.json, "json", g.json, "print JSON instead of a table")
}

// command is one cairnctl command. setup declares the command's flags on fs
// and returns the function that runs it with the positional arguments.
type command struct {
	object, verb string // object "" for top-level commands (login)
	args         string // synopsis of positional arguments and flags
	help         string
	setup        func(fs *flag.FlagSet) func(ctx context.Context, s *session, args []string) error
}

func (c *command) name() string { return strings.TrimSpace(c.object + " " + c.verb) }

var commands []*command

func register(c *command) { commands = append(commands, c) }

// usageError makes Main exit with status 2 and print the usage.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, a ...any) error { return &usageError{fmt.Sprintf(format, a...)} }

// Main runs cairnctl with args (without the program name) and returns the
// exit status: 0 success, 1 failure, 2 usage error.
func Main(ctx context.Context, args []string, env Env) int {
	if env.Getenv == nil {
		env.Getenv = func(string) string { return "" }
	}
	if env.Stdin == nil {
		env.Stdin = strings.NewReader("")
	}
	err := run(ctx, args, env)
	var ue *usageError
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &ue):
		fmt.Fprintf(env.Stderr, "cairnctl: %s\n", ue.msg)
		return 2
	}
	fmt.Fprintf(env.Stderr, "cairnctl: %v\n", err)
	return 1
}

func run(ctx context.Context, args []string, env Env) error {
	var g globalOpts
	top := flag.NewFlagSet("cairnctl", flag.ContinueOnError)
	top.SetOutput(env.Stderr)
	g.register(top)
	top.Usage = func() { printUsage(env.Stderr, top) }
	if err := top.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usagef("%v", err)
	}
	rest := top.Args()
	if len(rest) == 0 {
		printUsage(env.Stderr, top)
		return usagef("give a command")
	}
	if rest[0] == "help" {
		printUsage(env.Stdout, top)
		return nil
	}
	if rest[0] == "version" && len(rest) == 1 {
		fmt.Fprintf(env.Stdout, "cairnctl %s (the system's: `cairnctl system versions`)\n", buildinfo.Version())
		return nil
	}
	cmd, cmdArgs, err := lookup(rest)
	if err != nil {
		return err
	}
	fs := flag.NewFlagSet("cairnctl "+cmd.name(), flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	runFn := cmd.setup(fs)
	g.register(fs)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: cairnctl %s %s\n\n%s\n\nflags:\n", cmd.name(), cmd.args, cmd.help)
		fs.PrintDefaults()
	}
	pos, err := parseInterspersed(fs, cmdArgs)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usagef("%s: %v (see cairnctl %s -h)", cmd.name(), err, cmd.name())
	}
	s := &session{env: env, opts: g, out: env.Stdout}
	return runFn(ctx, s, pos)
}

// parseInterspersed lets flags follow positional arguments
// ("volume create v1 --size 8GiB"), which the flag package alone stops at.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		// After "--" everything is positional.
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

func lookup(words []string) (*command, []string, error) {
	for _, c := range commands {
		if c.object == "" && c.verb == words[0] {
			return c, words[1:], nil
		}
	}
	var verbs []string
	for _, c := range commands {
		if c.object == words[0] {
			verbs = append(verbs, c.verb)
			if len(words) > 1 && c.verb == words[1] {
				return c, words[2:], nil
			}
		}
	}
	if len(verbs) == 0 {
		return nil, nil, usagef("unknown command %q; run `cairnctl help` for the list", words[0])
	}
	sort.Strings(verbs)
	if len(words) == 1 {
		return nil, nil, usagef("%s: give a verb: %s", words[0], strings.Join(verbs, ", "))
	}
	return nil, nil, usagef("%s: unknown verb %q; use one of: %s", words[0], words[1], strings.Join(verbs, ", "))
}

func printUsage(w io.Writer, top *flag.FlagSet) {
	fmt.Fprintln(w, "usage: cairnctl [global flags] COMMAND [flags] [args]")
	fmt.Fprintln(w, "\ncommands:")
	sorted := append([]*command(nil), commands...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].name() < sorted[j].name() })
	for _, c := range sorted {
		fmt.Fprintf(w, "  %-21s %s\n", c.name(), c.help)
	}
	fmt.Fprintf(w, "  %-21s %s\n", "version", "print this cairnctl's version")
	fmt.Fprintln(w, "\nglobal flags (also accepted after any command):")
	top.SetOutput(w)
	top.PrintDefaults()
	fmt.Fprintln(w, "\nStart with `cairnctl login`; `cairnctl COMMAND -h` shows a command's flags.")
}

// session is one run of a command: options, config and the API client.
type session struct {
	env  Env
	opts globalOpts
	out  io.Writer

	cfg     *Config
	cfgPath string
	api     *client
}

// needArgs checks the count of positional arguments.
func needArgs(args []string, n int, what string) error {
	if len(args) != n {
		return usagef("expected %s, got %d argument(s): %q", what, len(args), args)
	}
	return nil
}
