package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cairn-storage/cairn/appliance/contract"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/deploy"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/plan"
)

// ovfEnvCommand: `cairn-plugin ovf-env -plan FILE -out DIR` writes, for every
// SVM of a deployment plan, the OVF environment the deploy engine would give
// it, for the ISO transport on hosts without vCenter (docs/operate.md).
func ovfEnvCommand(args []string) error {
	fs := flag.NewFlagSet("ovf-env", flag.ContinueOnError)
	planFile := fs.String("plan", "", "deployment plan (JSON, as the wizard downloads it)")
	out := fs.String("out", "", "directory to write <svm>/ovf-env.xml and bootstrap-token to")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *planFile == "" || *out == "" {
		return errors.New("give -plan FILE and -out DIR")
	}
	f, err := os.Open(*planFile)
	if err != nil {
		return err
	}
	defer f.Close()
	p, err := plan.Parse(f)
	if err != nil {
		return fmt.Errorf("%s: %w", *planFile, err)
	}
	names, err := deploy.WriteOVFEnvironments(p, *out)
	if err != nil {
		return err
	}
	for _, n := range names {
		fmt.Printf("%s: %s\n", n, filepath.Join(*out, n, "ovf-env.xml"))
	}
	fmt.Printf("one-time bootstrap token (valid %s after the first gateway starts): %s\n",
		contract.BootstrapTokenLifetime, filepath.Join(*out, "bootstrap-token"))
	fmt.Printf("make each SVM's CD-ROM: genisoimage -r -V OVF_ENV -o SVM.iso %s/SVM\n", *out)
	return nil
}
