// Package gateway serves Cairn's REST API (/api/v1, OpenAPI 3.1), its
// authentication (users, roles, bearer tokens), TLS, the audit log and the
// Prometheus metrics; every tool (cairnctl, the vCenter plugin, Ansible)
// goes through it.
package gateway

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/cairn-storage/cairn/appliance/internal/model"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// DeviceProber prepares a device on its SDS when an admin adds it: the SDS
// checks that the path is not in use and holds no other cluster's data, and
// writes its superblock. It returns the capacity usable for chunks. Its
// error text is shown to the user; wrap model.ErrInUse / model.ErrExists for
// 409, model.ErrUnavailable (or return a net.Error) for 503; anything else
// is a 400.
type DeviceProber interface {
	PrepareDevice(ctx context.Context, sdsAddress, clusterID, deviceID, path string, force bool) (capacity int64, err error)
}

// Config of a gateway.
type Config struct {
	Etcd *clientv3.Client
	// Listen address; default DefaultListen. An SVM listens on its
	// management address (or 0.0.0.0:8443).
	Listen string
	// StateDir holds cert.pem, key.pem and, after the first start,
	// admin-password. Created 0700 if missing.
	StateDir string
	// TLS serves HTTPS. `cairn gateway` sets it by default (flag
	// --tls=true); plain HTTP is only for tests or behind a TLS proxy.
	TLS     bool
	Devices DeviceProber
	Logger  *slog.Logger
	// TokenTTL is the lifetime of a login token; default DefaultTokenTTL.
	TokenTTL time.Duration
	// StatsInterval between statistics samples; default DefaultStatsInterval.
	StatsInterval time.Duration
	// ObserveInterval: how often Run raises/clears alerts and progresses
	// jobs; default DefaultObserveInterval.
	ObserveInterval time.Duration
	// BootstrapTokenFile holds a one-time token the first gateway of a new system
	// accepts, for BootstrapTokenTTL (default DefaultBootstrapTokenTTL), to set the
	// admin password (bootstrap_token.go). "" = none.
	BootstrapTokenFile string
	BootstrapTokenTTL  time.Duration
	// Throttle of password attempts (throttle.go); zero fields take defaults.
	Throttle LoginThrottle
	// ClusterCA is the cluster CA (the gateway's --pki identity's), named in
	// the join tokens it creates (jointokens.go); nil without PKI, and then
	// no join token can be created.
	ClusterCA func() *x509.Certificate
}

// Defaults.
const (
	DefaultListen   = "127.0.0.1:8443"
	DefaultTokenTTL = 8 * time.Hour
	// DefaultObserveInterval paces alerts, state events and job progress.
	DefaultObserveInterval = 2 * time.Second
	// maxBody bounds every request body.
	maxBody = 1 << 20
	// maxHeaderBytes bounds the request line and headers (a bearer token
	// and an If-Match are all the API reads; 431 beyond).
	maxHeaderBytes = 64 << 10
)

// Connection limits against slow clients (slowloris): the TLS handshake
// and the headers must arrive within headerTimeout, the whole request
// within 60 s (a body is at most maxBody), the response must be written
// within 60 s (the event stream extends its own deadline per write), and
// an idle keep-alive connection is closed after 2 minutes. A variable so
// that a test can shorten it.
var headerTimeout = 10 * time.Second

// Server is a configured gateway; Handler serves the API.
type Server struct {
	// eventMu queues this gateway's event writers: they all move one
	// sequence key, and racing each other they only retry (events.go).
	eventMu sync.Mutex
	cfg     Config
	store   *model.Store
	log     *slog.Logger
	routes  []route
	handler http.Handler
	certs   *certSource // nil without TLS
	prog    progress    // rebuild rates, from the statistics seen so far
	stats   *statsSampler
	// life is the context New was given: background work started by a
	// request (a device-add job) lives as long as the server, not the
	// request. instance names this server in job claims.
	life     context.Context
	instance string
}

// New checks the configuration, prepares StateDir (TLS certificate, first
// admin user) and builds the handler.
func New(ctx context.Context, cfg Config) (*Server, error) {
	if cfg.Etcd == nil {
		return nil, errors.New("gateway: no etcd client configured")
	}
	if cfg.StateDir == "" {
		return nil, errors.New("gateway: no state directory configured (it holds the TLS key and the first admin password)")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Listen == "" {
		cfg.Listen = DefaultListen
	}
	if cfg.TokenTTL <= 0 {
		cfg.TokenTTL = DefaultTokenTTL
	}
	if cfg.ObserveInterval <= 0 {
		cfg.ObserveInterval = DefaultObserveInterval
	}
	cfg.Throttle = cfg.Throttle.withDefaults()
	if err := os.MkdirAll(cfg.StateDir, 0o700); err != nil {
		return nil, fmt.Errorf("gateway: create state directory: %w", err)
	}
	s := &Server{cfg: cfg, store: model.NewStore(cfg.Etcd), log: cfg.Logger, stats: newStatsSampler(cfg.StatsInterval),
		life: ctx, instance: model.NewID()}
	if cfg.TLS {
		c, err := loadOrCreateCert(cfg.StateDir, cfg.Listen)
		if err != nil {
			return nil, fmt.Errorf("gateway: %w", err)
		}
		s.certs = c
		s.log.Info("gateway TLS certificate", "cert", c.certFile, "sha256_fingerprint", c.fingerprint(),
			"note", "replace cert.pem and key.pem in the state directory with your own to use another certificate; it is reloaded on change")
	} else {
		s.log.Warn("gateway TLS disabled: serving plain HTTP; use only for tests or behind a TLS proxy")
	}
	if err := s.ensureAdmin(ctx); err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	s.routes = s.apiRoutes()
	s.handler = s.buildHandler()
	return s, nil
}

// Handler serves /api/v1/... and /metrics.
func (s *Server) Handler() http.Handler { return s.handler }

// Run listens on cfg.Listen and serves until ctx ends.
func Run(ctx context.Context, cfg Config) error {
	if cfg.Listen == "" {
		cfg.Listen = DefaultListen
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("gateway: listen on %s: %w (is another gateway running? set another address with --listen)", cfg.Listen, err)
	}
	return Serve(ctx, cfg, ln)
}

// Serve serves on ln until ctx ends, then shuts down gracefully; ln is closed.
func Serve(ctx context.Context, cfg Config, ln net.Listener) error {
	if cfg.Listen == "" {
		cfg.Listen = ln.Addr().String()
	}
	s, err := New(ctx, cfg)
	if err != nil {
		ln.Close()
		return err
	}
	hs := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: headerTimeout,
		ReadTimeout:       60 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	scheme := "http"
	if s.certs != nil {
		hs.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: s.certs.get}
		ln = tls.NewListener(ln, hs.TLSConfig)
		scheme = "https"
	}
	s.log.Info("gateway listening", "url", scheme+"://"+ln.Addr().String()+"/api/v1")
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	sctx, stopStats := context.WithCancel(ctx)
	defer stopStats()
	go s.runStatistics(sctx)
	bctx, stopBackground := context.WithCancel(ctx)
	background := make(chan struct{})
	go func() { defer close(background); s.Run(bctx) }()
	published := make(chan struct{})
	go func() { defer close(published); s.publishHTTPSCert(bctx) }()
	defer func() { stopBackground(); <-background; <-published }()
	select {
	case err := <-errc:
		return fmt.Errorf("gateway: serve: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err = hs.Shutdown(sctx)
	<-errc // Serve returned ErrServerClosed
	return err
}

// AdminPasswordFile is where the first start writes the generated password
// of user "admin" (mode 0600).
const AdminPasswordFile = "admin-password"

// ensureAdmin creates user "admin" with a random password when there are no
// users at all. There is never a default password.
func (s *Server) ensureAdmin(ctx context.Context) error {
	r, err := s.cfg.Etcd.Get(ctx, model.KindPrefix(model.KindUser), clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return fmt.Errorf("read users from etcd: %w", err)
	}
	if r.Count > 0 {
		return nil
	}
	var b [18]byte
	if _, err := rand.Read(b[:]); err != nil {
		return err
	}
	pw := base64.RawURLEncoding.EncodeToString(b[:])
	file := filepath.Join(s.cfg.StateDir, AdminPasswordFile)
	// The token goes in before the user: once any gateway can see the admin (and
	// so starts serving), the token works. Every gateway of a new system is given
	// the same token, so racing gateways write the same record.
	if err := s.storeBootstrapToken(ctx); err != nil {
		s.log.Error("bootstrap token not stored: give the deployer the first admin password instead", "password_file", file, "err", err)
	}
	// Write the file first: an admin whose password was never written
	// anywhere would lock everybody out.
	if err := writeFileAtomic(file, []byte(pw+"\n"), 0o600); err != nil {
		return fmt.Errorf("write first admin password: %w", err)
	}
	_, err = s.store.CreateUser(ctx, model.UserSpec{Name: "admin", Role: model.RoleAdmin, Password: pw})
	if errors.Is(err, model.ErrExists) {
		// Another gateway of the cluster was first; its SVM has the file.
		os.Remove(file)
		return nil
	}
	if err != nil {
		os.Remove(file)
		return fmt.Errorf("create first admin user: %w", err)
	}
	s.log.Warn("created the first user \"admin\" with a random password; log in with it and change it (cairnctl user update admin --password-file FILE), then delete the file",
		"password_file", file)
	return nil
}

// writeFileAtomic writes data to a temporary file in the same directory and
// renames it over path, so a crash never leaves a half-written file.
func writeFileAtomic(path string, data []byte, perm os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(perm); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
