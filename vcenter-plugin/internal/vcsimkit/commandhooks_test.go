package vcsimkit_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-storage/cairn/vcenter-plugin/internal/vcsimkit"
)

func TestCommandHooks(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "log")
	h := vcsimkit.CommandHooks{Dir: dir,
		Start: []string{"sh", "-c", `echo "start $CAIRN_SVM_NAME $CAIRN_SVM_HOST $CAIRN_SVM_PROP_CAIRN_MGMT_ADDRESS $CAIRN_SVM_RDMS" >> ` + log + `; grep -q cairn.mgmt.address "$CAIRN_SVM_OVFENV" || exit 9; echo noise; echo guestinfo.cairn.ready=ready`},
		Stop:  []string{"sh", "-c", `echo "stop $CAIRN_SVM_NAME" >> ` + log}}
	svm := vcsimkit.SVM{Name: "svm1", Host: "esx-01", Properties: map[string]string{"cairn.mgmt.address": "10.0.0.5/24"}, RDMs: []string{"naa.1", "naa.2"},
		OvfEnv: `<Environment><Property oe:key="cairn.mgmt.address"/></Environment>`}
	r, err := h.PoweredOn(context.Background(), svm)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.GuestInfo) != 1 || r.GuestInfo["guestinfo.cairn.ready"] != "ready" {
		t.Fatalf("report %+v", r)
	}
	if err := h.PoweredOff(context.Background(), svm); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(log)
	if string(b) != "start svm1 esx-01 10.0.0.5/24 naa.1 naa.2\nstop svm1\n" {
		t.Fatalf("hook log %q", b)
	}
	bad := vcsimkit.CommandHooks{Dir: dir, Start: []string{"sh", "-c", "echo daemon died >&2; exit 3"}}
	if _, err := bad.PoweredOn(context.Background(), svm); err == nil || !strings.Contains(err.Error(), "daemon died") {
		t.Fatalf("failing start: %v", err)
	}
}
