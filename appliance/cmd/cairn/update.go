package main

// cairn update: install a bundle on this SVM and switch to it, by hand (the
// updater daemon does the same for an order from the gateway).

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/cairn-storage/cairn/appliance/internal/update"
)

// installerFlags are the flags of the install, switch and health check,
// shared by cairn update and cairn updater.
func installerFlags(fs *flag.FlagSet) *update.Installer {
	in := &update.Installer{}
	fs.StringVar(&in.Root, "root", "/", "root directory of the installation (/usr/local/bin, /usr/local/lib/cairn, /etc/systemd/system under it)")
	fs.StringVar(&in.Systemctl, "systemctl", "systemctl", "the systemctl program")
	fs.DurationVar(&in.Settle, "settle", 5*time.Second, "how long each restarted unit must stay active on the new version")
	fs.DurationVar(&in.StartTimeout, "start-timeout", 30*time.Second, "how long a restarted unit may take to become active on the new version")
	return in
}

func init() {
	register("update", "install an update bundle and switch this SVM's daemons to it (rolled back if unhealthy)", func(ctx context.Context, args []string) error {
		fs := flag.NewFlagSet("update", flag.ContinueOnError)
		file := fs.String("bundle", "", "update bundle (cairn bundle)")
		in := installerFlags(fs)
		if err := parse(fs, args); err != nil {
			return err
		}
		if *file == "" {
			return fmt.Errorf("--bundle is required")
		}
		f, err := os.Open(*file)
		if err != nil {
			return err
		}
		b, err := update.Read(f)
		f.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", *file, err)
		}
		in.Log = slog.New(slog.NewTextHandler(os.Stderr, nil))
		res, err := in.Update(ctx, b)
		if err != nil {
			return err
		}
		fmt.Printf("switched from %s to %s; restarted %v\n", res.From, res.To, res.Units)
		return nil
	})
}
