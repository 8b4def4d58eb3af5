package main

import (
	"context"
	"flag"

	"github.com/cairn-storage/cairn/appliance/internal/gateway"
	"github.com/cairn-storage/cairn/appliance/internal/sds"
)

func init() {
	register("gateway", "serve the REST API (/api/v1), metrics and authentication", runGateway)
}

func runGateway(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("gateway", flag.ContinueOnError)
	var c common
	c.add(fs)
	cfg := gateway.Config{Devices: sds.Prober{}}
	fs.StringVar(&cfg.Listen, "listen", gateway.DefaultListen, "listen address")
	fs.StringVar(&cfg.StateDir, "state-dir", "/var/lib/cairn/gateway", "TLS certificate, key and first admin password")
	fs.BoolVar(&cfg.TLS, "tls", true, "serve HTTPS (plain HTTP only behind a TLS proxy)")
	if err := parse(fs, args); err != nil {
		return err
	}
	cli, err := c.etcd(ctx)
	if err != nil {
		return err
	}
	defer cli.Close()
	cfg.Etcd, cfg.Logger = cli, c.logger("gateway")
	return gateway.Run(ctx, cfg)
}
