package main

import (
	"context"
	"flag"
	"log/slog"
	"os"

	"github.com/cairn-storage/cairn/appliance/internal/firstboot"
)

func init() {
	register("firstboot", "configure this SVM from its deployment settings (OVF environment or NoCloud seed)", runFirstboot)
}

func runFirstboot(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("firstboot", flag.ContinueOnError)
	var o firstboot.Options
	o.RegisterFlags(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	o.Log = slog.New(slog.NewTextHandler(os.Stderr, nil)).With("role", "firstboot")
	return firstboot.Run(ctx, o)
}
