package main

import (
	"context"
	"flag"

	"github.com/cairn-storage/cairn/appliance/internal/mdm"
)

func init() {
	register("mdm", "run a metadata manager member (embedded etcd; leader runs the control loop)", runMDM)
}

func runMDM(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("mdm", flag.ContinueOnError)
	var c common
	c.add(fs)
	var cfg mdm.Config
	fs.StringVar(&cfg.Name, "name", "mdm1", "member name, unique in the cluster")
	fs.StringVar(&cfg.DataDir, "data-dir", "/var/lib/cairn/mdm", "etcd data directory")
	fs.StringVar(&cfg.PeerURL, "peer-url", "http://127.0.0.1:2380", "peer URL (listen and advertise); https with --pki")
	fs.StringVar(&cfg.ClientURL, "client-url", "http://127.0.0.1:2379", "client URL (listen and advertise); https with --pki")
	fs.StringVar(&cfg.InitialCluster, "initial-cluster", "", "name=peerURL,... of every member (default: this one alone)")
	fs.BoolVar(&cfg.Join, "join", false, "join a running cluster this member was added to (cairnctl mdm add prints its --initial-cluster); only read on the first start")
	fs.BoolVar(&cfg.TieBreaker, "tie-breaker", false, "vote in the quorum but never lead")
	if err := parse(fs, args); err != nil {
		return err
	}
	cfg.Logger = c.logger("mdm")
	id, err := c.identity(ctx, "mdm", cfg.Logger)
	if err != nil {
		return err
	}
	cfg.Identity = id
	return mdm.Run(ctx, cfg)
}
