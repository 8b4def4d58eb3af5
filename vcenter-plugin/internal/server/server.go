// Package server is the Cairn vSphere Client remote plugin server: it
// serves plugin.json and the UI, the extension descriptor, sessions cloned
// from the vSphere Client's (session token -> clone ticket -> CloneSession),
// and the REST + server-sent-events API the UI uses: inventory, plan
// suggestion and validation, deploy, volumes to datastores, rolling
// maintenance, jobs and their progress.
//
// Files: server.go holds the server, its one route table and the API
// page; session.go sign-in and sessions; operations.go the API's work;
// jobs.go jobs and progress events; systems.go the deployed systems;
// manifest.go, cert.go and cloneticket.go what vCenter needs of a plugin.
package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cairn-storage/cairn/vcenter-plugin/internal/deploy"
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
	// upgradeStops are the stop switches of the running upgrades, by system.
	upgradeStops map[string]*atomic.Bool
	// uploading are the systems a bundle upload is going to (one at a
	// time each: a bundle is held in memory until the gateway has it).
	uploading map[string]bool

	progress rebuildTracker       // copy progress seen, for ETAs (statistics.go)
	svcMu    sync.Mutex           // creating gateway service users (rights.go)
	granted  map[string]time.Time // session/system/privilege -> until (rights.go)
	planMu   sync.Mutex           // saved plans changed by day-2 jobs
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
	s := &Server{cfg: cfg, mux: http.NewServeMux(), sessions: map[string]*userSession{}, jobs: loadJobs(cfg.StateDir, cfg.Logger), granted: map[string]time.Time{},
		upgradeStops: map[string]*atomic.Bool{}, uploading: map[string]bool{}}
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

// route is one endpoint. The one table of them, routeTable, is both what
// the server serves and what its API page lists, so the two cannot
// disagree.
type route struct {
	method, path string
	query        string // the query parameters the API page shows ("after=SEQ&job=NAME")
	what         string // the API page's description; "" keeps the route off the page
	handler      http.HandlerFunc
}

// routeTable lists the endpoints, in the API page's order.
func (s *Server) routeTable() []route {
	return []route{
		{method: "GET", path: "/{$}", handler: s.index},
		{method: "GET", path: "/ui/", handler: s.ui},
		{method: "GET", path: "/ui/plugin.json", what: "vSphere Client remote plugin manifest",
			handler: func(w http.ResponseWriter, r *http.Request) { writeJSON(w, 200, Manifest()) }},
		{method: "GET", path: "/api/v1/extension", what: "extension registration descriptor (client URL, server thumbprint)",
			handler: func(w http.ResponseWriter, r *http.Request) {
				writeJSON(w, 200, NewDescriptor(s.cfg.PublicURL, s.cfg.Certificate))
			}},
		{method: "POST", path: "/api/v1/session", what: `{"username","password"} standalone; sets the session cookie. In the vSphere Client, send the client's session token in the X-Cairn-Session-Token header on every call instead`,
			handler: s.login},
		{method: "DELETE", path: "/api/v1/session", what: "log out", handler: s.logout},
		{method: "GET", path: "/api/v1/inventory", what: "datacenters, clusters, hosts, candidate disks, PCI devices, networks, templates",
			handler: s.authed(s.inventory)},
		{method: "GET", path: "/api/v1/plan/schema", what: "JSON Schema of the deployment plan",
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/schema+json")
				_, _ = w.Write(plan.Schema)
			}},
		{method: "POST", path: "/api/v1/plan/suggest", what: `{"datacenter","system","template","svm_cidr","iscsi_cidr"} -> a draft plan`,
			handler: s.authed(s.suggest)},
		{method: "POST", path: "/api/v1/plan/validate", what: "plan -> {valid, problems[]}", handler: s.authed(s.validate)},
		{method: "POST", path: "/api/v1/deploy", what: "plan -> 202 {job}; deploy or resume", handler: s.authed(s.deploy)},
		{method: "GET", path: "/api/v1/systems", what: "systems deployed by this plugin: deploy state, health, capacity, SDSs, devices, volumes",
			handler: s.authed(s.systems)},
		{method: "GET", path: "/api/v1/jobs", what: "jobs and their state", handler: s.authed(s.listJobs)},
		{method: "GET", path: "/api/v1/events", query: "after=SEQ&job=NAME", what: "progress as server-sent events (replays buffered events after SEQ)",
			handler: s.authed(s.events)},
		{method: "POST", path: "/api/v1/volumes", what: `{"system","volume","size_gib","pool","hosts",...} -> 202 {job}: volume to VMFS datastore`,
			handler: s.authed(s.volume)},
		{method: "PATCH", path: "/api/v1/systems/{system}/volumes/{volume}", what: `{"iops_limit","bandwidth_limit"} (0: unlimited) -> 200 volume: QoS limits, live`,
			handler: s.authed(s.volumeSettings)},
		{method: "POST", path: "/api/v1/systems/{system}/volumes/{volume}/grow", what: `{"size_gib","datastore"?} -> 202 {job}: grow the volume and its VMFS datastore on every host`,
			handler: s.authed(s.growVolume)},
		{method: "POST", path: "/api/v1/systems/{system}/volumes/{volume}/map", what: `{"hosts":[...],"access":"read_write|read_only"} -> 202 {job map:VOLUME}: map to ESXi hosts, rescan, mount the datastore`,
			handler: s.authed(s.mapVolume)},
		{method: "POST", path: "/api/v1/systems/{system}/volumes/{volume}/unmap", what: `{"hosts":[...]} -> 202 {job unmap:VOLUME}: unmount the VMFS and detach the LUN on those hosts, unmap, rescan (refused while VMs there use it)`,
			handler: s.authed(s.unmapVolume)},
		{method: "POST", path: "/api/v1/systems/{system}/volumes/{volume}/delete", what: `{"confirm":"VOLUME"} -> 202 {job delete:VOLUME}: unmount and detach on every host, unmap, delete the volume and its data, rescan (refused while VMs or templates are on it)`,
			handler: s.authed(s.deleteVolume)},
		{method: "POST", path: "/api/v1/maintenance/{system}", what: `{"by":"host|faultset","mode","hosts","hook"} -> 202 {job}: rolling maintenance (resumes)`,
			handler: s.authed(s.maintenance)},
		{method: "POST", path: "/api/v1/maintenance/{system}/continue", what: "confirm the operator's patch step",
			handler: s.authed(s.maintenanceContinue)},
		{method: "POST", path: "/api/v1/systems/{system}/expand", what: "plan (the deployed plan + new SDS/target hosts) -> 202 {job}: deploy the new SVMs in parallel, add SDSs and devices, wire iSCSI, await the rebalance (resumes); 400 {error, problems[]} for other edits",
			handler: s.authed(s.expand)},
		{method: "POST", path: "/api/v1/systems/{system}/hosts/{host}/remove", what: "-> 202 {job}: drain the host's SDS, take its iSCSI off Cairn, delete its SVM (resumes); 409 for an MDM member, the last gateway or target",
			handler: s.authed(s.removeHost)},
		{method: "POST", path: "/api/v1/systems/{system}/hosts/{host}/replace", what: "new host {name, svm_ip, devices…} -> 202 {job}: remove the failed host's SDS (its data rebuilt from the mirrors), clean up its SVM where vCenter allows, deploy an SVM on the new host, wire iSCSI, await the rebalance (resumes); 409 for an MDM member, the last gateway or target, or an SDS still up",
			handler: s.authed(s.replaceHost)},
		{method: "POST", path: "/api/v1/systems/{system}/upgrade", what: `{"version","hosts"?} -> 202 {job upgrade:SYSTEM}: roll the SVMs to a bundle stored on the gateway, one fault set at a time in instant maintenance, MDM members last; stops (out of maintenance) at an SVM whose updater fails or rolls back (resumes; SVMs on the version are skipped)`,
			handler: s.authed(s.upgrade)},
		{method: "POST", path: "/api/v1/systems/{system}/upgrade/stop", what: "-> 202 {stopping, message}: stop the running upgrade once the SVM unit it is on is upgraded, out of maintenance and resynced (the job ends stopped; the same upgrade request resumes with the SVMs left)",
			handler: s.authed(s.upgradeStop)},
		{method: "GET", path: "/api/v1/systems/{system}/upgrade/bundles", what: "the update bundles stored on the system's gateway (version, size, sha256, uploaded): what an upgrade can roll to",
			handler: s.authed(s.upgradeBundles)},
		{method: "POST", path: "/api/v1/systems/{system}/upgrade/bundles", what: "body: an update bundle (application/gzip, the file `cairn bundle --out FILE` wrote, <= 256 MiB) -> 201 {system, bundle}: stored on the system's gateway, which checks it (400 says what is wrong); 409 while another upload to the system runs",
			handler: s.authed(s.uploadBundle)},
		{method: "GET", path: "/api/v1/systems/{system}/upgrade/svms", what: "each SVM's updater as the gateway last heard it: running and ordered version, state (idle, downloading, installing, done, failed, rolled-back), message, and the ESXi host it runs on (what an upgrade's hosts name)",
			handler: s.authed(s.upgradeSVMs)},
		{method: "GET", path: "/api/v1/systems/{system}/statistics", query: "kind=system|pool|volume|sds|device|host&name=NAME",
			what:    "the gateway's I/O statistics of the system or one object: read/write IOPS, bytes/s, mean and p99 latency, throttled time, 10 minutes of history",
			handler: s.authed(s.statistics)},
		{method: "GET", path: "/api/v1/systems/{system}/rebuild", what: "rebuild, rebalance and resync progress with an ETA from the copy rate observed over the last minute (\"estimating\" until there is one)",
			handler: s.authed(s.rebuild)},
		{method: "POST", path: "/api/v1/maintenance/{system}/stop", what: "-> 202 {hosts, step, actions, unpatched}: stop the roll safely (the host it is on comes back; the job ends stopped; a start with the same request resumes at the next host)",
			handler: s.authed(s.maintenanceStop)},
		{method: "GET", path: "/api/v1/systems/{system}/sds/{sds}/disks", what: "the disks (and passthrough devices) the SDS's SVM could take, with why not where not",
			handler: s.authed(s.listSDSDisks)},
		{method: "POST", path: "/api/v1/systems/{system}/devices", what: `{"sds","disk"|"pci","pool"?,"name"?} -> 202 {job}: attach the disk to the SVM (RDM) if needed, then add it as a device`,
			handler: s.authed(s.addDevice)},
		{method: "POST", path: "/api/v1/systems/{system}/devices/{device}/remove", what: "-> 202 {job}: drain the device (progress with percent and ETA), then it is deleted",
			handler: s.authed(s.removeDevice)},
	}
}

func (s *Server) routes() {
	for _, rt := range s.routeTable() {
		s.mux.HandleFunc(rt.method+" "+rt.path, rt.handler)
	}
}

// index is the API page (the minimal page when no UI is built).
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
	for _, rt := range s.routeTable() {
		if rt.what == "" {
			continue
		}
		path := rt.path
		if rt.query != "" {
			path += "?" + rt.query
		}
		fmt.Fprintf(w, "<tr><td>%s</td><td><code>%s</code></td><td>%s</td></tr>", rt.method, html.EscapeString(path), html.EscapeString(rt.what))
	}
	fmt.Fprint(w, "</table></body></html>")
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
