package main

// datasec.go: the data path's security for the daemons that use it (sds,
// target, nbd, ats-torture): the --data-security flag and the data client.

import (
	"context"
	"flag"
	"log/slog"
	"os"

	"github.com/cairn-storage/cairn/appliance/internal/catalog"
	"github.com/cairn-storage/cairn/appliance/internal/client"
	"github.com/cairn-storage/cairn/appliance/internal/wire"
)

// dataSecurityEnv sets --data-security's default.
const dataSecurityEnv = "CAIRN_DATA_SECURITY"

// dataSecurityDefault is --data-security's default: $CAIRN_DATA_SECURITY,
// else "" (dataSecurity decides: authenticated with --pki). The NBD
// frontend, which has no such flag, uses it.
func dataSecurityDefault() string { return os.Getenv(dataSecurityEnv) }

// dataSecurityFlag registers --data-security.
func dataSecurityFlag(fs *flag.FlagSet) *string {
	return fs.String("data-security", dataSecurityDefault(),
		"data-path security: authenticated (mutual TLS with the --pki certificate, then plain checksummed frames), "+
			"secure (every frame inside TLS; a server in this mode refuses authenticated clients) "+
			"or none (no handshake: an unauthenticated data path); default authenticated with --pki, none without ($"+dataSecurityEnv+")")
}

// dataSecurity is the data-path security of a daemon of role in mode: its
// certificate (--pki) is required unless mode is none. Mode none with --pki
// is obeyed (it is explicit) and warned about.
func (c *common) dataSecurity(ctx context.Context, role, mode string, log *slog.Logger) (*wire.Security, error) {
	if mode == "" {
		// The default follows the PKI: a daemon with a certificate
		// authenticates. One without (an SVM deployed before its first
		// boot provisions certificates: the join flow is not built yet)
		// runs unauthenticated, says so, and the gateway's certificate
		// list shows it has none.
		mode = wire.ModeAuthenticated.String()
		if c.pkiDir == "" {
			mode = wire.ModeNone.String()
			log.Warn("no --pki: the data path runs WITHOUT authentication; anyone who reaches this daemon's port can read and write volumes. Issue a certificate (cairn pki issue) and give --pki DIR")
		}
	}
	m, err := wire.ParseMode(mode)
	if err != nil {
		return nil, err
	}
	if m == wire.ModeNone {
		if c.pkiDir != "" {
			log.Warn("--data-security none: the data path runs without authentication although --pki is given", "pki", c.pkiDir)
		}
		return nil, nil
	}
	id, err := c.identity(ctx, role, log)
	if err != nil {
		return nil, err
	}
	return wire.NewSecurity(m, id)
}

// dataClientAs connects to the MDM and opens the data client a frontend or
// tool of role reads and writes volumes with, in data-path security mode.
// close releases both.
func (c *common) dataClientAs(ctx context.Context, log *slog.Logger, role, mode string) (*catalog.Catalog, *client.Cluster, func(), error) {
	sec, err := c.dataSecurity(ctx, role, mode, log)
	if err != nil {
		return nil, nil, nil, err
	}
	cli, err := c.etcd(ctx)
	if err != nil {
		return nil, nil, nil, err
	}
	cat, err := catalog.Open(ctx, cli, log)
	if err != nil {
		cli.Close()
		return nil, nil, nil, err
	}
	cl := client.New(cat, log)
	cl.Security = sec
	return cat, cl, func() { cl.Close(); cli.Close() }, nil
}
