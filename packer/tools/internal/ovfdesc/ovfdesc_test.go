package ovfdesc

import (
	"bytes"
	"strings"
	"testing"

	"github.com/vmware/govmomi/ovf"
)

func testParams() Params {
	p := Defaults()
	p.DiskSize, p.Capacity, p.Version = 123456, 4<<30, `1.0 <"&'>`
	return p
}

func TestPropertiesList(t *testing.T) {
	ps := Properties()
	if len(ps) == 0 {
		t.Fatal("no properties")
	}
	seen := map[string]bool{}
	for _, p := range ps {
		if !strings.HasPrefix(p.Key, "cairn.") || seen[p.Key] {
			t.Errorf("bad or duplicate key %q", p.Key)
		}
		seen[p.Key] = true
		if p.Label == "" || p.Description == "" || p.Category == "" || p.Type != "string" {
			t.Errorf("%s: label, description, category and type string are required: %+v", p.Key, p)
		}
	}
	if !seen["cairn.cluster.join_token"] {
		t.Error("join token property missing")
	}
}

// The descriptor parses with govmomi's OVF reader and declares what vSphere needs.
func TestGenerateDescriptor(t *testing.T) {
	doc, err := Generate(testParams())
	if err != nil {
		t.Fatal(err)
	}
	env, err := ovf.Unmarshal(bytes.NewReader(doc))
	if err != nil {
		t.Fatalf("govmomi cannot parse the descriptor: %v\n%s", err, doc)
	}
	if len(env.References) != 1 || env.References[0].Size != 123456 {
		t.Errorf("references %+v", env.References)
	}
	d := env.Disk.Disks[0]
	if d.Capacity != "4294967296" || !strings.HasSuffix(*d.Format, "#streamOptimized") {
		t.Errorf("disk %+v", d)
	}
	vs := env.VirtualSystem
	hw := vs.VirtualHardware[0]
	if hw.Transport == nil || *hw.Transport != "com.vmware.guestInfo" {
		t.Errorf("transport %v", hw.Transport)
	}
	var cpus, mem uint
	var pvscsi, vmxnet3 int
	for _, it := range hw.Item {
		sub := ""
		if it.ResourceSubType != nil {
			sub = *it.ResourceSubType
		}
		switch *it.ResourceType {
		case 3:
			cpus = *it.VirtualQuantity
		case 4:
			mem = *it.VirtualQuantity
		case 6:
			if sub == "VirtualSCSI" {
				pvscsi++
			}
		case 10:
			if sub == "VmxNet3" {
				vmxnet3++
			}
		}
	}
	if cpus != 2 || mem != 2048 || pvscsi != 2 || vmxnet3 != 2 {
		t.Errorf("hardware: cpus %d mem %d pvscsi %d vmxnet3 %d, want 2 2048 2 2", cpus, mem, pvscsi, vmxnet3)
	}
	if vs.Product[0].Version != `1.0 <"&'>` {
		t.Errorf("version not escaped/round-tripped: %q", vs.Product[0].Version)
	}
	got := map[string]ovf.Property{}
	for _, p := range vs.Product[0].Property {
		got[p.Key] = p
	}
	for _, want := range Properties() {
		p, ok := got[want.Key]
		if !ok {
			t.Errorf("property %s missing", want.Key)
			continue
		}
		if *p.Label != want.Label || *p.Description != want.Description || *p.Default != want.Default || !*p.UserConfigurable {
			t.Errorf("property %s: %+v", want.Key, p)
		}
		if want.Password != (p.Password != nil && *p.Password) {
			t.Errorf("property %s: password flag %v", want.Key, p.Password)
		}
	}
}

func TestGenerateRejects(t *testing.T) {
	for _, mut := range []func(*Params){
		func(p *Params) { p.Name = "a/b" },
		func(p *Params) { p.DiskFile = "../x.vmdk" },
		func(p *Params) { p.Capacity = 1000 },
		func(p *Params) { p.DiskSize = 0 },
		func(p *Params) { p.CPUs = 0 },
	} {
		p := testParams()
		mut(&p)
		if _, err := Generate(p); err == nil {
			t.Errorf("accepted %+v", p)
		}
	}
}
