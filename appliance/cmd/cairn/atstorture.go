package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/cairn-storage/cairn/appliance/internal/pki"
	"github.com/cairn-storage/cairn/appliance/internal/torture"
)

func init() {
	register("ats-torture", "race compare-and-write clients on one block and record the history (tests)", runATSTorture)
}

func runATSTorture(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("ats-torture", flag.ContinueOnError)
	var c common
	c.add(fs)
	vol := fs.String("volume", "", "volume name or id")
	var cfg torture.Config
	fs.IntVar(&cfg.Clients, "clients", 4, "concurrent clients")
	fs.IntVar(&cfg.Ops, "ops", 500, "operations per client")
	fs.Int64Var(&cfg.Offset, "offset", 0, "byte offset of the block (a multiple of 512)")
	fs.DurationVar(&cfg.Duration, "duration", time.Minute, "stop after this long")
	fs.Int64Var(&cfg.Seed, "seed", 1, "random seed")
	security := dataSecurityFlag(fs)
	history := fs.String("history", "", "file for the JSON-lines history (default stdout)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *vol == "" {
		return errorf("--volume is required")
	}
	log := c.logger("ats-torture")
	_, cl, closeClient, err := c.dataClientAs(ctx, log, pki.RoleClient, *security)
	if err != nil {
		return err
	}
	defer closeClient()
	v, err := cl.Open(ctx, *vol)
	if err != nil {
		return err
	}
	out := os.Stdout
	if *history != "" {
		f, err := os.Create(*history)
		if err != nil {
			return err
		}
		defer f.Close()
		out = f
	}
	sum, err := torture.Run(ctx, v, cfg, out)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "ats-torture: %d ops: %d reads, %d swaps, %d miscompares, %d unknown\n", sum.Ops, sum.Reads, sum.Swaps, sum.Miscompares, sum.Unknown)
	return nil
}
