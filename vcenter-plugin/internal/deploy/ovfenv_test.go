package deploy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-storage/cairn/appliance/contract"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/plan"
)

func TestWriteOVFEnvironments(t *testing.T) {
	p := &plan.Plan{Version: plan.Version, System: "iso1", ProtectionDomain: "pd1", StoragePool: plan.StoragePool{Name: "pool1"},
		Network: plan.Network{CIDR: "10.20.0.0/24", Gateway: "10.20.0.1"},
		Hosts: []plan.Host{
			{Name: "esx-01", Roles: []string{"mdm", "sds", "gateway", "target"}, SVMIP: "10.20.0.11"},
			{Name: "esx-02", Roles: []string{"mdm", "sds", "target"}, SVMIP: "10.20.0.12"},
			{Name: "esx-03", Roles: []string{"mdm", "sds"}, SVMIP: "10.20.0.13"},
			{Name: "esx-04", SVMIP: ""}, // iSCSI client only: no SVM
		}}
	dir := filepath.Join(t.TempDir(), "env")
	names, err := WriteOVFEnvironments(p, dir)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(names, " ") != "cairn-esx-01 cairn-esx-02 cairn-esx-03" {
		t.Fatalf("names %v", names)
	}
	tok, err := os.ReadFile(filepath.Join(dir, "bootstrap-token"))
	if err != nil || len(strings.TrimSpace(string(tok))) < 32 {
		t.Fatalf("token %q %v", tok, err)
	}
	for _, n := range names {
		f := filepath.Join(dir, n, "ovf-env.xml")
		fi, err := os.Stat(f)
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v %v", f, fi, err)
		}
		doc, _ := os.ReadFile(f)
		// What the guest's first boot reads: the same parser and check.
		props, err := contract.ParseOVFEnv(doc)
		if err != nil {
			t.Fatal(err)
		}
		s, err := contract.Validate(props)
		if err != nil {
			t.Fatalf("%s: %v", n, err)
		}
		want := p.VAppProperties(&p.Hosts[map[string]int{"cairn-esx-01": 0, "cairn-esx-02": 1, "cairn-esx-03": 2}[n]], strings.TrimSpace(string(tok)))
		for k, v := range want {
			if props[k] != v && !(v == "" && props[k] == "") {
				t.Errorf("%s: %s = %q, the engine sets %q", n, k, props[k], v)
			}
		}
		if s.Hostname != n || len(s.MDMMembers) != 3 {
			t.Errorf("%s: settings %+v", n, s)
		}
	}
	// A plan whose SVM the appliance would refuse is refused here too, nothing written.
	p.Hosts[1].SVMIP = "10.99.0.12"
	if _, err := WriteOVFEnvironments(p, filepath.Join(t.TempDir(), "bad")); err == nil || !strings.Contains(err.Error(), "cairn-esx-02") {
		t.Fatalf("want a refusal naming cairn-esx-02, got %v", err)
	}
}
