// Command cairn-plugin serves the Cairn vSphere Client remote plugin:
// plugin.json, the UI, and the API that deploys Cairn, creates datastores
// and rolls hosts through maintenance. With -demo it starts a simulated
// vCenter (and an in-memory Cairn) in-process and prints what to open.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/cairn-storage/cairn/vcenter-plugin/internal/deploy"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/gatewayfake"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/server"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/vcsimkit"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "ovf-env" {
		if err := ovfEnvCommand(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "cairn-plugin ovf-env:", err)
			os.Exit(1)
		}
		return
	}
	listen := flag.String("listen", "127.0.0.1:9443", "HTTPS listen address")
	public := flag.String("public-url", "", "URL the vSphere Client reaches the plugin at (default https://<listen>)")
	vc := flag.String("vcenter", "", "vCenter SDK URL, e.g. https://vc.example.com/sdk")
	vcThumb := flag.String("vcenter-thumbprint", "", "SHA-1 thumbprint of vCenter's certificate (colon hex), when its CA is not trusted")
	stateDir := flag.String("state-dir", defaultStateDir(), "deploy/maintenance state, plans and the plugin certificate")
	uiDir := flag.String("ui", "", "directory of the built UI (index.html); empty: the API page")
	demo := flag.Bool("demo", false, "start a simulated 4-host vCenter and an in-memory Cairn, and serve the plugin against them")
	register := flag.Bool("register", false, "register the plugin extension in vCenter (uses -vcenter-user/-vcenter-password), then serve")
	patchHook := flag.String("patch-hook", "", "command (sh -c) that patches hosts during rolling maintenance, with CAIRN_HOSTS set; empty: wait for the operator's Continue")
	vcOrigins := flag.String("vcenter-origin", "", "comma-separated extra origins (https://vc.example) of vSphere Clients that proxy the UI; the -vcenter host is always one")
	vcUser := flag.String("vcenter-user", os.Getenv("CAIRN_VCENTER_USER"), "vCenter user for -register (env CAIRN_VCENTER_USER)")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	var hook []string
	if *patchHook != "" {
		hook = []string{"sh", "-c", *patchHook}
	}
	var origins []string
	for _, o := range strings.Split(*vcOrigins, ",") {
		if o = strings.TrimSpace(o); o != "" {
			origins = append(origins, o)
		}
	}
	if err := run(log, *listen, *public, *vc, *vcThumb, *stateDir, *uiDir, *demo, *register, *vcUser, os.Getenv("CAIRN_VCENTER_PASSWORD"), hook, origins); err != nil {
		log.Error("cairn-plugin", "err", err)
		os.Exit(1)
	}
}

func defaultStateDir() string {
	if d, err := os.UserConfigDir(); err == nil {
		return filepath.Join(d, "cairn-plugin")
	}
	return "cairn-plugin-state"
}

func run(log *slog.Logger, listen, public, vc, vcThumb, stateDir, uiDir string, demo, register bool, vcUser, vcPass string, hook []string, origins []string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	gw := deploy.GatewayFactory(deploy.HTTPGateway)
	var kit *vcsimkit.Kit
	var passFile string
	if demo {
		dir, err := os.MkdirTemp("", "cairn-demo-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		stateDir = filepath.Join(dir, "state")
		array := gatewayfake.New()
		array.ResyncTime = 2 * time.Second
		array.DrainTime = 12 * time.Second // a device drain the UI can follow
		// Two stored bundles newer than the template's (FirstVersion), so
		// the upgrade page can roll the demo's SVMs, and roll them again.
		array.StoreBundle("0.2.0", false)
		array.StoreBundle("0.3.0", false)
		kit, err = vcsimkit.Start(vcsimkit.Options{Dir: dir, Template: "cairn-svm", LUNs: array, Guest: demoGuest(array.Hooks(nil), log), Logger: log})
		if err != nil {
			return err
		}
		defer kit.Close()
		vc, vcThumb = kit.URL.String(), kit.Thumbprint
		vcUser, vcPass = kit.Username, kit.Password
		// The generated password goes to a file (mode 0600), not the log.
		passFile = filepath.Join(dir, "vcenter-password")
		if err := os.WriteFile(passFile, []byte(kit.Password+"\n"), 0o600); err != nil {
			return err
		}
		register = true
		var adopted *demoAdopted
		if *demoGatewayURL != "" {
			if err := os.MkdirAll(stateDir, 0o700); err != nil {
				return err
			}
			if adopted, err = adoptDemoCluster(ctx, stateDir, log); err != nil {
				return err
			}
		}
		gw = demoGatewayFactory(adopted, array)
	}
	if !demo && (*demoGatewayURL != "" || *demoFailBoot != "") {
		return errors.New("-demo-gateway and -demo-fail-boot go with -demo")
	}
	if vc == "" {
		return errors.New("give -vcenter https://<vcenter>/sdk (or -demo)")
	}
	vcURL, err := url.Parse(vc)
	if err != nil || vcURL.Scheme != "https" {
		return fmt.Errorf("-vcenter %q: give the https SDK URL", vc)
	}
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return fmt.Errorf("-listen %q: %w", listen, err)
	}
	if public == "" {
		public = "https://" + listen
	}
	cert, err := server.EnsureCertificate(stateDir, []string{host})
	if err != nil {
		return err
	}
	srv, err := server.New(server.Config{VCenter: vcURL, VCenterThumbprint: vcThumb, PublicURL: strings.TrimSuffix(public, "/"),
		StateDir: stateDir, UIDir: uiDir, Gateway: gw, Certificate: cert, Logger: log, PatchHook: hook, VCenterOrigins: origins,
		ReadyTimeout: *readyTimeout})
	if err != nil {
		return err
	}
	defer srv.Close()
	if register {
		if err := registerExtension(ctx, vcURL, vcThumb, vcUser, vcPass, public, cert); err != nil {
			return err
		}
	}
	monitorUser, monitorFile := "", ""
	if kit != nil {
		// A second vSphere user who may only look (Cairn.Monitor on the
		// cluster), to see what a user without Cairn.Operate gets.
		user, pass, err := demoMonitorUser(ctx, kit)
		if err != nil {
			return err
		}
		monitorUser, monitorFile = user, filepath.Join(filepath.Dir(stateDir), "vcenter-monitor-password")
		if err := os.WriteFile(monitorFile, []byte(pass+"\n"), 0o600); err != nil {
			return err
		}
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", listen, err)
	}
	hs := &http.Server{Handler: srv, TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert.TLS}, MinVersion: tls.VersionTLS12},
		ReadHeaderTimeout: 10 * time.Second}
	fmt.Printf("Cairn plugin: %s/\n  manifest:    %s/ui/plugin.json\n  certificate: %s (SHA-256 %s)\n", public, public, cert.CertFile, cert.SHA256)
	if uiDir == "" {
		fmt.Printf("  UI: not served (give -ui ui/dist/cairn-ui/browser after `make build-ui`)\n")
	} else {
		fmt.Printf("  UI:          %s/ui/ (from %s)\n", public, uiDir)
	}
	if kit != nil {
		fmt.Printf("  simulated vCenter: %s\n  sign in to the UI as %s with the password in %s\n", kit.URL, kit.Username, passFile)
		fmt.Printf("  monitor-only user (Cairn.Monitor): %s, its password file %s\n", monitorUser, monitorFile)
	}
	errc := make(chan error, 1)
	go func() { errc <- hs.ServeTLS(ln, "", "") }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return hs.Shutdown(sctx)
}
