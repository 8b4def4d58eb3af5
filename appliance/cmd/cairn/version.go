package main

import (
	"context"
	"fmt"

	"github.com/cairn-storage/cairn/appliance/internal/buildinfo"
)

func init() {
	register("version", "print this binary's Cairn version", func(_ context.Context, args []string) error {
		if len(args) > 0 {
			return fmt.Errorf("no arguments")
		}
		fmt.Println(buildinfo.Version())
		return nil
	})
}
