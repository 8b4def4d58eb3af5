package main

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"

	"github.com/cairn-storage/cairn/appliance/internal/frontend"
	"github.com/cairn-storage/cairn/appliance/internal/nbd"
	"github.com/cairn-storage/cairn/appliance/internal/pki"
	"github.com/cairn-storage/cairn/appliance/internal/refusals"
)

func init() {
	register("nbd", "serve the volumes mapped to a host over NBD", runNBD)
}

func runNBD(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("nbd", flag.ContinueOnError)
	var c common
	c.add(fs)
	host := fs.String("host", "", "the host (cairnctl host create --type nbd) whose mapped volumes are exported; TLS clients must present this host's certificate")
	listen := fs.String("listen", "127.0.0.1:10809", "listen address (host:port, or unix:/path)")
	tlsMode := fs.String("tls", "", "require: TLS only, clients present a certificate of role host naming --host (the default with --pki); off: plain NBD, only with --allow-plain-loopback on a loopback address or unix socket")
	allowPlain := fs.Bool("allow-plain-loopback", false, "with --tls off: serve plain NBD on a loopback --listen address (every local process can open the exports)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *host == "" {
		return errorf("--host is required: only volumes mapped to that host are exported")
	}
	mode := *tlsMode
	if mode == "" {
		if c.pkiDir == "" {
			return errorf("no --pki: cairn nbd serves TLS with this node's certificate (issue one with 'cairn pki issue --role nbd --name NAME --out DIR' and pass --pki DIR); for a loopback-only server without TLS give --tls off --allow-plain-loopback")
		}
		mode = nbd.TLSRequire
	}
	log := c.logger("nbd")
	srvTLS, err := nbdTLS(ctx, &c, mode, *host, *listen, *allowPlain, log)
	if err != nil {
		return err
	}
	cat, cl, closeClient, err := c.dataClient(ctx, log)
	if err != nil {
		return err
	}
	defer closeClient()
	var l net.Listener
	if p, ok := strings.CutPrefix(*listen, "unix:"); ok {
		_ = os.Remove(p)
		l, err = net.Listen("unix", p)
	} else {
		l, err = net.Listen("tcp", *listen)
	}
	if err != nil {
		return fmt.Errorf("listen on %s: %w", *listen, err)
	}
	log.Info("NBD server listening", "address", l.Addr().String(), "host", *host, "tls", mode)
	res := frontend.NewResolver(cat, cl, *host)
	go res.IO().Run(ctx, cat.Client(), frontend.StatsInterval, log)
	srv := nbd.NewServer(res, log)
	srv.TLS = srvTLS
	// Refused clients become security events (through the gateways).
	who := pki.Peer{Role: pki.RoleNBD, Name: "host-" + *host}
	if c.id != nil {
		who = c.id.Peer()
	}
	rep := refusals.New(who.Role, who.Name, log)
	go rep.Run(ctx, cat.Client(), 0)
	srv.OnRefused = func(remote, peer, reason string) { rep.Refused("NBD port", remote, peer, reason) }
	return srv.Serve(ctx, l)
}

// nbdTLS checks the TLS flags before anything starts and returns the
// server's TLS configuration (nil for plain NBD).
func nbdTLS(ctx context.Context, c *common, mode, host, listen string, allowPlain bool, log *slog.Logger) (*tls.Config, error) {
	switch mode {
	case nbd.TLSRequire:
		if allowPlain {
			return nil, errorf("--allow-plain-loopback goes with --tls off only")
		}
		id, err := c.identity(ctx, pki.RoleNBD, log)
		if err != nil {
			return nil, err
		}
		if id == nil {
			return nil, errorf("--tls require needs --pki DIR with this node's certificate (cairn pki issue --role nbd --name NAME --out DIR)")
		}
		return nbd.HostTLS(id, host), nil
	case nbd.TLSOff:
		if err := nbd.CheckPlainListen(listen, allowPlain); err != nil {
			return nil, err
		}
		log.Warn("serving plain NBD without TLS (--tls off --allow-plain-loopback): any local process can open the exports of this host", "listen", listen, "host", host)
		return nil, nil
	default:
		return nil, errorf("--tls %q: use %s or %s", mode, nbd.TLSRequire, nbd.TLSOff)
	}
}

func errorf(format string, a ...any) error { return fmt.Errorf(format, a...) }
