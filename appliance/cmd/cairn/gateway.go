package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/cairn-storage/cairn/appliance/internal/gateway"
	"github.com/cairn-storage/cairn/appliance/internal/pki"
	"github.com/cairn-storage/cairn/appliance/internal/sdsrpc"
)

func init() {
	register("gateway", "serve the REST API (/api/v1), metrics and authentication", runGateway)
}

func runGateway(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("gateway", flag.ContinueOnError)
	var c common
	c.add(fs)
	cfg := gateway.Config{Devices: sdsrpc.Prober{}}
	fs.StringVar(&cfg.Listen, "listen", gateway.DefaultListen, "listen address")
	fs.StringVar(&cfg.StateDir, "state-dir", "/var/lib/cairn/gateway", "TLS certificate, key and first admin password")
	fs.BoolVar(&cfg.TLS, "tls", true, "serve HTTPS (plain HTTP only behind a TLS proxy)")
	fs.DurationVar(&cfg.TokenTTL, "token-ttl", gateway.DefaultTokenTTL, "lifetime of a login token (clients log in again after it; shorter limits a leaked token)")
	fs.StringVar(&cfg.BootstrapTokenFile, "bootstrap-token-file", "", "one-time token that lets the deployer of a new system set the admin password (POST /api/v1/bootstrap/admin-password)")
	fs.DurationVar(&cfg.BootstrapTokenTTL, "bootstrap-token-ttl", gateway.DefaultBootstrapTokenTTL, "how long the bootstrap token is accepted after the first admin was created")
	if err := parse(fs, args); err != nil {
		return err
	}
	if cfg.TokenTTL < time.Second {
		return fmt.Errorf("--token-ttl %s: give at least 1s (default %s)", cfg.TokenTTL, gateway.DefaultTokenTTL)
	}
	log := c.logger("gateway")
	// The gateway's certificate (role gateway: etcd's root user, see
	// mdm/rbac.go) authenticates its etcd client.
	id, err := c.identity(ctx, pki.RoleGateway, log)
	if err != nil {
		return err
	}
	if id != nil {
		cfg.ClusterCA = id.CA
	}
	// Adding a device asks its SDS to prepare it over the data path.
	sec, err := c.dataSecurity(ctx, pki.RoleGateway, dataSecurityDefault(), log)
	if err != nil {
		return err
	}
	cfg.Devices = sdsrpc.Prober{Security: sec}
	cli, err := c.etcd(ctx)
	if err != nil {
		return err
	}
	defer cli.Close()
	cfg.Etcd, cfg.Logger = cli, log
	return gateway.Run(ctx, cfg)
}
