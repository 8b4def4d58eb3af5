package main

// cairn updater: the daemon that carries out the gateway's upgrade orders
// for this SVM (internal/update, Updater).

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/cairn-storage/cairn/appliance/internal/update"
)

func init() {
	register("updater", "carry out the upgrade orders the gateway stores for this SVM", func(ctx context.Context, args []string) error {
		var c common
		fs := flag.NewFlagSet("updater", flag.ContinueOnError)
		c.add(fs)
		name := fs.String("name", os.Getenv("CAIRN_HOSTNAME"), "this SVM's name, as the gateway lists it ($CAIRN_HOSTNAME)")
		poll := fs.Duration("poll", 2*time.Second, "how often the order is read")
		in := installerFlags(fs)
		if err := parse(fs, args); err != nil {
			return err
		}
		if *name == "" {
			return fmt.Errorf("--name (or $CAIRN_HOSTNAME) is required")
		}
		log := c.logger("updater")
		in.Log = log
		cli, err := c.etcd(ctx)
		if err != nil {
			return err
		}
		defer cli.Close()
		u := &update.Updater{Name: *name, Store: update.Store{Etcd: cli}, Installer: in, Poll: *poll, Log: log}
		// nil: switched to a new version; exiting makes systemd
		// (Restart=always) start the updater on it.
		return u.Run(ctx)
	})
}
