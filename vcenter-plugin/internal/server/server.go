// Package server is the Cairn vSphere Client remote plugin server: it
// serves plugin.json and the UI, the extension descriptor, sessions cloned
// from the vSphere Client's (session token -> clone ticket -> CloneSession),
// and the REST +
// server-sent-events API the UI uses: inventory, plan suggestion and
// validation, deploy, volumes to datastores, rolling maintenance, jobs and
// their progress.
package server

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/vmware/govmomi/session"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/soap"

	"github.com/cairn-storage/cairn/vcenter-plugin/internal/datastore"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/deploy"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/gateway"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/inventory"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/maintenance"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/plan"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/progress"
)

// Config configures a Server.
type Config struct {
	VCenter *url.URL // vCenter SDK URL, e.g. https://vc.example/sdk
	// VCenterThumbprint pins vCenter's certificate (SHA-1, colon hex);
	// empty means the system's CAs must trust it.
	VCenterThumbprint string
	PublicURL         string // https://host:port the vSphere Client reaches us at
	// VCenterOrigins are the origins (https://vc.example) of the vSphere
	// Clients whose reverse proxy serves our UI; the origin of VCenter is
	// always one. State-changing calls from them must carry the
	// X-Cairn-Request header (see authed).
	VCenterOrigins []string
	StateDir       string // deploy and maintenance state, plans, certificate
	UIDir          string // built ui/ (index.html); empty: the API page
	Gateway        deploy.GatewayFactory
	Log            *progress.Log
	Logger         *slog.Logger
	Certificate    *Certificate
	// PatchHook, when set, patches hosts during rolling maintenance (run
	// with CAIRN_HOSTS); without it a roll waits for the operator.
	PatchHook []string
	// Engine timings, for tests; zero values keep the engines' defaults.
	ReadyTimeout, PollInterval time.Duration
	SessionTTL                 time.Duration // idle sessions expire; default 30 min
}

// Server is the plugin's HTTP handler and job runner.
type Server struct {
	cfg    Config
	mux    *http.ServeMux
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu       sync.Mutex
	sessions map[string]*userSession
	jobs     map[string]*Job
	maint    *maintenance.Engine
}

type userSession struct {
	client *vim25.Client
	user   string
	seen   time.Time
}

// Job is a background operation's status (JSON in the API).
type Job struct {
	Name    string    `json:"name"`
	State   string    `json:"state"` // running | succeeded | failed
	Error   string    `json:"error,omitempty"`
	Started time.Time `json:"started"`
	Ended   time.Time `json:"ended,omitzero"`
}

// New returns a server; Close stops its jobs.
func New(cfg Config) (*Server, error) {
	if cfg.VCenter == nil || cfg.StateDir == "" || cfg.Certificate == nil {
		return nil, errors.New("server: vCenter URL, state directory and certificate are required")
	}
	if cfg.Gateway == nil {
		cfg.Gateway = deploy.HTTPGateway
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Log == nil {
		cfg.Log = progress.NewLog(5000, cfg.Logger)
	}
	if cfg.SessionTTL == 0 {
		cfg.SessionTTL = 30 * time.Minute
	}
	s := &Server{cfg: cfg, mux: http.NewServeMux(), sessions: map[string]*userSession{}, jobs: map[string]*Job{}}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.maint = &maintenance.Engine{Log: cfg.Log, StateDir: cfg.StateDir, ReadyTimeout: cfg.ReadyTimeout, PollInterval: cfg.PollInterval}
	s.routes()
	return s, nil
}

// Close cancels running jobs and waits for them.
func (s *Server) Close() {
	s.cancel()
	s.wg.Wait()
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Content-Type-Options", "nosniff")
	s.mux.ServeHTTP(w, r)
}

func (s *Server) routes() {
	m := s.mux
	m.HandleFunc("GET /{$}", s.index)
	m.HandleFunc("GET /ui/plugin.json", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, 200, Manifest()) })
	m.HandleFunc("GET /ui/", s.ui)
	m.HandleFunc("GET /api/v1/extension", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, NewDescriptor(s.cfg.PublicURL, s.cfg.Certificate))
	})
	m.HandleFunc("GET /api/v1/plan/schema", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/schema+json")
		_, _ = w.Write(plan.Schema)
	})
	m.HandleFunc("POST /api/v1/session", s.login)
	m.HandleFunc("DELETE /api/v1/session", s.logout)
	m.HandleFunc("GET /api/v1/inventory", s.authed(s.inventory))
	m.HandleFunc("POST /api/v1/plan/suggest", s.authed(s.suggest))
	m.HandleFunc("POST /api/v1/plan/validate", s.authed(s.validate))
	m.HandleFunc("POST /api/v1/deploy", s.authed(s.deploy))
	m.HandleFunc("GET /api/v1/systems", s.authed(s.systems))
	m.HandleFunc("GET /api/v1/jobs", s.authed(s.listJobs))
	m.HandleFunc("GET /api/v1/events", s.authed(s.events))
	m.HandleFunc("POST /api/v1/volumes", s.authed(s.volume))
	m.HandleFunc("POST /api/v1/maintenance/{system}", s.authed(s.maintenance))
	m.HandleFunc("POST /api/v1/maintenance/{system}/continue", s.authed(s.maintenanceContinue))
}

// API lists the endpoints (the minimal page until the Angular UI ships).
var API = []struct{ Method, Path, What string }{
	{"GET", "/ui/plugin.json", "vSphere Client remote plugin manifest"},
	{"GET", "/api/v1/extension", "extension registration descriptor (client URL, server thumbprint)"},
	{"POST", "/api/v1/session", `{"username","password"} standalone; sets the session cookie. In the vSphere Client, send the client's session token in the X-Cairn-Session-Token header on every call instead`},
	{"DELETE", "/api/v1/session", "log out"},
	{"GET", "/api/v1/inventory", "datacenters, clusters, hosts, candidate disks, PCI devices, networks, templates"},
	{"GET", "/api/v1/plan/schema", "JSON Schema of the deployment plan"},
	{"POST", "/api/v1/plan/suggest", `{"datacenter","system","template","svm_cidr","iscsi_cidr"} -> a draft plan`},
	{"POST", "/api/v1/plan/validate", "plan -> {valid, problems[]}"},
	{"POST", "/api/v1/deploy", "plan -> 202 {job}; deploy or resume"},
	{"GET", "/api/v1/systems", "systems deployed by this plugin: deploy state, health, capacity, SDSs, devices, volumes"},
	{"GET", "/api/v1/jobs", "jobs and their state"},
	{"GET", "/api/v1/events?after=SEQ&job=NAME", "progress as server-sent events (replays buffered events after SEQ)"},
	{"POST", "/api/v1/volumes", `{"system","volume","size_gib","pool","hosts",...} -> 202 {job}: volume to VMFS datastore`},
	{"POST", "/api/v1/maintenance/{system}", `{"by":"host|faultset","mode","hosts","hook"} -> 202 {job}: rolling maintenance (resumes)`},
	{"POST", "/api/v1/maintenance/{system}/continue", "confirm the operator's patch step"},
}

func (s *Server) index(w http.ResponseWriter, r *http.Request) {
	if s.cfg.UIDir != "" {
		if _, err := os.Stat(filepath.Join(s.cfg.UIDir, "index.html")); err == nil {
			http.Redirect(w, r, "/ui/", http.StatusFound)
			return
		}
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	fmt.Fprint(w, "<!doctype html><html><head><meta charset=utf-8><title>Cairn vCenter plugin</title></head><body>")
	fmt.Fprintf(w, "<h1>Cairn vCenter plugin %s</h1><p>The UI is not built yet; the API:</p><table border=1 cellpadding=4><tr><th>Method</th><th>Path</th><th>What</th></tr>", Version)
	for _, a := range API {
		fmt.Fprintf(w, "<tr><td>%s</td><td><code>%s</code></td><td>%s</td></tr>", a.Method, htmlEscape(a.Path), htmlEscape(a.What))
	}
	fmt.Fprint(w, "</table></body></html>")
}

func htmlEscape(s string) string {
	var b []byte
	for _, c := range []byte(s) {
		switch c {
		case '<':
			b = append(b, "&lt;"...)
		case '>':
			b = append(b, "&gt;"...)
		case '&':
			b = append(b, "&amp;"...)
		case '"':
			b = append(b, "&quot;"...)
		default:
			b = append(b, c)
		}
	}
	return string(b)
}

func (s *Server) ui(w http.ResponseWriter, r *http.Request) {
	if s.cfg.UIDir == "" {
		http.Redirect(w, r, "/", http.StatusFound)
		return
	}
	http.StripPrefix("/ui/", http.FileServer(http.Dir(s.cfg.UIDir))).ServeHTTP(w, r)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, format string, args ...any) {
	writeJSON(w, status, map[string]string{"error": fmt.Sprintf(format, args...)})
}

// maxRequest bounds request bodies.
const maxRequest = 1 << 20

func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxRequest))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		writeError(w, http.StatusBadRequest, "request body: %v", err)
		return false
	}
	return true
}

const cookieName = "cairn_session"

func newID() string {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}

// vcClient connects to vCenter (not logged in).
func (s *Server) vcClient(ctx context.Context) (*vim25.Client, error) {
	sc := soap.NewClient(s.cfg.VCenter, false)
	if s.cfg.VCenterThumbprint != "" {
		sc.SetThumbprint(s.cfg.VCenter.Host, s.cfg.VCenterThumbprint)
	}
	return vim25.NewClient(ctx, sc)
}

func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Username string `json:"username,omitempty"`
		Password string `json:"password,omitempty"`
	}
	if !decode(w, r, &req) {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	c, err := s.vcClient(ctx)
	if err != nil {
		writeError(w, http.StatusBadGateway, "cannot reach vCenter %s: %v", s.cfg.VCenter.Host, err)
		return
	}
	if req.Username == "" {
		writeError(w, http.StatusBadRequest, "give username and password (inside the vSphere Client the UI signs in with the client's session token instead)")
		return
	}
	sm := session.NewManager(c)
	if err := sm.Login(ctx, url.UserPassword(req.Username, req.Password)); err != nil {
		writeError(w, http.StatusUnauthorized, "vCenter refused the user name or password: check them and try again")
		return
	}
	us, err := sm.UserSession(ctx)
	if err != nil || us == nil {
		writeError(w, http.StatusUnauthorized, "vCenter session is not valid: sign in again")
		return
	}
	id := newID()
	s.keep(id, &userSession{client: c, user: us.UserName, seen: time.Now()})
	// SameSite=None: the vSphere Client shows the UI in an iframe, a
	// third-party context for our origin; Secure and HttpOnly always, and
	// state-changing calls are checked against Origin (authed).
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: id, Path: "/", HttpOnly: true, Secure: true, SameSite: http.SameSiteNoneMode})
	writeJSON(w, http.StatusOK, map[string]string{"user": us.UserName})
}

func (s *Server) logout(w http.ResponseWriter, r *http.Request) {
	if ck, err := r.Cookie(cookieName); err == nil {
		s.mu.Lock()
		us := s.sessions[ck.Value]
		delete(s.sessions, ck.Value)
		s.mu.Unlock()
		if us != nil {
			_ = session.NewManager(us.client).Logout(r.Context())
		}
	}
	w.WriteHeader(http.StatusNoContent)
}

// keep stores a session under id, forgetting expired ones.
func (s *Server) keep(id string, us *userSession) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, old := range s.sessions {
		if time.Since(old.seen) > s.cfg.SessionTTL {
			delete(s.sessions, k)
		}
	}
	s.sessions[id] = us
}

// lookup returns the live session under id and marks it used.
func (s *Server) lookup(id string) *userSession {
	s.mu.Lock()
	defer s.mu.Unlock()
	us := s.sessions[id]
	if us != nil && time.Since(us.seen) > s.cfg.SessionTTL {
		delete(s.sessions, id)
		us = nil
	}
	if us != nil {
		us.seen = time.Now()
	}
	return us
}

// TokenHeader carries the vSphere Client's session token
// (htmlClientSdk.app.getSessionInfo().sessionToken) on every UI call made
// inside the client. A custom header, so no other site can make a browser
// send it (no CORS is served).
const TokenHeader = "X-Cairn-Session-Token"

// RequestHeader must be set on state-changing calls that come through a
// vCenter's reverse proxy (Origin is the vCenter's, shared with the
// client's other plugins): a cross-site form cannot set it.
const RequestHeader = "X-Cairn-Request"

// tokenSession returns the vCenter session cloned from the vSphere
// Client's session token, exchanging the token on first use. Sessions are
// keyed by the token's SHA-256 so the token itself is never stored.
func (s *Server) tokenSession(ctx context.Context, token string) (*userSession, error) {
	sum := sha256.Sum256([]byte(token))
	id := "token:" + hex.EncodeToString(sum[:])
	if us := s.lookup(id); us != nil {
		return us, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	c, err := s.vcClient(ctx)
	if err != nil {
		return nil, fmt.Errorf("cannot reach vCenter %s: %w", s.cfg.VCenter.Host, err)
	}
	ticket, err := CloneTicket(ctx, c, s.cfg.VCenter, token)
	if err != nil {
		return nil, err
	}
	sm := session.NewManager(c)
	if err := sm.CloneSession(ctx, ticket); err != nil {
		return nil, fmt.Errorf("vCenter refused the clone ticket: %w", err)
	}
	u, err := sm.UserSession(ctx)
	if err != nil || u == nil {
		return nil, fmt.Errorf("cloned vCenter session is not valid (%v)", err)
	}
	us := &userSession{client: c, user: u.UserName, seen: time.Now()}
	s.keep(id, us)
	return us, nil
}

// originAllowed says whether a state-changing call from origin may go on:
// our own origin; a vCenter's (the proxied UI) with RequestHeader set; or
// none (not a browser: the CLI, installer and tests).
func (s *Server) originAllowed(r *http.Request) bool {
	o := r.Header.Get("Origin")
	if o == "" || o == s.cfg.PublicURL {
		return true
	}
	if r.Header.Get(RequestHeader) == "" {
		return false
	}
	vc := s.cfg.VCenter.Scheme + "://" + s.cfg.VCenter.Host
	for _, a := range append([]string{vc}, s.cfg.VCenterOrigins...) {
		if strings.EqualFold(o, strings.TrimSuffix(a, "/")) {
			return true
		}
	}
	return false
}

func (s *Server) authed(h func(http.ResponseWriter, *http.Request, *userSession)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && !s.originAllowed(r) {
			writeError(w, http.StatusForbidden, "cross-origin request from %s refused: open Cairn from the vSphere Client or from %s", r.Header.Get("Origin"), s.cfg.PublicURL)
			return
		}
		var us *userSession
		if token := r.Header.Get(TokenHeader); token != "" {
			var err error
			if us, err = s.tokenSession(r.Context(), token); err != nil {
				s.cfg.Logger.Warn("vSphere Client session token refused", "err", err)
				writeError(w, http.StatusUnauthorized, "vCenter did not accept the vSphere Client's session (%v): reload the vSphere Client, sign in again and reopen Cairn", err)
				return
			}
		} else {
			ck, err := r.Cookie(cookieName)
			if err != nil {
				writeError(w, http.StatusUnauthorized, "no session: sign in (POST /api/v1/session) first")
				return
			}
			if us = s.lookup(ck.Value); us == nil {
				writeError(w, http.StatusUnauthorized, "session expired: sign in again")
				return
			}
		}
		h(w, r, us)
	}
}

func (s *Server) inventory(w http.ResponseWriter, r *http.Request, us *userSession) {
	inv, err := inventory.Collect(r.Context(), us.client)
	if err != nil {
		writeError(w, http.StatusBadGateway, "%v", err)
		return
	}
	writeJSON(w, http.StatusOK, inv)
}

func (s *Server) suggest(w http.ResponseWriter, r *http.Request, us *userSession) {
	var req struct {
		Datacenter string `json:"datacenter"`
		System     string `json:"system"`
		Template   string `json:"template"`
		SVMCIDR    string `json:"svm_cidr"`
		ISCSICIDR  string `json:"iscsi_cidr"`
	}
	if !decode(w, r, &req) {
		return
	}
	inv, err := inventory.Collect(r.Context(), us.client)
	if err != nil {
		writeError(w, http.StatusBadGateway, "%v", err)
		return
	}
	p, err := plan.Suggest(inv, req.Datacenter, req.System, req.Template, req.SVMCIDR, req.ISCSICIDR)
	if err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	writeJSON(w, http.StatusOK, p)
}

func (s *Server) readPlan(w http.ResponseWriter, r *http.Request) *plan.Plan {
	p, err := plan.Parse(http.MaxBytesReader(w, r.Body, plan.MaxSize))
	if err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return nil
	}
	return p
}

func (s *Server) validate(w http.ResponseWriter, r *http.Request, us *userSession) {
	p := s.readPlan(w, r)
	if p == nil {
		return
	}
	inv, err := inventory.Collect(r.Context(), us.client)
	if err != nil {
		writeError(w, http.StatusBadGateway, "%v", err)
		return
	}
	ps := plan.Validate(p, inv)
	if ps == nil {
		ps = plan.Problems{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"valid": ps.Err() == nil, "problems": ps})
}

// start runs f as job name unless one of that name is running.
func (s *Server) start(name string, f func(ctx context.Context) error) (*Job, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if j := s.jobs[name]; j != nil && j.State == "running" {
		return nil, fmt.Errorf("job %s is already running", name)
	}
	j := &Job{Name: name, State: "running", Started: time.Now().UTC()}
	s.jobs[name] = j
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		err := f(s.ctx)
		s.mu.Lock()
		defer s.mu.Unlock()
		j.Ended = time.Now().UTC()
		if err != nil {
			j.State, j.Error = "failed", err.Error()
		} else {
			j.State = "succeeded"
		}
	}()
	c := *j
	return &c, nil
}

func (s *Server) planPath(system string) string {
	return filepath.Join(s.cfg.StateDir, "plan-"+system+".json")
}

func (s *Server) savedPlan(system string) (*plan.Plan, error) {
	f, err := os.Open(s.planPath(system))
	if err != nil {
		return nil, fmt.Errorf("no deployment of system %q known to this plugin: deploy it first", system)
	}
	defer f.Close()
	return plan.Parse(f)
}

func (s *Server) deploy(w http.ResponseWriter, r *http.Request, us *userSession) {
	p := s.readPlan(w, r)
	if p == nil {
		return
	}
	b, _ := json.MarshalIndent(p, "", "  ")
	if err := os.MkdirAll(s.cfg.StateDir, 0o700); err != nil {
		writeError(w, http.StatusInternalServerError, "%v", err)
		return
	}
	if err := os.WriteFile(s.planPath(p.System), b, 0o600); err != nil {
		writeError(w, http.StatusInternalServerError, "save plan: %v", err)
		return
	}
	eng := &deploy.Engine{VC: us.client, Gateway: s.cfg.Gateway, StateDir: s.cfg.StateDir, Log: s.cfg.Log,
		ReadyTimeout: s.cfg.ReadyTimeout, PollInterval: s.cfg.PollInterval}
	j, err := s.start(deploy.Job(p.System), func(ctx context.Context) error { return eng.Deploy(ctx, p) })
	if err != nil {
		writeError(w, http.StatusConflict, "%v", err)
		return
	}
	writeJSON(w, http.StatusAccepted, j)
}

// gatewayFor connects to the gateway of a deployed system.
func (s *Server) gatewayFor(system string) (gateway.API, *plan.Plan, error) {
	p, err := s.savedPlan(system)
	if err != nil {
		return nil, nil, err
	}
	st, err := deploy.LoadState(s.cfg.StateDir, p)
	if err != nil {
		return nil, nil, err
	}
	if !st.Completed {
		return nil, nil, fmt.Errorf("system %s is not fully deployed: finish the deployment first", system)
	}
	cfg, err := deploy.GatewayConfig(p, st, 0) // every gateway, with failover
	if err != nil {
		return nil, nil, err
	}
	api, err := s.cfg.Gateway(cfg)
	return api, p, err
}

func (s *Server) volume(w http.ResponseWriter, r *http.Request, us *userSession) {
	var req struct {
		System string `json:"system"`
		datastore.Request
	}
	if !decode(w, r, &req) {
		return
	}
	api, p, err := s.gatewayFor(req.System)
	if err != nil {
		writeError(w, http.StatusConflict, "%v", err)
		return
	}
	if req.Datacenter == "" {
		req.Datacenter = p.Datacenter
	}
	if req.Pool == "" {
		req.Pool = p.StoragePool.Name
	}
	if len(req.Hosts) == 0 {
		for _, h := range p.Hosts {
			req.Hosts = append(req.Hosts, h.Name)
		}
	}
	eng := &datastore.Engine{VC: us.client, API: api, Log: s.cfg.Log, PollInterval: s.cfg.PollInterval}
	j, err := s.start(datastore.Job(req.Volume), func(ctx context.Context) error {
		_, err := eng.Create(ctx, req.Request)
		return err
	})
	if err != nil {
		writeError(w, http.StatusConflict, "%v", err)
		return
	}
	writeJSON(w, http.StatusAccepted, j)
}

func (s *Server) maintenance(w http.ResponseWriter, r *http.Request, us *userSession) {
	system := r.PathValue("system")
	var req maintenance.Request
	if !decode(w, r, &req) {
		return
	}
	if len(req.Hook) > 0 {
		// A hook runs a command on the plugin's machine: only the
		// operator who starts the plugin may configure it (flag), not an API caller.
		writeError(w, http.StatusBadRequest, "patch hooks are configured on the plugin server, not through the API")
		return
	}
	api, p, err := s.gatewayFor(system)
	if err != nil {
		writeError(w, http.StatusConflict, "%v", err)
		return
	}
	req.Hook = s.cfg.PatchHook
	run := func(ctx context.Context) error { return s.maint.RunWith(ctx, us.client, api, p, req) }
	j, err := s.start(maintenance.Job(system), run)
	if err != nil {
		writeError(w, http.StatusConflict, "%v", err)
		return
	}
	writeJSON(w, http.StatusAccepted, j)
}

func (s *Server) maintenanceContinue(w http.ResponseWriter, r *http.Request, us *userSession) {
	if err := s.maint.Continue(r.PathValue("system")); err != nil {
		writeError(w, http.StatusConflict, "%v", err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) listJobs(w http.ResponseWriter, r *http.Request, us *userSession) {
	s.mu.Lock()
	out := make([]Job, 0, len(s.jobs))
	for _, j := range s.jobs {
		out = append(out, *j)
	}
	s.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Started.Before(out[j].Started) })
	writeJSON(w, http.StatusOK, out)
}

// events streams progress as server-sent events: first the buffered
// events after ?after=SEQ (or Last-Event-ID), then live ones, until the
// client goes away or the server closes. Each event's id is its Seq.
func (s *Server) events(w http.ResponseWriter, r *http.Request, us *userSession) {
	fl, ok := w.(http.Flusher)
	if !ok {
		writeError(w, http.StatusInternalServerError, "streaming unsupported")
		return
	}
	after, _ := strconv.ParseInt(r.URL.Query().Get("after"), 10, 64)
	if id := r.Header.Get("Last-Event-ID"); id != "" {
		after, _ = strconv.ParseInt(id, 10, 64)
	}
	job := r.URL.Query().Get("job")
	ch, cancel := s.cfg.Log.Subscribe()
	defer cancel()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	send := func(e progress.Event) {
		if e.Seq <= after || (job != "" && e.Job != job) {
			return
		}
		after = e.Seq
		b, _ := json.Marshal(e)
		fmt.Fprintf(w, "id: %d\nevent: progress\ndata: %s\n\n", e.Seq, b)
	}
	for _, e := range s.cfg.Log.Since(after, job) {
		send(e)
	}
	fl.Flush()
	keepalive := time.NewTicker(15 * time.Second)
	defer keepalive.Stop()
	for {
		select {
		case e := <-ch:
			send(e)
			fl.Flush()
		case <-keepalive.C:
			_, _ = io.WriteString(w, ": keepalive\n\n")
			fl.Flush()
		case <-r.Context().Done():
			return
		case <-s.ctx.Done():
			return
		}
	}
}
