package main

// cairn bundle: write an update bundle of a build (internal/update).

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/cairn-storage/cairn/appliance/internal/update"
)

func init() {
	register("bundle", "write an update bundle of the binaries in --bin (cairn, cairnctl)", func(_ context.Context, args []string) error {
		fs := flag.NewFlagSet("bundle", flag.ContinueOnError)
		bin := fs.String("bin", "", "directory holding the cairn and cairnctl to bundle (its version is what its cairn says)")
		out := fs.String("out", "", "bundle file to write")
		if err := parse(fs, args); err != nil {
			return err
		}
		if *bin == "" || *out == "" {
			return fmt.Errorf("--bin and --out are required")
		}
		f, err := os.Create(*out)
		if err != nil {
			return err
		}
		m, err := update.Write(f, *bin)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			os.Remove(*out)
			return err
		}
		fmt.Printf("%s: Cairn %s (%s)\n", *out, m.Version, "cairn, cairnctl")
		return nil
	})
}
