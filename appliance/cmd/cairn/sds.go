package main

import (
	"context"
	"flag"

	"github.com/cairn-storage/cairn/appliance/internal/pki"
	"github.com/cairn-storage/cairn/appliance/internal/sds"
)

func init() {
	register("sds", "run a data server (devices, chunks, mirrored data path)", runSDS)
}

func runSDS(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("sds", flag.ContinueOnError)
	var c common
	c.add(fs)
	var cfg sds.Config
	fs.StringVar(&cfg.Name, "name", "", "this SDS's name in the cluster (cairnctl sds create --name)")
	fs.StringVar(&cfg.Listen, "listen", "127.0.0.1:7100", "data-path listen address")
	fs.StringVar(&cfg.Advertise, "advertise", "", "address clients use (default: the listen address)")
	fs.StringVar(&cfg.StateDir, "state-dir", "/var/lib/cairn/sds", "chunk index directory")
	security := dataSecurityFlag(fs)
	fs.BoolVar(&cfg.ReadCache, "read-cache", true, "serve reads through the page cache (writes stay direct); --read-cache=false reads the devices directly")
	if err := parse(fs, args); err != nil {
		return err
	}
	if cfg.Name == "" {
		return errorf("--name is required: the SDS's name as added with 'cairnctl sds create'")
	}
	log := c.logger("sds")
	sec, err := c.dataSecurity(ctx, pki.RoleSDS, *security, log)
	if err != nil {
		return err
	}
	cli, err := c.etcd(ctx)
	if err != nil {
		return err
	}
	defer cli.Close()
	cfg.Etcd, cfg.Logger, cfg.Security, cfg.Local = cli, log, sec, colocated
	return sds.Run(ctx, cfg)
}
