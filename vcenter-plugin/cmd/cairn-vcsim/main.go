// Command cairn-vcsim serves Cairn's simulated vCenter (package vcsimkit)
// on 127.0.0.1 for Python and browser tests and demos. It prints the SDK
// URL, the generated credentials and the certificate thumbprint, as
// KEY=value lines (and to -env-file), then serves until SIGINT/SIGTERM.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/cairn-storage/cairn/vcenter-plugin/internal/gatewayfake"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/vcsimkit"
)

func main() {
	hosts := flag.Int("hosts", 4, "ESXi hosts in the cluster")
	disks := flag.Int("disks", 3, "local candidate disks per host")
	listen := flag.String("listen", "127.0.0.1:0", "address to serve the SDK on (keep it on 127.0.0.0/8)")
	dir := flag.String("dir", "", "directory for datastore files (default: a temporary directory, removed on exit)")
	template := flag.String("template", "cairn-svm", "name of the SVM template to create (empty: none)")
	fakeCairn := flag.Bool("fake-cairn", true, "answer iSCSI rescans and SVM power changes from an in-memory Cairn (no daemons)")
	envFile := flag.String("env-file", "", "also write the KEY=value lines to this file (mode 0600)")
	svmStart := flag.String("svm-start", "", "command (run by sh -c) when an SVM powers on; see vcsimkit.CommandHooks; implies -fake-cairn=false")
	svmStop := flag.String("svm-stop", "", "command (run by sh -c) when an SVM powers off")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	o := options{hosts: *hosts, disks: *disks, listen: *listen, dir: *dir, template: *template, fakeCairn: *fakeCairn, envFile: *envFile,
		svmStart: *svmStart, svmStop: *svmStop}
	if err := run(log, o); err != nil {
		log.Error("cairn-vcsim", "err", err)
		os.Exit(1)
	}
}

type options struct {
	hosts, disks                   int
	listen, dir, template, envFile string
	fakeCairn                      bool
	svmStart, svmStop              string
}

func run(log *slog.Logger, o options) error {
	dir, envFile := o.dir, o.envFile
	if dir == "" {
		d, err := os.MkdirTemp("", "cairn-vcsim-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	opts := vcsimkit.Options{Hosts: o.hosts, DisksPerHost: o.disks, Dir: dir, Listen: o.listen, Template: o.template, Logger: log}
	switch {
	case o.svmStart != "" || o.svmStop != "":
		hooks := vcsimkit.CommandHooks{Dir: dir}
		if o.svmStart != "" {
			hooks.Start = []string{"sh", "-c", o.svmStart}
		}
		if o.svmStop != "" {
			hooks.Stop = []string{"sh", "-c", o.svmStop}
		}
		opts.Guest = hooks
	case o.fakeCairn:
		array := gatewayfake.New()
		opts.LUNs, opts.Guest = array, array.Hooks(nil)
	}
	kit, err := vcsimkit.Start(opts)
	if err != nil {
		return err
	}
	defer kit.Close()
	cert, err := kit.CertificateFile()
	if err != nil {
		return err
	}
	lines := fmt.Sprintf("CAIRN_VCSIM_URL=%s\nCAIRN_VCSIM_USERNAME=%s\nCAIRN_VCSIM_PASSWORD=%s\nCAIRN_VCSIM_THUMBPRINT=%s\nCAIRN_VCSIM_CERT=%s\n",
		kit.URL, kit.Username, kit.Password, kit.Thumbprint, cert)
	fmt.Print(lines)
	if envFile != "" {
		if err := os.WriteFile(filepath.Clean(envFile), []byte(lines), 0o600); err != nil {
			return err
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	<-ctx.Done()
	return nil
}
