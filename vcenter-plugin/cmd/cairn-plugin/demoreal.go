package main

// The demo against real Cairn daemons: -demo-gateway adds a running cluster
// (tests/lib/cluster.sh, what `make demo` starts) to the demo as a deployed
// system, so the dashboard and the SDS, device and volume screens read the
// real gateway; -demo-fail-boot makes one simulated SVM fail its first boot,
// so a deployment stops part-way and is resumed (docs/ui.md).

import (
	"context"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/cairn-storage/cairn/vcenter-plugin/internal/deploy"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/gateway"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/gatewayfake"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/plan"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/statefile"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/vcsimkit"
)

var (
	demoGatewayURL = flag.String("demo-gateway", "", "with -demo: https URL of a running Cairn cluster's gateway (tests/lib/cluster.sh) that the demo shows as a deployed system, read and acted on for real")
	demoGatewayCA  = flag.String("demo-gateway-cert", "", "with -demo-gateway: the gateway's certificate (PEM file; cluster.sh: STATEDIR/gateway/cert.pem), pinned")
	demoGatewayPW  = flag.String("demo-gateway-password-file", "", "with -demo-gateway: file holding the gateway's admin password (cluster.sh: STATEDIR/gateway/admin-password)")
	demoFailBoot   = flag.String("demo-fail-boot", "", "with -demo: the simulated SVM on this ESXi host fails its first boot (the deployment stops there; power-cycle the SVM, then resume)")
	readyTimeout   = flag.Duration("ready-timeout", 0, "bound on the wait for one SVM to boot and for the gateway to answer during deploy and maintenance (default 15m)")
)

// demoAdopted is a real cluster the demo shows as a deployed system.
type demoAdopted struct {
	url, thumbprint string
}

// adoptDemoCluster checks the real gateway (certificate pinned, admin
// login), and writes a plan and a completed deployment state for it into
// the demo's state directory: one gateway "host" per SDS of the cluster,
// named as the SDS. The gateway's address is not in the plan (a plan has
// the gateway on port 8443 of its SVM): the demo's gateway factory sends
// requests pinned to this certificate to url instead.
func adoptDemoCluster(ctx context.Context, stateDir string, log *slog.Logger) (*demoAdopted, error) {
	if *demoGatewayCA == "" || *demoGatewayPW == "" {
		return nil, errors.New("-demo-gateway needs -demo-gateway-cert and -demo-gateway-password-file (cluster.sh: STATEDIR/gateway/cert.pem and STATEDIR/gateway/admin-password)")
	}
	certPEM, err := os.ReadFile(*demoGatewayCA)
	if err != nil {
		return nil, fmt.Errorf("-demo-gateway-cert: %w", err)
	}
	block, _ := pem.Decode(certPEM)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("-demo-gateway-cert %s holds no PEM certificate: give the gateway's cert.pem", *demoGatewayCA)
	}
	pw, err := os.ReadFile(*demoGatewayPW)
	if err != nil {
		return nil, fmt.Errorf("-demo-gateway-password-file: %w", err)
	}
	password := strings.TrimSpace(string(pw))
	a := &demoAdopted{url: strings.TrimSuffix(*demoGatewayURL, "/"), thumbprint: gateway.Thumbprint(block.Bytes)}
	api, err := gateway.NewHTTPClient(gateway.Config{URL: a.url, Username: "admin", Password: password, Thumbprint: a.thumbprint})
	if err != nil {
		return nil, fmt.Errorf("-demo-gateway: %w", err)
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	sys, err := api.System(cctx)
	if err != nil {
		return nil, fmt.Errorf("-demo-gateway %s did not answer (%w): start the cluster first (tests/lib/cluster.sh start DIR) and check the password file", a.url, err)
	}
	if sys.System == nil || sys.System.Name == "" {
		return nil, fmt.Errorf("-demo-gateway %s: the system is not bootstrapped: cairnctl system bootstrap --name NAME", a.url)
	}
	sdss, err := api.ListSDS(cctx)
	if err != nil {
		return nil, fmt.Errorf("-demo-gateway %s: list SDSs: %w", a.url, err)
	}
	if len(sdss) == 0 {
		return nil, fmt.Errorf("-demo-gateway %s: the cluster has no SDS yet", a.url)
	}
	name := sys.System.Name
	p := &plan.Plan{Version: plan.Version, System: name, Datacenter: vcsimkit.Datacenter, Template: "cairn-svm",
		ProtectionDomain: "pd1", StoragePool: plan.StoragePool{Name: "pool1"}}
	// Its "hosts" are the simulated ESXi hosts, one per SDS (at most the
	// kit's 4): the plugin checks the signed-in user's rights on the cluster
	// that holds a system's hosts, so they must be in the inventory.
	for i := range min(len(sdss), 4) {
		roles := []string{plan.RoleSDS}
		if i == 0 {
			roles = append(roles, plan.RoleGateway)
		}
		p.Hosts = append(p.Hosts, plan.Host{Name: fmt.Sprintf("esx-%02d.cairn.test", i+1), Roles: roles, SVMIP: "127.0.0.1"})
	}
	st, err := deploy.LoadState(stateDir, p)
	if err != nil {
		return nil, err
	}
	st.Secrets = plan.Secrets{AdminPassword: password}
	st.GatewayThumbprints = map[string]string{p.Hosts[0].Name: a.thumbprint}
	st.Completed = true
	if err := statefile.WriteJSON(stateDir+"/plan-"+name+".json", p); err != nil {
		return nil, err
	}
	if err := st.Save(stateDir); err != nil {
		return nil, err
	}
	log.Info("demo: real Cairn cluster added as a deployed system", "system", name, "gateway", a.url, "sds", len(sdss))
	return a, nil
}

// demoGatewayFactory: gateways pinned to the adopted cluster's certificate
// are that cluster (at its real address); every other one, the SVMs the
// demo deploys, is the in-memory array.
func demoGatewayFactory(a *demoAdopted, array *gatewayfake.Array) deploy.GatewayFactory {
	return func(cfg gateway.Config) (gateway.API, error) {
		if a != nil && gateway.NormalizeThumbprint(cfg.Thumbprint) == a.thumbprint {
			cfg.URL, cfg.Failover = a.url, nil
			return gateway.NewHTTPClient(cfg)
		}
		// Logged in as each request's user and role, as the real gateway.
		return array.Connect(cfg)
	}
}

// failFirstBoot fails the first power-on of the SVM on host, as an SVM
// whose first boot goes wrong: it stays powered on without reporting
// ready. The next power-on (the operator's power cycle) boots.
type failFirstBoot struct {
	host string
	next vcsimkit.GuestHooks
	log  *slog.Logger
	once sync.Once
}

func (f *failFirstBoot) PoweredOn(ctx context.Context, svm vcsimkit.SVM) (vcsimkit.GuestReport, error) {
	failed := false
	if svm.Host == f.host {
		f.once.Do(func() { failed = true })
	}
	if failed {
		f.log.Warn("demo: injected first-boot failure", "vm", svm.Name, "host", svm.Host)
		return vcsimkit.GuestReport{}, errors.New("demo: injected first-boot failure")
	}
	return f.next.PoweredOn(ctx, svm)
}

func (f *failFirstBoot) PoweredOff(ctx context.Context, svm vcsimkit.SVM) error {
	return f.next.PoweredOff(ctx, svm)
}

func demoGuest(next vcsimkit.GuestHooks, log *slog.Logger) vcsimkit.GuestHooks {
	if *demoFailBoot == "" {
		return next
	}
	return &failFirstBoot{host: *demoFailBoot, next: next, log: log}
}
