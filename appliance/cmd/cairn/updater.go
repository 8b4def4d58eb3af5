package main

// cairn updater: the daemon that carries out the gateway's upgrade orders
// for this SVM (internal/update, Updater).

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/cairn-storage/cairn/appliance/internal/join"
	"github.com/cairn-storage/cairn/appliance/internal/pki"
	"github.com/cairn-storage/cairn/appliance/internal/update"
)

func init() {
	register("updater", "carry out the upgrade orders the gateway stores for this SVM", func(ctx context.Context, args []string) error {
		var c common
		fs := flag.NewFlagSet("updater", flag.ContinueOnError)
		c.add(fs)
		name := fs.String("name", os.Getenv("CAIRN_HOSTNAME"), "this SVM's name, as the gateway lists it ($CAIRN_HOSTNAME)")
		poll := fs.Duration("poll", 2*time.Second, "how often the order is read")
		renewEvery := fs.Duration("renew-every", 6*time.Hour, "how often the SVM's certificates ($CAIRN_PKI) are checked and renewed when due")
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
		keepCertificates(ctx, *renewEvery, log)
		u := &update.Updater{Name: *name, Store: update.Store{Etcd: cli}, Installer: in, Poll: *poll, Log: log}
		// nil: switched to a new version; exiting makes systemd
		// (Restart=always) start the updater on it.
		return u.Run(ctx)
	})
}

// keepCertificates renews, in the background, the appliance's certificates
// (CAIRN_PKI, one directory per role) when due: the updater runs on every
// SVM for as long as the SVM does, and a new version of it reaches old SVMs
// through the same upgrades. An MDM member (CAIRN_CA_KEEPER) signs its own
// from its copy of the CA; the others, and a member whose copy does not
// load, ask the members' join services (CAIRN_JOIN_URLS, any that answers).
func keepCertificates(ctx context.Context, every time.Duration, log *slog.Logger) {
	base := os.Getenv("CAIRN_PKI")
	if base == "" {
		return
	}
	var ca *pki.CA
	if os.Getenv("CAIRN_CA_KEEPER") == "true" {
		var err error
		if ca, err = pki.LoadCA(caKeptDir); err != nil {
			log.Warn("this SVM keeps the CA but cannot load it: its certificates are renewed at the other MDM members' join services",
				"err", err, "fix", "journalctl -u cairn-certs (cairn pki fetch-ca fetches the CA again)")
			ca = nil
		}
	}
	go join.Keep(ctx, base, strings.Split(os.Getenv("CAIRN_JOIN_URLS"), ","), ca, every, log)
}

// caKeptDir is where every MDM member of an appliance keeps the CA
// (packer/files/cairn-role, CA).
const caKeptDir = "/var/lib/cairn/ca"
