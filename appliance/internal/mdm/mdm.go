// Package mdm is Cairn's metadata manager: an embedded etcd member that
// holds the system model, and, on the elected leader, the control loop that
// computes placement maps (and, with self-healing, detects failures and
// drives rebuilds). A tie-breaker member votes in etcd but never leads.
package mdm

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cairn-storage/cairn/appliance/internal/model"
	"github.com/cairn-storage/cairn/appliance/internal/pki"
	"github.com/cairn-storage/cairn/appliance/internal/refusals"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.etcd.io/etcd/server/v3/embed"
)

// Config configures one MDM member.
type Config struct {
	Name           string
	DataDir        string
	PeerURL        string // listen and advertise, e.g. http://127.0.0.1:2380
	ClientURL      string // listen and advertise, e.g. http://127.0.0.1:2379
	InitialCluster string // name=peerURL,... of every member
	// Join: this member was added to a running cluster (POST /mdm/members,
	// whose answer gives InitialCluster) and joins it as a learner, instead
	// of forming a new cluster with the members named. Only the first start
	// reads it: a member with data rejoins from its data directory.
	Join       bool
	TieBreaker bool
	Logger     *slog.Logger
	// ElectionTTL in seconds for the leader's session (default 3).
	ElectionTTL int
	// Identity is the member's certificate (role mdm, with the IP SANs of
	// its URLs). With it, etcd serves https on both URLs, requires a
	// certificate of the cluster's CA from every client and peer, accepts
	// only mdm peers, and the elected leader sets up and enables etcd's
	// access control (rbac.go). Without it (tests, a lab) etcd is plain
	// http and open to anyone who reaches it.
	Identity *pki.Identity
	// Refusals receives the connections etcd refused (no or a foreign
	// certificate, plain text on a TLS port); Run makes one if nil.
	Refusals *refusals.Reporter
}

// Run starts the member and serves until ctx ends.
func Run(ctx context.Context, cfg Config) error {
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	log = log.With("mdm", cfg.Name)
	if cfg.ElectionTTL == 0 {
		cfg.ElectionTTL = 3
	}
	if cfg.Refusals == nil {
		cfg.Refusals = refusals.New(pki.RoleMDM, cfg.Name, log)
	}
	e, err := Start(cfg)
	if err != nil {
		return err
	}
	defer stop(e, log)
	select {
	case <-e.Server.ReadyNotify():
	case <-ctx.Done():
		return nil
	case err := <-e.Err():
		return fmt.Errorf("mdm %s: etcd: %w", cfg.Name, err)
	}
	log.Info("MDM member ready", "client_url", cfg.ClientURL, "tie_breaker", cfg.TieBreaker, "authenticated", cfg.Identity != nil)
	if cfg.Identity == nil {
		log.Warn("MDM runs without a PKI (--pki): etcd is plain http and anyone who reaches it may read and change the system model")
	}
	if err := publishRole(ctx, cfg, log); err != nil {
		log.Warn("MDM role not published (the API shows it as a full member until it is)", "err", err)
	}
	if rc, err := ownClient(cfg, log); err == nil {
		defer rc.Close()
		go cfg.Refusals.Run(ctx, rc, 0)
		if cfg.Identity != nil {
			// Its certificate's expiry and the version it runs, in the API
			// (GET /system/certificates, /system/versions), like every daemon.
			go pki.Publish(ctx, rc, cfg.Identity, log)
		}
	}
	if cfg.TieBreaker {
		select {
		case <-ctx.Done():
			return nil
		case err := <-e.Err():
			return fmt.Errorf("mdm %s: etcd: %w", cfg.Name, err)
		}
	}
	cli, err := ownClient(cfg, log)
	if err != nil {
		return fmt.Errorf("mdm %s: client: %w", cfg.Name, err)
	}
	defer cli.Close()
	errc := make(chan error, 1)
	go func() { errc <- campaign(ctx, cli, cfg, log) }()
	select {
	case <-ctx.Done():
		<-errc
		return nil
	case err := <-e.Err():
		return fmt.Errorf("mdm %s: etcd: %w", cfg.Name, err)
	}
}

// closeWait bounds how long a stopping member waits for its client
// connections to close (stop).
const closeWait = time.Second

// stop ends the member. etcd's Close first waits, up to its request
// timeout (7 s with this election timeout), for every client connection to
// go idle, and the other daemons' watches never do: an MDM took 10 s to
// exit on SIGTERM, 10 s of every upgrade and maintenance of an MDM SVM. So
// the server is stopped first: leadership handed to another member at once
// (no election timeout for the others), raft stopped, the data written and
// closed. The listeners are then closed for at most closeWait more; what
// is left goes with the process (the clients reconnect to another member,
// as they would after any failure).
func stop(e *embed.Etcd, log *slog.Logger) {
	e.Server.Stop()
	done := make(chan struct{})
	go func() { e.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(closeWait):
		log.Info("MDM member stopped; its client connections close with the process")
	}
}

// publishRole records whether this member is a tie-breaker, through its own
// client URL, once it is ready.
func publishRole(ctx context.Context, cfg Config, log *slog.Logger) error {
	cli, err := ownClient(cfg, log)
	if err != nil {
		return err
	}
	defer cli.Close()
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err = cli.Put(pctx, model.MDMRolePrefix+cfg.Name, fmt.Sprintf(`{"tie_breaker":%t}`, cfg.TieBreaker))
	return err
}

// ownClient is a client of this member's own etcd, as user mdm (root).
func ownClient(cfg Config, log *slog.Logger) (*clientv3.Client, error) {
	cc, err := ClientConfig([]string{cfg.ClientURL}, cfg.Identity, log)
	if err != nil {
		return nil, err
	}
	return clientv3.New(cc)
}

// Start launches the embedded etcd member.
func Start(cfg Config) (*embed.Etcd, error) {
	pu, err := url.Parse(cfg.PeerURL)
	if err != nil {
		return nil, fmt.Errorf("mdm %s: peer url: %w", cfg.Name, err)
	}
	cu, err := url.Parse(cfg.ClientURL)
	if err != nil {
		return nil, fmt.Errorf("mdm %s: client url: %w", cfg.Name, err)
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("mdm %s: data dir: %w", cfg.Name, err)
	}
	ec := embed.NewConfig()
	ec.Name = cfg.Name
	ec.Dir = cfg.DataDir
	ec.LogLevel = "error"
	if cfg.Refusals != nil {
		ec.ZapLoggerBuilder = embed.NewZapLoggerBuilder(refusalLogger(cfg.Refusals))
	}
	ec.ListenPeerUrls, ec.AdvertisePeerUrls = []url.URL{*pu}, []url.URL{*pu}
	ec.ListenClientUrls, ec.AdvertiseClientUrls = []url.URL{*cu}, []url.URL{*cu}
	if err := serveTLS(ec, cfg, pu, cu); err != nil {
		return nil, err
	}
	ec.InitialCluster = cfg.InitialCluster
	if ec.InitialCluster == "" {
		ec.InitialCluster = cfg.Name + "=" + cfg.PeerURL
	}
	ec.InitialClusterToken = "cairn"
	// Restarted members rejoin from their data directory; InitialCluster
	// and Join only matter for the first start. A new member of a running
	// cluster must say so: as "new" it would found a cluster of its own
	// (another cluster id) that the running members refuse to talk to.
	ec.ClusterState = embed.ClusterStateFlagNew
	if cfg.Join {
		ec.ClusterState = embed.ClusterStateFlagExisting
		if cfg.InitialCluster == "" || !strings.Contains(cfg.InitialCluster, ",") {
			return nil, fmt.Errorf("mdm %s: --join needs --initial-cluster with every member, as the API answered when the member was added (cairnctl mdm add)", cfg.Name)
		}
	}
	// Failure detection within seconds: a 100 ms heartbeat and a 1 s
	// election timeout, as etcd recommends for a LAN.
	ec.TickMs, ec.ElectionMs = 100, 1000
	ec.AutoCompactionMode = "periodic"
	ec.AutoCompactionRetention = "1h"
	if !strings.Contains(ec.InitialCluster, cfg.Name+"=") {
		return nil, fmt.Errorf("mdm %s: --initial-cluster does not name this member", cfg.Name)
	}
	e, err := embed.StartEtcd(ec)
	if err != nil {
		return nil, fmt.Errorf("mdm %s: start etcd: %w", cfg.Name, err)
	}
	return e, nil
}

// serveTLS configures https with client-certificate authentication on both
// URLs when the member has an identity, and checks the URLs' schemes
// either way (a member serving http among https peers would never join).
func serveTLS(ec *embed.Config, cfg Config, urls ...*url.URL) error {
	want, serves := "http", "without --pki the MDM serves plain http"
	if cfg.Identity != nil {
		want, serves = "https", "with --pki the MDM serves https"
	}
	for _, u := range urls {
		if u.Scheme != want {
			return fmt.Errorf("mdm %s: URL %s: %s; give %s://%s", cfg.Name, u, serves, want, u.Host)
		}
	}
	for _, m := range strings.Split(cfg.InitialCluster, ",") {
		if _, peer, ok := strings.Cut(m, "="); ok && !strings.HasPrefix(peer, want+"://") {
			return fmt.Errorf("mdm %s: --initial-cluster member %s: peers serve %s here; give %s:// URLs", cfg.Name, m, want, want)
		}
	}
	if cfg.Identity == nil {
		return nil
	}
	dir := cfg.Identity.Dir()
	info := transport.TLSInfo{
		CertFile:      filepath.Join(dir, pki.NodeCertFile),
		KeyFile:       filepath.Join(dir, pki.NodeKeyFile),
		TrustedCAFile: filepath.Join(dir, pki.CACertFile),
		// A client must present a certificate of the cluster CA; etcd
		// takes its common name (the role) as the etcd user (rbac.go).
		ClientCertAuth: true,
	}
	ec.ClientTLSInfo = info
	// Peers: only MDM certificates may join the raft group. etcd checks
	// the CN on both sides of a peer connection.
	info.AllowedCNs = []string{pki.RoleMDM}
	ec.PeerTLSInfo = info
	return nil
}

// campaign competes for leadership and runs the control loop while leader,
// until the session ends or a hand-over request (handover.go) names
// another member; then it resigns and campaigns again.
func campaign(ctx context.Context, cli *clientv3.Client, cfg Config, log *slog.Logger) error {
	for ctx.Err() == nil {
		sess, err := concurrency.NewSession(cli, concurrency.WithTTL(cfg.ElectionTTL), concurrency.WithContext(ctx))
		if err != nil {
			log.Debug("election session", "err", err)
			sleep(ctx, 500*time.Millisecond)
			continue
		}
		el := concurrency.NewElection(sess, model.ElectionPrefix)
		if err := el.Campaign(ctx, cfg.Name); err != nil {
			sess.Close()
			sleep(ctx, 200*time.Millisecond)
			continue
		}
		log.Info("MDM leader elected", "leader", cfg.Name)
		if retry := prepareTerm(ctx, cli, cfg, log); retry > 0 {
			rctx, rcancel := context.WithTimeout(context.Background(), time.Second)
			_ = el.Resign(rctx)
			rcancel()
			sess.Close()
			sleep(ctx, retry)
			continue
		}
		lctx, cancel := context.WithCancel(ctx)
		go func() {
			select {
			case <-sess.Done():
			case <-lctx.Done():
			}
			cancel()
		}()
		// A hand-over request ends the term like a lost session: the
		// control loop stops before the resignation lets the next
		// candidate start its own.
		handover := make(chan string, 1)
		go func() {
			handover <- awaitHandover(lctx, cli, cfg.Name, log)
			cancel()
		}()
		(&Controller{Etcd: cli, Log: log}).Run(lctx)
		cancel()
		to := <-handover
		rctx, rcancel := context.WithTimeout(context.Background(), time.Second)
		_ = el.Resign(rctx)
		rcancel()
		sess.Close()
		switch {
		case ctx.Err() != nil:
		case to != "":
			log.Info("MDM leadership handed over on request; campaigning again", "to", to)
		default:
			log.Warn("MDM leadership lost; campaigning again")
		}
	}
	return nil
}

// prepareTerm is what a new leader does before its control loop. A retry
// delay (the reason logged) means it must not lead now: it resigns, waits
// that long and campaigns again.
func prepareTerm(ctx context.Context, cli *clientv3.Client, cfg Config, log *slog.Logger) (retry time.Duration) {
	// A model newer than this binary reads is not led by it (a member of
	// the old version during or after a roll): another member leads.
	sch, err := model.EnsureSchema(ctx, cli)
	if err != nil {
		log.Error("not leading: model schema", "err", err)
		return 10 * time.Second // long enough for a member that reads it to win the next election
	}
	log.Debug("model schema", "version", sch.Version, "written_by", sch.WrittenBy)
	// Secrets a Cairn from before SecretPrefix stored inline in the model
	// move out of it before any daemon may read the model.
	if n, err := model.NewStore(cli).MoveSecrets(ctx); err != nil {
		log.Error("CHAP secrets and password hashes not moved out of the model; resigning and retrying", "err", err)
		return 2 * time.Second
	} else if n > 0 {
		log.Info("CHAP secrets and password hashes moved out of the model", "objects", n, "to", model.SecretPrefix)
	}
	if cfg.Identity != nil {
		// Access control before the control loop: daemons of every role
		// may already be waiting to connect.
		if err := EnsureAccess(ctx, cli, log); err != nil {
			log.Error("etcd access control not set up; resigning and retrying", "err", err)
			return 2 * time.Second
		}
	}
	return 0
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
