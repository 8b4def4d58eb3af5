package main

// cairn pki serve | join | renew | fetch-ca: certificates at join time, and
// the CA for every MDM member (internal/join).

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/cairn-storage/cairn/appliance/contract"
	"github.com/cairn-storage/cairn/appliance/internal/join"
	"github.com/cairn-storage/cairn/appliance/internal/model"
	"github.com/cairn-storage/cairn/appliance/internal/pki"
	"github.com/cairn-storage/cairn/appliance/internal/refusals"
)

// DefaultJoinListen is the join service's port (an MDM's; management network).
const DefaultJoinListen = ":7443"

// pkiServe runs the join service on an MDM: the CA of --ca signs the
// certificate of each node that presents a join token (etcd, as the MDM of
// --pki, keeps the tokens) or, with --bootstrap-token-file, during a new
// system's bootstrap window, proves it holds the bootstrap token. It serves
// at once, etcd reachable or not: at first boot the other MDMs need their
// certificates before etcd has a quorum.
func pkiServe(ctx context.Context, args []string) error {
	var c common
	fs := flag.NewFlagSet("pki serve", flag.ContinueOnError)
	c.add(fs)
	caDir := fs.String("ca", "", "the CA directory the MDMs keep (ca.crt, ca.key)")
	listen := fs.String("listen", envOr("CAIRN_JOIN_LISTEN", DefaultJoinListen), "address of the join service ($CAIRN_JOIN_LISTEN)")
	bootstrapFile := fs.String("bootstrap-token-file", "", "file holding the new system's bootstrap token (cairn.cluster.join_token): nodes that prove they hold it get any certificate until "+
		contract.BootstrapTokenLifetime.String()+" after the CA was created (read from ca.crt's certificate, not the file's time)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *caDir == "" || c.pkiDir == "" {
		return errorf("--ca and --pki (this MDM's certificate) are required")
	}
	log := c.logger("join")
	ca, err := pki.LoadCA(*caDir)
	if err != nil {
		return err
	}
	id, err := c.identity(ctx, pki.RoleMDM, log)
	if err != nil {
		return err
	}
	if !id.CA().Equal(ca.Cert) {
		return errorf("--ca holds another CA than the one --pki's certificate trusts: give this cluster's")
	}
	var boot *join.Bootstrap
	if *bootstrapFile != "" {
		b, err := os.ReadFile(*bootstrapFile)
		if err != nil {
			return fmt.Errorf("--bootstrap-token-file: %w", err)
		}
		// An MDM member added to an existing system was given a join token,
		// spent at its first boot: no bootstrap window is keyed to it.
		if !contract.IsJoinToken(string(b)) {
			if boot, err = join.NewBootstrap(string(b), ca); err != nil {
				return fmt.Errorf("--bootstrap-token-file %s: %w", *bootstrapFile, err)
			}
		}
	}
	cli, err := c.dialEtcd(ctx)
	if err != nil {
		return err
	}
	defer cli.Close()
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("--listen %s: %w", *listen, err)
	}
	log.Info("join service listening", "address", ln.Addr().String(), "ca_sha256", pki.InfoOf(ca.Cert).Fingerprint)
	switch {
	case boot == nil:
		log.Info("join service: join tokens only (no bootstrap token: none given, or this member joined with a join token)")
	case time.Now().Before(boot.Until):
		log.Info("join service: bootstrap window open", "until", boot.Until.UTC().Format(time.RFC3339))
	default:
		log.Info("join service: bootstrap window closed: join tokens only", "closed_at", boot.Until.UTC().Format(time.RFC3339))
	}
	// The schema check waits for etcd: beside the service, not before it.
	ctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	go func() {
		if err := c.etcdReady(ctx, cli); err != nil {
			stop(err)
		}
	}()
	rep := refusals.New(pki.RoleMDM, id.Peer().Name, log)
	go rep.Run(ctx, cli, 0)
	err = (&join.Server{CA: ca, Identity: id, Store: join.Store{Etcd: cli}, Bootstrap: boot, Log: log, Refusals: rep}).Serve(ctx, ln)
	if cause := context.Cause(ctx); err == nil && errors.Is(cause, model.ErrSchemaTooNew) {
		return cause
	}
	return err
}

// pkiJoin gets this node's certificate with a join token, or at a new
// system's first boot with its bootstrap token (join.Join tells them apart),
// and writes its PKI directory.
func pkiJoin(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("pki join", flag.ContinueOnError)
	urls := fs.String("url", "", "comma-separated join services, https://MDM:7443 (each MDM that runs `cairn pki serve`)")
	tokenFile := fs.String("token-file", "", "file holding the join token (`cairnctl join-token create`) or, at a new system's first boot, its bootstrap token; never on the command line")
	out := fs.String("out", "", "the PKI directory to write (ca.crt, node.crt, node.key 0600): the daemon's --pki")
	var r pki.Request
	fs.StringVar(&r.Role, "role", "", "the certificate's role, one the token allows: "+strings.Join(pki.Roles, ", "))
	fs.StringVar(&r.Name, "name", "", "the daemon's name (its SDS's or MDM's name, the host's name...)")
	hosts := fs.String("host", "", "comma-separated IP addresses and DNS names it serves at")
	wait := fs.Duration("wait", 0, "keep trying while no join service answers, up to this long (first boot: the MDM may start later)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *urls == "" || *tokenFile == "" || *out == "" || r.Role == "" || r.Name == "" {
		return errorf("--url, --token-file, --out, --role and --name are required")
	}
	if *hosts != "" {
		r.Hosts = strings.Split(*hosts, ",")
	}
	if _, err := os.Stat(*out + "/" + pki.NodeCertFile); err == nil {
		return errorf("%s already holds a certificate: use it, or remove the directory to join again", *out)
	}
	tok, err := os.ReadFile(*tokenFile)
	if err != nil {
		return fmt.Errorf("--token-file: %w", err)
	}
	return retry(ctx, "cairn pki join", *wait, func(err error) bool { return !join.Final(err) }, func() error {
		cert, err := join.Join(ctx, strings.Split(*urls, ","), string(tok), r, *out)
		if err == nil {
			fmt.Printf("%s: certificate of %s/%s, expires %s\n", *out, r.Role, r.Name, cert.NotAfter.UTC().Format(time.RFC3339))
		}
		return err
	})
}

// retry runs try until it succeeds, fails in a way again says is not worth
// another try, or wait is over, every 5 s, saying so on stderr as cmd.
func retry(ctx context.Context, cmd string, wait time.Duration, again func(error) bool, try func() error) error {
	deadline := time.Now().Add(wait)
	for {
		err := try()
		if err == nil || !again(err) || time.Now().After(deadline) {
			return err
		}
		fmt.Fprintf(os.Stderr, "%s: %v; trying again in 5 s\n", cmd, err)
		select {
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		case <-time.After(5 * time.Second):
		}
	}
}

// pkiFetchCA gives an MDM member its copy of the cluster CA (--ca) from the
// join service of a member that has it, presenting its mdm certificate
// (--pki): every MDM member keeps the CA and serves joins, so nodes join and
// renew while any one member is down. When --ca holds that CA already,
// nothing is fetched (first boot runs it on every boot).
func pkiFetchCA(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("pki fetch-ca", flag.ContinueOnError)
	urls := fs.String("url", os.Getenv("CAIRN_JOIN_URLS"), "comma-separated join services of the MDM members, https://MDM:7443 ($CAIRN_JOIN_URLS)")
	pkiDir := fs.String("pki", "", "this MDM member's PKI directory of role mdm: its certificate is presented, and names the CA to fetch")
	caDir := fs.String("ca", "", "the CA directory to write (ca.crt, ca.key 0600, the directory 0700)")
	wait := fs.Duration("wait", 0, "keep trying while no join service answers, up to this long")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *urls == "" || *pkiDir == "" || *caDir == "" {
		return errorf("--url, --pki and --ca are required")
	}
	return retry(ctx, "cairn pki fetch-ca", *wait, join.Unanswered, func() error {
		ca, fetched, err := join.FetchCA(ctx, strings.Split(*urls, ","), *pkiDir, *caDir)
		switch {
		case err != nil:
		case fetched:
			fmt.Printf("%s: the cluster CA (SHA-256 %s), fetched; its key is kept there (mode 0600)\n", *caDir, pki.InfoOf(ca.Cert).Fingerprint)
		default:
			fmt.Printf("%s: holds the cluster CA already (SHA-256 %s): nothing fetched\n", *caDir, pki.InfoOf(ca.Cert).Fingerprint)
		}
		return err
	})
}

// pkiRenew gives the PKI directories a new certificate each, for a new key,
// when due (the last third of its life) or with --force: at the join
// service, presenting the current certificate, or from --ca on an MDM
// member, which keeps the CA.
func pkiRenew(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("pki renew", flag.ContinueOnError)
	dirs := fs.String("pki", "", "comma-separated PKI directories to renew (each a daemon's --pki)")
	urls := fs.String("url", os.Getenv("CAIRN_JOIN_URLS"), "comma-separated join services, https://MDM:7443 ($CAIRN_JOIN_URLS)")
	caDir := fs.String("ca", "", "renew from this CA directory instead (on an MDM member, which keeps the CA)")
	force := fs.Bool("force", false, "renew even when not due")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *dirs == "" || (*urls == "" && *caDir == "") {
		return errorf("--pki and --url (or --ca) are required")
	}
	var ca *pki.CA
	if *caDir != "" {
		var err error
		if ca, err = pki.LoadCA(*caDir); err != nil {
			return err
		}
	}
	var errs []error
	for _, d := range strings.Split(*dirs, ",") {
		cert, err := join.RenewIfDue(ctx, d, strings.Split(*urls, ","), ca, time.Now(), *force)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("%s: %w", d, err))
		case cert == nil:
			fmt.Printf("%s: not due yet (renewed in the last third of its life)\n", d)
		default:
			fmt.Printf("%s: renewed, expires %s\n", d, cert.NotAfter.UTC().Format(time.RFC3339))
		}
	}
	return errors.Join(errs...)
}
