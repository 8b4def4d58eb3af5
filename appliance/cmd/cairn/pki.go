package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/cairn-storage/cairn/appliance/internal/pki"
)

func init() {
	register("pki", "the cluster's certificates: init (CA), issue (a daemon's), serve (the join service, on an MDM), join (a node's certificate with a join token), fetch-ca (an MDM member's copy of the CA), renew (a new certificate for a valid one), show (expiry), backup|restore (the CA key, sealed, in etcd)", runPKI)
}

func runPKI(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return errorf("usage: cairn pki init|issue|serve|join|fetch-ca|renew|show|backup|restore [flags] (cairn pki SUBCOMMAND -h for its flags)")
	}
	switch args[0] {
	case "init":
		fs := flag.NewFlagSet("pki init", flag.ContinueOnError)
		dir := fs.String("dir", "", "CA directory to create (ca.crt, ca.key 0600); keep it on the MDM members only (the others get it with cairn pki fetch-ca)")
		cluster := fs.String("cluster", "", "cluster name, written into the CA's name")
		validity := fs.Duration("validity", pki.DefaultCAValidity, "CA lifetime")
		if err := parse(fs, args[1:]); err != nil {
			return err
		}
		if *dir == "" || *cluster == "" {
			return errorf("--dir and --cluster are required")
		}
		ca, err := pki.InitCA(*dir, *cluster, *validity)
		if err != nil {
			return err
		}
		fmt.Printf("CA created in %s (expires %s); its key %s stays there (mode 0600)\n", *dir,
			ca.Cert.NotAfter.UTC().Format(time.RFC3339), filepath.Join(*dir, pki.CAKeyFile))
		return nil
	case "issue":
		fs := flag.NewFlagSet("pki issue", flag.ContinueOnError)
		caDir := fs.String("ca", "", "CA directory (from cairn pki init)")
		out := fs.String("out", "", "the daemon's PKI directory to write (ca.crt, node.crt, node.key 0600); its --pki")
		var r pki.Request
		fs.StringVar(&r.Role, "role", "", "one of "+strings.Join(pki.Roles, ", "))
		fs.StringVar(&r.Name, "name", "", "the daemon's name (an SDS's or MDM's name, a host's name...)")
		hosts := fs.String("host", "", "comma-separated IP addresses and DNS names it serves at")
		fs.DurationVar(&r.Validity, "validity", pki.DefaultNodeValidity, "certificate lifetime (capped at the CA's)")
		if err := parse(fs, args[1:]); err != nil {
			return err
		}
		if *caDir == "" || *out == "" || r.Role == "" || r.Name == "" {
			return errorf("--ca, --out, --role and --name are required")
		}
		if *hosts != "" {
			r.Hosts = strings.Split(*hosts, ",")
		}
		ca, err := pki.LoadCA(*caDir)
		if err != nil {
			return err
		}
		if err := ca.IssueTo(*out, r); err != nil {
			return err
		}
		id, err := pki.LoadIdentity(*out)
		if err != nil {
			return err
		}
		fmt.Printf("%s: certificate of %s, expires %s\n", *out, id.Peer(), id.Leaf().NotAfter.UTC().Format(time.RFC3339))
		return nil
	case "backup":
		return pkiBackup(ctx, args[1:])
	case "serve":
		return pkiServe(ctx, args[1:])
	case "join":
		return pkiJoin(ctx, args[1:])
	case "fetch-ca":
		return pkiFetchCA(ctx, args[1:])
	case "renew":
		return pkiRenew(ctx, args[1:])
	case "restore":
		return pkiRestore(ctx, args[1:])
	case "show":
		fs := flag.NewFlagSet("pki show", flag.ContinueOnError)
		dir := fs.String("dir", envOr("CAIRN_PKI_DIR", ""), "a PKI directory ($CAIRN_PKI_DIR)")
		if err := parse(fs, args[1:]); err != nil {
			return err
		}
		if *dir == "" {
			return errorf("--dir is required")
		}
		id, err := pki.LoadIdentity(*dir)
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(os.Stdout, 2, 8, 2, ' ', 0)
		fmt.Fprintln(tw, "ROLE\tNAME\tSERIAL\tNOT AFTER\tSHA-256")
		for _, i := range []pki.Info{pki.InfoOf(id.Leaf()), pki.InfoOf(id.CA())} {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", i.Role, i.Name, i.Serial, i.NotAfter.Format(time.RFC3339), i.Fingerprint[:16])
		}
		return tw.Flush()
	}
	return errorf("unknown subcommand %q: use init, issue, serve, join, fetch-ca, renew, show, backup or restore", args[0])
}
