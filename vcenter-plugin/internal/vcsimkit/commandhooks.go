package vcsimkit

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// CommandHooks runs external commands on SVM power changes, so a shell
// harness (netns + real daemons) can stand behind simulated SVMs.
//
// Both commands get the environment:
//
//	CAIRN_SVM_NAME, CAIRN_SVM_HOST       VM and ESXi host names
//	CAIRN_SVM_OVFENV                     path of a file with the OVF environment XML
//	CAIRN_SVM_RDMS                       space-separated canonical names (naa.*) of its RDMs
//	CAIRN_SVM_PROP_<KEY>                 each vApp property, key upper-cased with . -> _
//	                                     (CAIRN_SVM_PROP_CAIRN_MGMT_ADDRESS=10.20.0.11/24)
//
// Start must print, once the daemons serve, lines "guestinfo.<key>=<value>"
// (at least guestinfo.cairn.ready=ready) and exit 0; a non-zero exit is an
// SVM that does not boot. Stop's output is ignored; it must exit 0.
type CommandHooks struct {
	Start, Stop []string
	Dir         string // where OVF environment files go; required
}

func (c CommandHooks) env(svm SVM) ([]string, error) {
	f := filepath.Join(c.Dir, svm.Name+".ovfenv.xml")
	if err := os.WriteFile(f, []byte(svm.OvfEnv), 0o600); err != nil {
		return nil, err
	}
	env := append(os.Environ(), "CAIRN_SVM_NAME="+svm.Name, "CAIRN_SVM_HOST="+svm.Host, "CAIRN_SVM_OVFENV="+f,
		"CAIRN_SVM_RDMS="+strings.Join(svm.RDMs, " "))
	for k, v := range svm.Properties {
		env = append(env, "CAIRN_SVM_PROP_"+strings.ToUpper(strings.NewReplacer(".", "_", "-", "_").Replace(k))+"="+v)
	}
	return env, nil
}

func (c CommandHooks) PoweredOn(ctx context.Context, svm SVM) (GuestReport, error) {
	r := GuestReport{GuestInfo: map[string]string{}}
	if len(c.Start) == 0 {
		return ReadyGuest{}.PoweredOn(ctx, svm)
	}
	env, err := c.env(svm)
	if err != nil {
		return r, err
	}
	cmd := exec.CommandContext(ctx, c.Start[0], c.Start[1:]...)
	cmd.Env = env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return r, fmt.Errorf("svm start hook for %s: %v: %s", svm.Name, err, strings.TrimSpace(stderr.String()))
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), "="); ok && strings.HasPrefix(k, "guestinfo.") {
			r.GuestInfo[k] = v
		}
	}
	return r, nil
}

func (c CommandHooks) PoweredOff(ctx context.Context, svm SVM) error {
	if len(c.Stop) == 0 {
		return nil
	}
	env, err := c.env(svm)
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, c.Stop[0], c.Stop[1:]...)
	cmd.Env = env
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("svm stop hook for %s: %v: %s", svm.Name, err, strings.TrimSpace(string(out)))
	}
	return nil
}
