// Command cairn runs Cairn's daemons: one binary, one subcommand per role.
// Only flag parsing and wiring live here; the logic is in internal/.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	_ "net/http/pprof" // served only with --debug-listen, on loopback
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cairn-storage/cairn/appliance/internal/catalog"
	"github.com/cairn-storage/cairn/appliance/internal/client"
	"github.com/cairn-storage/cairn/appliance/internal/mdm"
	"github.com/cairn-storage/cairn/appliance/internal/model"
	"github.com/cairn-storage/cairn/appliance/internal/pki"
)

// command is one subcommand.
type command struct {
	summary string
	run     func(ctx context.Context, args []string) error
}

var commands = map[string]command{}

func register(name, summary string, run func(ctx context.Context, args []string) error) {
	commands[name] = command{summary, run}
}

func usage() {
	fmt.Fprintf(os.Stderr, "usage: cairn <command> [flags]\n\ncommands:\n")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(os.Stderr, "  %-10s %s\n", n, commands[n].summary)
	}
	fmt.Fprintf(os.Stderr, "\nRun 'cairn <command> -h' for its flags.\n")
}

func main() {
	if len(os.Args) < 2 || os.Args[1] == "-h" || os.Args[1] == "--help" || os.Args[1] == "help" {
		usage()
		os.Exit(2)
	}
	cmd, ok := commands[os.Args[1]]
	if !ok {
		fmt.Fprintf(os.Stderr, "cairn: unknown command %q\n\n", os.Args[1])
		usage()
		os.Exit(2)
	}
	keepSysmonAwake(os.Args[1])
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := cmd.run(ctx, os.Args[2:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(2)
		}
		fmt.Fprintf(os.Stderr, "cairn %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}

// sysmonSetting keeps Go's sysmon thread out of its deep sleep: with a
// scheduler trace interval set, sysmon never parks on its note, it only
// backs off to 10 ms naps while there is nothing to retake. The interval
// is the largest the runtime takes (2^31-1 ms, 24.8 days): the trace line
// it would print comes at most once per 24.8 days of uptime.
//
// Why: a daemon that serves one request at a time goes fully idle between
// requests, sysmon parks, and the next system call (a socket write) must
// wake it with a futex; it then polls every 20 µs until the process idles
// again. A perf trace of sched_switch at QD 1 put about half of the NBD
// server's context switches in sysmon. Kept awake, the data path's context
// switches per I/O halve and its CPU per I/O falls by about a third
// (docs/benchmarks.md, "sysmon"); an idle daemon pays about 100 naps a
// second.
const sysmonSetting = "schedtrace=2147483647"

// keepSysmonAwake re-executes the data-path daemons (the same binary,
// same pid, arguments and descriptors) with sysmonSetting
// added to GODEBUG, which the runtime reads only at start. GODEBUG that
// already names schedtrace is left alone, and so is
// CAIRN_SYSMON_DEEP_SLEEP=1 (the runtime's default). If the exec fails,
// the daemon runs on as it is.
func keepSysmonAwake(command string) {
	switch command {
	case "sds", "nbd", "target", "colocate":
	default:
		return
	}
	godebug := os.Getenv("GODEBUG")
	if strings.Contains(godebug, "schedtrace=") || os.Getenv("CAIRN_SYSMON_DEEP_SLEEP") == "1" {
		return
	}
	if godebug != "" {
		godebug += ","
	}
	env := []string{"GODEBUG=" + godebug + sysmonSetting}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GODEBUG=") {
			env = append(env, kv)
		}
	}
	// The binary's own path, not /proc/self/exe: the process name (comm,
	// what ps, top and pgrep show) comes from it.
	exe, err := os.Executable()
	if err == nil {
		err = syscall.Exec(exe, os.Args, env)
	}
	fmt.Fprintf(os.Stderr, "cairn %s: could not restart with GODEBUG=%s (%v); running with Go's default scheduler settings\n", command, sysmonSetting, err)
}

// common flags of the daemons.
type common struct {
	mdm      string
	logLevel string
	debug    string
	pkiDir   string
	id       *pki.Identity // loaded by identity()
	// published: the certificate's Info is kept in etcd (pki.Publish) by
	// the first etcd client.
	published bool
}

func (c *common) add(fs *flag.FlagSet) {
	fs.StringVar(&c.mdm, "mdm", envOr("CAIRN_MDM", "http://127.0.0.1:2379"), "comma-separated MDM (etcd) client URLs ($CAIRN_MDM)")
	fs.StringVar(&c.logLevel, "log-level", envOr("CAIRN_LOG_LEVEL", "info"), "debug, info, warn or error")
	fs.StringVar(&c.pkiDir, "pki", os.Getenv("CAIRN_PKI_DIR"), "this daemon's PKI directory: ca.crt, node.crt, node.key (cairn pki issue) ($CAIRN_PKI_DIR)")
	fs.StringVar(&c.debug, "debug-listen", os.Getenv("CAIRN_DEBUG_LISTEN"), "serve Go profiles (/debug/pprof) on this loopback address, e.g. 127.0.0.1:6060")
}

// startDebug serves pprof when asked; only loopback addresses are accepted.
func (c *common) startDebug(log *slog.Logger) {
	if c.debug == "" {
		return
	}
	host, _, err := net.SplitHostPort(c.debug)
	if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
		log.Warn("--debug-listen must be a loopback address; profiles not served", "address", c.debug)
		return
	}
	go func() {
		if err := http.ListenAndServe(c.debug, nil); err != nil {
			log.Warn("debug listener", "err", err)
		}
	}()
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func (c *common) logger(role string) *slog.Logger {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(c.logLevel)); err != nil {
		lvl = slog.LevelInfo
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lvl})).With("role", role)
	c.startDebug(log)
	return log
}

// identity loads the daemon's certificate from --pki (nil without --pki),
// checks it holds role, and keeps it current (reload on change) while ctx
// lasts.
func (c *common) identity(ctx context.Context, role string, log *slog.Logger) (*pki.Identity, error) {
	if c.id != nil || c.pkiDir == "" {
		return c.id, nil
	}
	id, err := pki.LoadIdentity(c.pkiDir)
	if err != nil {
		return nil, err
	}
	if id.Peer().Role != role {
		return nil, fmt.Errorf("--pki %s holds the certificate of %s, not of a %s: issue one with 'cairn pki issue --role %s'", c.pkiDir, id.Peer(), role, role)
	}
	go id.Watch(ctx, 30*time.Second, log)
	c.id = id
	return id, nil
}

// etcd connects to the MDM members, with the daemon's certificate when it
// has --pki (its role is its etcd user), and checks the model's schema
// (waiting up to 10 s for etcd to answer). A daemon that did not load its
// identity yet gets it loaded here, for the role its certificate names.
func (c *common) etcd(ctx context.Context) (*clientv3.Client, error) {
	cli, err := c.dialEtcd(ctx)
	if err != nil {
		return nil, err
	}
	if err := c.etcdReady(ctx, cli); err != nil {
		cli.Close()
		return nil, err
	}
	return cli, nil
}

// dialEtcd is etcd without the wait: the client returns at once, and its
// calls fail until an MDM answers (the join service serves bootstrap joins
// before etcd exists).
func (c *common) dialEtcd(ctx context.Context) (*clientv3.Client, error) {
	if c.id == nil && c.pkiDir != "" {
		id, err := pki.LoadIdentity(c.pkiDir)
		if err != nil {
			return nil, err
		}
		if _, err := c.identity(ctx, id.Peer().Role, slog.Default()); err != nil {
			return nil, err
		}
	}
	cfg, err := mdm.ClientConfig(strings.Split(c.mdm, ","), c.id, slog.Default())
	if err != nil {
		return nil, fmt.Errorf("--mdm: %w", err)
	}
	cfg.Context, cfg.DialKeepAliveTime, cfg.DialKeepAliveTimeout = ctx, 2*time.Second, 2*time.Second
	cli, err := clientv3.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to MDM %s: %w", c.mdm, err)
	}
	return cli, nil
}

// etcdReady refuses a model newer than this binary reads, before it is
// misread (an unreachable etcd is not a refusal: the daemon's own retries
// wait for it), and publishes the daemon's certificate.
func (c *common) etcdReady(ctx context.Context, cli *clientv3.Client) error {
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	err := model.CheckSchema(sctx, cli)
	cancel()
	if errors.Is(err, model.ErrSchemaTooNew) {
		return err
	}
	if c.id != nil && !c.published {
		// Its expiry in the API (GET /system/certificates) while it runs.
		c.published = true
		go pki.Publish(ctx, cli, c.id, slog.Default())
	}
	return nil
}

// dataClient connects to the MDM and opens the data client the NBD
// frontend reads and writes volumes with, in the data-path security mode of
// $CAIRN_DATA_SECURITY (default: authenticated with --pki) with its nbd certificate
// (--pki). close releases both. Other roles use dataClientAs.
func (c *common) dataClient(ctx context.Context, log *slog.Logger) (*catalog.Catalog, *client.Cluster, func(), error) {
	return c.dataClientAs(ctx, log, pki.RoleNBD, dataSecurityDefault())
}

func parse(fs *flag.FlagSet, args []string) error {
	fs.SetOutput(os.Stderr)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q (flags only)", fs.Arg(0))
	}
	return nil
}
