package main

import (
	"context"
	"flag"

	"github.com/cairn-storage/cairn/appliance/internal/firewall"
	"github.com/cairn-storage/cairn/appliance/internal/firstboot"
	"github.com/cairn-storage/cairn/appliance/internal/peersync"
)

func init() {
	register("peersync", "keep this SVM's firewall admitting the SVMs the system model knows", runPeersync)
}

func runPeersync(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("peersync", flag.ContinueOnError)
	var c common
	c.add(fs)
	settings := fs.String("settings", firstboot.SettingsFile, "the settings first boot applied")
	var s peersync.Syncer
	fs.StringVar(&s.RulesetPath, "ruleset", firewall.Path, "the nftables ruleset file nftables.service loads at boot; rewritten on change")
	fs.StringVar(&s.KnownPath, "known", peersync.KnownFile, "where the addresses the model has held are remembered")
	if err := parse(fs, args); err != nil {
		return err
	}
	log := c.logger("peersync")
	st, err := peersync.LoadSettings(*settings)
	if err != nil {
		return err
	}
	cli, err := c.etcd(ctx)
	if err != nil {
		return err
	}
	defer cli.Close()
	s.Settings, s.Self, s.Etcd, s.Log = st, peersync.Self(st), cli, log
	return s.Run(ctx)
}
