package lio

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

const iqn = "iqn.2026-01.io.cairn:svm-1"

func ops(acts []Action) []string {
	var out []string
	for _, a := range acts {
		s := a.Op
		switch {
		case a.Backstore != nil:
			s += " " + a.Backstore.Name
		case a.ACL != nil:
			s += " " + a.ACL.Initiator
		case a.Op == OpMapLUN || a.Op == OpUnmapLUN:
			s += " " + a.Initiator + " " + string(rune('0'+a.LUN))
		case a.Op == OpAddLUN || a.Op == OpRemoveLUN:
			s += " " + string(rune('0'+a.LUN))
		case a.Name != "":
			s += " " + a.Name
		case a.Initiator != "":
			s += " " + a.Initiator
		case a.Portal != "":
			s += " " + a.Portal
		}
		out = append(out, s)
	}
	return out
}

func mustDesired(t *testing.T, ex ...Export) State {
	t.Helper()
	st, err := Desired(BackstorePrefix, iqn, []string{"0.0.0.0:3260"}, Credentials{}, ex)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func TestDiffFromEmpty(t *testing.T) {
	d := mustDesired(t, Export{VolumeID: "a1", Size: 1 << 30, Serial: "s1", LUN: 0,
		Hosts: []HostAccess{{IQN: "iqn.h1"}, {IQN: "iqn.h2"}}})
	p, err := Diff(State{}, d)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"create_backstore cairn-a1", "ensure_target", "add_portal 0.0.0.0:3260", "add_lun 0",
		"add_acl iqn.h1", "map_lun iqn.h1 0", "add_acl iqn.h2", "map_lun iqn.h2 0"}
	if got := ops(p.Before); !reflect.DeepEqual(got, want) {
		t.Fatalf("before:\n got %q\nwant %q", got, want)
	}
	if len(p.After) != 0 {
		t.Fatalf("after: %q", ops(p.After))
	}
	// applying the plan and diffing again is a no-op
	if p, _ := Diff(d, d); !p.Empty() {
		t.Fatalf("diff of equal states: %q %q", ops(p.Before), ops(p.After))
	}
}

func TestDiffUnmapAndRemove(t *testing.T) {
	cur := mustDesired(t,
		Export{VolumeID: "a1", Size: 1 << 30, LUN: 0, Hosts: []HostAccess{{IQN: "iqn.h1"}, {IQN: "iqn.h2"}}},
		Export{VolumeID: "b2", Size: 1 << 30, LUN: 1, Hosts: []HostAccess{{IQN: "iqn.h2"}}})
	// h2 loses a1; b2 is unmapped everywhere; a1 grows.
	des := mustDesired(t, Export{VolumeID: "a1", Size: 2 << 30, LUN: 0, Hosts: []HostAccess{{IQN: "iqn.h1"}}})
	p, err := Diff(cur, des)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"resize_backstore cairn-a1", "remove_acl iqn.h2", "remove_lun 1"}
	if got := ops(p.Before); !reflect.DeepEqual(got, want) {
		t.Fatalf("before:\n got %q\nwant %q", got, want)
	}
	if got := ops(p.After); !reflect.DeepEqual(got, []string{"delete_backstore cairn-b2"}) {
		t.Fatalf("after: %q", got)
	}
}

func TestDiffCHAPAndLUNMove(t *testing.T) {
	cur := mustDesired(t, Export{VolumeID: "a1", Size: 1, LUN: 0, Hosts: []HostAccess{{IQN: "iqn.h1"}}})
	des, err := Desired(BackstorePrefix, iqn, []string{"0.0.0.0:3260"}, Credentials{"tgt", "mutualsecret1"},
		[]Export{{VolumeID: "a1", Size: 1, LUN: 3, Hosts: []HostAccess{{IQN: "iqn.h1", CHAP: Credentials{"h1", "secret123456"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	if !des.Target.Authentication || des.Target.ACLs["iqn.h1"].Mutual.User != "tgt" {
		t.Fatalf("CHAP not carried into the desired state: %+v", des.Target)
	}
	p, err := Diff(cur, des)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"ensure_target", "unmap_lun iqn.h1 0", "remove_lun 0", "add_lun 3", "set_acl_auth iqn.h1", "map_lun iqn.h1 3"}
	if got := ops(p.Before); !reflect.DeepEqual(got, want) {
		t.Fatalf("before:\n got %q\nwant %q", got, want)
	}
}

func TestDesiredRejects(t *testing.T) {
	if _, err := Desired(BackstorePrefix, iqn, nil, Credentials{}, []Export{{VolumeID: "a", LUN: 0}, {VolumeID: "b", LUN: 0}}); err == nil {
		t.Error("two volumes on one LUN accepted")
	}
	if _, err := Desired(BackstorePrefix, iqn, nil, Credentials{}, []Export{{VolumeID: "a/b", LUN: 0}}); err == nil {
		t.Error("slash in volume id accepted")
	}
}

// TestReadState builds a configfs-shaped tree (directories, attribute
// files, symlinks as the kernel makes them) and reads it back.
func TestReadState(t *testing.T) {
	root := t.TempDir()
	w := func(p, v string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, p), []byte(v+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ln := func(dest, p string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(dest, filepath.Join(root, p)); err != nil {
			t.Fatal(err)
		}
	}
	w("core/user_0/cairn-a1/info", "Status: ACTIVATED  Max Queue Depth: 0  SectorSize: 512  HwMaxSectors: 2048\n        Config: cairn/a1 Size: 1073741824 MaxDataAreaMB: 64 DataPagesPerBlk: 1 CmdRingSizeMB: 8")
	w("core/user_0/cairn-a1/wwn/vpd_unit_serial", "T10 VPD Unit Serial Number: s1")
	w("core/user_0/cairn-a1/attrib/alua_support", "0")
	w("core/user_0/cairn-a1/attrib/emulate_pr", "0")
	w("core/user_0/other/info", "Config: x Size: 1")
	w("core/fileio_0/cairn-nope/info", "")
	w("core/user_0/cairn-b-a1/info", "Config: cairn/a1 Size: 1") // another target's backstore
	tpg := "iscsi/" + iqn + "/tpgt_1/"
	w(tpg+"enable", "1")
	w(tpg+"attrib/authentication", "0")
	w(tpg+"attrib/generate_node_acls", "0")
	if err := os.MkdirAll(filepath.Join(root, tpg, "np", "0.0.0.0:3260"), 0o755); err != nil {
		t.Fatal(err)
	}
	ln("../../../../../../target/core/user_0/cairn-a1", tpg+"lun/lun_0/cairn-a1")
	w(tpg+"acls/iqn.h1/auth/userid", "NULL")
	w(tpg+"acls/iqn.h1/lun_0/write_protect", "0")
	ln("../../../../../../target/iscsi/"+iqn+"/tpgt_1/lun/lun_0", tpg+"acls/iqn.h1/lun_0/5a1b2c")
	got, err := ReadState(root, iqn, BackstorePrefix)
	if err != nil {
		t.Fatal(err)
	}
	want := mustDesired(t, Export{VolumeID: "a1", Size: 1 << 30, Serial: "s1", LUN: 0, Hosts: []HostAccess{{IQN: "iqn.h1"}}})
	if !reflect.DeepEqual(got.Backstores, want.Backstores) {
		t.Fatalf("backstores: got %+v want %+v", got.Backstores, want.Backstores)
	}
	if p, err := Diff(got, want); err != nil || !p.Empty() {
		t.Fatalf("read state differs from what built it: %v %q %q", err, ops(p.Before), ops(p.After))
	}
}

// A backstore made without Cairn's kernel attributes (an older Cairn, a
// restored saveconfig.json) is reconfigured in place, and only that.
func TestDiffConfiguresStaleAttributes(t *testing.T) {
	want := mustDesired(t, Export{VolumeID: "a1", Size: 1 << 30, Serial: "s1", LUN: 0, Hosts: []HostAccess{{IQN: "iqn.h1"}}})
	cur := State{Prefix: BackstorePrefix, Backstores: map[string]Backstore{}}
	if err := cur.Simulate(mustPlan(t, cur, want)); err != nil {
		t.Fatal(err)
	}
	for _, attrs := range []map[string]string{{"alua_support": "1", "emulate_pr": "0"}, {"alua_support": "0", "emulate_pr": "1"}, nil} {
		b := cur.Backstores["cairn-a1"]
		b.Attributes = attrs
		cur.Backstores["cairn-a1"] = b
		p, err := Diff(cur, want)
		if err != nil {
			t.Fatal(err)
		}
		if got := ops(p.Before); !reflect.DeepEqual(got, []string{"configure_backstore cairn-a1"}) || len(p.After) != 0 {
			t.Fatalf("attributes %v: plan %q %q, want one configure_backstore", attrs, got, ops(p.After))
		}
		if !reflect.DeepEqual(p.Before[0].Backstore.Attributes, RequiredAttributes) {
			t.Fatalf("configure_backstore carries %v, want %v", p.Before[0].Backstore.Attributes, RequiredAttributes)
		}
		if err := cur.Simulate(p.Before); err != nil {
			t.Fatal(err)
		}
		if p2, _ := Diff(cur, want); !p2.Empty() {
			t.Fatalf("did not converge: %q", ops(p2.Before))
		}
	}
}

func mustPlan(t *testing.T, cur, want State) []Action {
	t.Helper()
	p, err := Diff(cur, want)
	if err != nil {
		t.Fatal(err)
	}
	return append(p.Before, p.After...)
}

// TestPlansConverge walks through a sequence of desired states; after each
// plan is simulated, the state must equal the desired one (Diff empty).
func TestPlansConverge(t *testing.T) {
	h := func(iqns ...string) []HostAccess {
		var out []HostAccess
		for _, q := range iqns {
			out = append(out, HostAccess{IQN: q})
		}
		return out
	}
	steps := [][]Export{
		{{VolumeID: "a", Size: 10, LUN: 0, Hosts: h("h1", "h2")}},
		{{VolumeID: "a", Size: 10, LUN: 0, Hosts: h("h1")}, {VolumeID: "b", Size: 5, LUN: 1, Hosts: h("h2", "h3")}},
		{{VolumeID: "b", Size: 5, LUN: 0, Hosts: h("h3")}, {VolumeID: "c", Size: 7, LUN: 2, Hosts: h("h1")}},
		{{VolumeID: "b", Size: 9, LUN: 0, Hosts: []HostAccess{{IQN: "h3", CHAP: Credentials{"u", "secretsecret"}}}}},
		nil,
	}
	var st State
	for i, ex := range steps {
		want := mustDesired(t, ex...)
		p, err := Diff(st, want)
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if err := st.Simulate(p.Before); err != nil {
			t.Fatalf("step %d before: %v (plan %q)", i, err, ops(p.Before))
		}
		if err := st.Simulate(p.After); err != nil {
			t.Fatalf("step %d after: %v", i, err)
		}
		if p2, _ := Diff(st, want); !p2.Empty() {
			t.Fatalf("step %d did not converge: %q %q", i, ops(p2.Before), ops(p2.After))
		}
	}
	if len(st.Backstores) != 0 || len(st.Target.LUNs) != 0 || len(st.Target.ACLs) != 0 {
		t.Fatalf("final empty mapping left %+v %+v", st.Backstores, st.Target)
	}
}
