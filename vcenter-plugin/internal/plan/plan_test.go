package plan_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/vmware/govmomi/find"

	"github.com/cairn-storage/cairn/vcenter-plugin/internal/inventory"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/plan"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/vcsimkit"
)

func setup(t *testing.T) (*vcsimkit.Kit, *inventory.Inventory, *plan.Plan) {
	kit, c := vcsimkit.StartTest(t, vcsimkit.Options{})
	ctx := context.Background()
	// Put host 4 in maintenance so Suggest has 3 ready hosts plus one we
	// can add by hand in the tests.
	f := find.NewFinder(c.Client)
	dc, _ := f.DefaultDatacenter(ctx)
	h4, err := f.SetDatacenter(dc).HostSystem(ctx, "esx-04.cairn.test")
	if err != nil {
		t.Fatal(err)
	}
	task, _ := h4.EnterMaintenanceMode(ctx, 0, false, nil)
	if err := task.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	inv, err := inventory.Collect(ctx, c.Client)
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.Suggest(inv, vcsimkit.Datacenter, "cairn1", "cairn-svm", "10.20.0.0/24", "10.30.0.0/24")
	if err != nil {
		t.Fatal(err)
	}
	return kit, inv, p
}

func clone(t *testing.T, p *plan.Plan) *plan.Plan {
	b, _ := json.Marshal(p)
	q, err := plan.Parse(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return q
}

func TestValidate(t *testing.T) {
	kit, inv, good := setup(t)
	if ps := plan.Validate(good, inv); ps.Err() != nil {
		t.Fatalf("suggested plan is invalid: %v", ps.Err())
	}
	if len(good.Hosts) != 3 {
		t.Fatalf("suggest took %d hosts (host 4 is in maintenance)", len(good.Hosts))
	}
	h4disk := kit.LocalDisks("esx-04.cairn.test")[1].CanonicalName
	h1disk := good.Hosts[0].Devices[0].Disk

	cases := []struct {
		name   string
		edit   func(p *plan.Plan)
		field  string
		substr string
	}{
		{"even mdm count", func(p *plan.Plan) { p.Hosts[2].Roles = []string{"sds", "target"} }, "hosts", "even number"},
		{"too many tiebreakers", func(p *plan.Plan) {
			p.Hosts[1].Roles = []string{"tiebreaker", "sds", "target", "gateway"}
			p.Hosts[2].Roles = []string{"tiebreaker", "sds", "target"}
		}, "hosts", "tie-breakers must be fewer"},
		{"too few fault sets", func(p *plan.Plan) {
			for i := range p.Hosts {
				p.Hosts[i].FaultSet = "rack1"
			}
		}, "hosts", "at least 2 fault sets"},
		{"too few sds hosts", func(p *plan.Plan) {
			for i := 1; i < 3; i++ {
				p.Hosts[i].Roles = []string{"mdm", "target"}
				p.Hosts[i].Devices = nil
				p.Hosts[i].FaultSet = ""
			}
			p.Hosts[0].FaultSet = ""
		}, "hosts", "at least 2 SDS hosts"},
		{"mixed fault sets", func(p *plan.Plan) { p.Hosts[1].FaultSet = "" }, "hosts", "give every SDS host a fault set"},
		{"duplicate address", func(p *plan.Plan) { p.Hosts[1].SVMIP = p.Hosts[0].SVMIP }, "hosts[1].svm_ip", "also used by hosts[0].svm_ip"},
		{"vmk clashes with gateway", func(p *plan.Plan) { p.ISCSI.CIDR = ""; p.Hosts[2].VmkernelIP = "10.20.0.1" }, "hosts[2].vmkernel_ip", "also used by network.gateway"},
		{"out of subnet", func(p *plan.Plan) { p.Hosts[2].SVMIP = "10.21.0.5" }, "hosts[2].svm_ip", "outside the subnet 10.20.0.0/24"},
		{"broadcast", func(p *plan.Plan) { p.Hosts[2].SVMIP = "10.20.0.255" }, "hosts[2].svm_ip", "broadcast"},
		{"device in use", func(p *plan.Plan) { p.Hosts[0].Devices[0].Disk = "mpx.vmhba0:C0:T0:L0" }, "hosts[0].devices[0].disk", "in use by datastore esx-01-local"},
		{"disk without a unique serial", func(p *plan.Plan) { p.Hosts[0].Devices[0].Disk = vcsimkit.NonRDMDisk }, "hosts[0].devices[0].disk", "cannot be an RDM"},
		{"device of another host", func(p *plan.Plan) { p.Hosts[1].Devices[0].Disk = h1disk }, "hosts[1].devices[0].disk", "has no disk"},
		{"device twice", func(p *plan.Plan) { p.Hosts[0].Devices[1].Disk = h1disk }, "hosts[0].devices[1].disk", "listed twice"},
		{"pci not capable", func(p *plan.Plan) {
			p.Hosts[0].Devices = append(p.Hosts[0].Devices, plan.Device{PCI: "0000:3d:00.0", Mode: "passthrough"})
		}, "hosts[0].devices[3].pci", "cannot be passed through"},
		{"host in maintenance", func(p *plan.Plan) {
			p.Hosts = append(p.Hosts, plan.Host{Name: "esx-04.cairn.test", Roles: []string{"sds"}, FaultSet: "fs4", SVMIP: "10.20.0.14", VmkernelIP: "10.30.0.104",
				Devices: []plan.Device{{Disk: h4disk, Mode: "rdm"}}})
		}, "hosts[3].name", "in maintenance mode"},
		{"unknown host", func(p *plan.Plan) { p.Hosts[2].Name = "esx-99.cairn.test" }, "hosts[2].name", "not found in vCenter"},
		{"missing template", func(p *plan.Plan) { p.Template = "cairn-svm-9" }, "template", "upload the Cairn OVA"},
		{"no gateway", func(p *plan.Plan) {
			for i := range p.Hosts {
				p.Hosts[i].Roles = []string{"mdm", "sds", "target"}
			}
		}, "hosts", "gateway role"},
		{"bad system name", func(p *plan.Plan) { p.System = "Cairn 1" }, "system", "lowercase"},
		{"data client garbage", func(p *plan.Plan) { p.DataClients = []string{"10.40.0.5", "nbd-host.lab"} }, "data_clients[1]", "neither an IP address nor a network"},
		{"data clients everything", func(p *plan.Plan) { p.DataClients = []string{"0.0.0.0/0"} }, "data_clients[0]", "every address"},
		{"vmk missing", func(p *plan.Plan) { p.Hosts[0].VmkernelIP = "" }, "hosts[0].vmkernel_ip", "give host esx-01.cairn.test a vmkernel_ip"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := clone(t, good)
			c.edit(p)
			ps := plan.Validate(p, inv)
			for _, pr := range ps {
				if pr.Severity == plan.Error && pr.Field == c.field && strings.Contains(pr.Message, c.substr) {
					return
				}
			}
			t.Fatalf("want error at %s containing %q, got:\n%v", c.field, c.substr, ps)
		})
	}

	// Host disconnected.
	kit.SetHostConnection("esx-02.cairn.test", false)
	ctx := context.Background()
	c, _ := kit.Client(ctx)
	inv2, err := inventory.Collect(ctx, c.Client)
	if err != nil {
		t.Fatal(err)
	}
	ps := plan.Validate(good, inv2)
	if err := ps.Err(); err == nil || !strings.Contains(err.Error(), "hosts[1].name: host esx-02.cairn.test is disconnected: reconnect it") {
		t.Fatalf("disconnected host: %v", err)
	}
}

func TestParseRejectsUnknownFields(t *testing.T) {
	_, err := plan.Parse(strings.NewReader(`{"version":1,"sytem":"x"}`))
	if err == nil || !strings.Contains(err.Error(), "sytem") {
		t.Fatalf("typo accepted: %v", err)
	}
	if _, err := plan.Parse(strings.NewReader(`{"version":1} {}`)); err == nil {
		t.Fatal("trailing data accepted")
	}
	var schema map[string]any
	if err := json.Unmarshal(plan.Schema, &schema); err != nil || schema["$schema"] == nil {
		t.Fatalf("schema.json: %v", err)
	}
}

// FuzzParseValidate: any input either fails to parse or validates without
// panicking against an empty inventory.
func FuzzParseValidate(f *testing.F) {
	f.Add([]byte(`{"version":1,"system":"a","network":{"cidr":"10.0.0.0/8"},"hosts":[{"name":"h","roles":["mdm"],"svm_ip":"10.255.255.255","devices":[{"mode":"rdm"}]}]}`))
	f.Add([]byte(`{"network":{"cidr":"::/0"},"iscsi":{"cidr":"1.2.3.4/0"},"hosts":[{"svm_ip":"::"}]}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := plan.Parse(bytes.NewReader(data))
		if err != nil {
			return
		}
		_ = plan.Validate(p, &inventory.Inventory{})
	})
}
