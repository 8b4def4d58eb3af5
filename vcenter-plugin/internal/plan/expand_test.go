package plan_test

import (
	"strings"
	"testing"

	"github.com/cairn-storage/cairn/vcenter-plugin/internal/plan"
)

func hostsPlan(n int) *plan.Plan {
	p := &plan.Plan{Version: plan.Version, System: "cairn1", Datacenter: "DC0", Template: "cairn-svm", ProtectionDomain: "pd1",
		StoragePool: plan.StoragePool{Name: "pool1", SparePercent: 10}}
	for i := range n {
		roles := []string{plan.RoleSDS, plan.RoleTarget}
		if i < 3 {
			roles = append([]string{plan.RoleMDM}, roles...)
		}
		p.Hosts = append(p.Hosts, plan.Host{Name: "esx-0" + string(rune('1'+i)), Roles: roles, SVMIP: "10.20.0.1" + string(rune('1'+i))})
	}
	return p
}

func TestCheckExpand(t *testing.T) {
	deployed := hostsPlan(3)
	grown := hostsPlan(5)
	if ps := plan.CheckExpand(deployed, grown); ps.Err() != nil {
		t.Fatalf("adding two SDS hosts: %v", ps.Err())
	}
	if got := plan.NewHosts(deployed, grown); len(got) != 2 || got[0].Name != "esx-04" {
		t.Fatalf("new hosts %v", got)
	}
	client := hostsPlan(4)
	client.Hosts[3].Roles = nil
	if ps := plan.CheckExpand(deployed, client); ps.Err() != nil {
		t.Fatalf("adding an iSCSI client: %v", ps.Err())
	}
	inserted := hostsPlan(5)
	inserted.Hosts[1], inserted.Hosts[3] = inserted.Hosts[3], inserted.Hosts[1]
	ps := plan.CheckExpand(deployed, inserted)
	if err := ps.Err(); err == nil || !strings.Contains(err.Error(), "hosts[1]: host esx-02 moved") {
		t.Fatalf("a new host before a deployed one: %v", err)
	}
	mdm := hostsPlan(4)
	mdm.Hosts[3].Roles = []string{plan.RoleMDM, plan.RoleSDS}
	if err := plan.CheckExpand(deployed, mdm).Err(); err == nil || !strings.Contains(err.Error(), "hosts[3].roles") {
		t.Fatalf("a new MDM member: %v", err)
	}
}

// Removing a host pins the remaining targets' port ids: the SVMs keep
// running with them, and a later expansion must not reuse one.
func TestWithoutKeepsTargetPorts(t *testing.T) {
	p := hostsPlan(5)
	before := p.TargetPorts()
	after := p.Without("esx-02")
	if len(after.Hosts) != 4 {
		t.Fatalf("%d hosts", len(after.Hosts))
	}
	for name, port := range after.TargetPorts() {
		if before[name] != port {
			t.Fatalf("host %s: port %d after the removal, %d before", name, port, before[name])
		}
	}
	grown := *after
	grown.Hosts = append(grown.Hosts[:4:4], plan.Host{Name: "esx-06", Roles: []string{plan.RoleSDS, plan.RoleTarget}, SVMIP: "10.20.0.16"})
	if ps := plan.CheckExpand(after, &grown); ps.Err() != nil {
		t.Fatal(ps.Err())
	}
	if port := grown.TargetPorts()["esx-06"]; port != 2 {
		t.Fatalf("the new host got port %d, want the freed 2", port)
	}
	if p.Hosts[2].TargetPortID != 0 {
		t.Fatal("Without changed the plan it was called on")
	}
}
