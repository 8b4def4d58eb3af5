package deploy

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"github.com/cairn-storage/cairn/appliance/contract"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/plan"
)

// OVFEnvironments renders, for every SVM of p, the OVF environment document
// (DSP0243) that carries the same vApp properties the engine sets on that SVM
// (Plan.VAppProperties): what vSphere hands the guest through guestinfo or the
// ISO transport. Keyed by the SVM's host name. Each set of properties passes
// the appliance's own check first, as in the engine's configure step.
func OVFEnvironments(p *plan.Plan, s plan.Secrets) (map[string][]byte, error) {
	out := map[string][]byte{}
	for i := range p.Hosts {
		h := &p.Hosts[i]
		if !h.HasSVM() {
			continue
		}
		props := p.VAppProperties(h, s.BootstrapToken)
		if _, err := contract.Validate(props); err != nil {
			return nil, fmt.Errorf("the plan gives SVM %s settings its first boot would refuse: %w", plan.SVMHostname(h.Name), err)
		}
		out[plan.SVMHostname(h.Name)] = contract.EncodeOVFEnv(props)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("the plan of system %s has no host with an SVM role", p.System)
	}
	return out, nil
}

// WriteOVFEnvironments writes DIR/<svm>/ovf-env.xml for every SVM of p (the
// root of an ISO for the ISO transport, e.g. `genisoimage -r -o svm.iso
// DIR/<svm>`) and DIR/bootstrap-token, with a new one-time bootstrap token.
// For deployments without vCenter: boot the OVA's disk on any hypervisor
// with the ISO as a CD-ROM, then set the admin password with the token
// (POST /api/v1/bootstrap/admin-password). The files hold the token, so
// they are 0600 in a 0700 directory. It returns the SVM names written.
func WriteOVFEnvironments(p *plan.Plan, dir string) ([]string, error) {
	s := plan.Secrets{BootstrapToken: secret()}
	envs, err := OVFEnvironments(p, s)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	var names []string
	for _, name := range slices.Sorted(maps.Keys(envs)) {
		d := filepath.Join(dir, name)
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(d, "ovf-env.xml"), envs[name], 0o600); err != nil {
			return nil, err
		}
		names = append(names, name)
	}
	if err := os.WriteFile(filepath.Join(dir, "bootstrap-token"), []byte(s.BootstrapToken+"\n"), 0o600); err != nil {
		return nil, err
	}
	return names, nil
}
