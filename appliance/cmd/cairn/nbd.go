package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"strings"

	"github.com/cairn-storage/cairn/appliance/internal/frontend"
	"github.com/cairn-storage/cairn/appliance/internal/nbd"
)

func init() {
	register("nbd", "serve the volumes mapped to a host over NBD", runNBD)
}

func runNBD(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("nbd", flag.ContinueOnError)
	var c common
	c.add(fs)
	host := fs.String("host", "", "the host (cairnctl host create --type nbd) whose mapped volumes are exported")
	listen := fs.String("listen", "127.0.0.1:10809", "listen address (host:port, or unix:/path)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *host == "" {
		return errorf("--host is required: only volumes mapped to that host are exported")
	}
	log := c.logger("nbd")
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
	log.Info("NBD server listening", "address", l.Addr().String(), "host", *host)
	res := frontend.NewResolver(cat, cl, *host)
	go res.IO().Run(ctx, cat.Client(), frontend.StatsInterval, log)
	return nbd.NewServer(res, log).Serve(ctx, l)
}

func errorf(format string, a ...any) error { return fmt.Errorf(format, a...) }
