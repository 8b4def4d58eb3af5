package ova

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cairn-storage/cairn/packer/tools/internal/ovfdesc"
	"github.com/cairn-storage/cairn/packer/tools/internal/testvmdk"
)

type fixture struct {
	dir, vmdk, desc string
	descriptor      []byte
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	dir := t.TempDir()
	vmdk, capacity := testvmdk.Make(t, dir, "streamOptimized")
	fi, err := os.Stat(vmdk)
	if err != nil {
		t.Fatal(err)
	}
	p := ovfdesc.Defaults()
	p.DiskSize, p.Capacity = fi.Size(), capacity
	desc, err := ovfdesc.Generate(p)
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{dir: dir, vmdk: vmdk, desc: p.Name + ".ovf", descriptor: desc}
}

func (f *fixture) good(t *testing.T) string {
	t.Helper()
	out := filepath.Join(f.dir, "good.ova")
	if err := Build(out, f.desc, f.descriptor, []File{{Name: "cairn-svm-disk1.vmdk", Path: f.vmdk}}, time.Unix(1700000000, 0)); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestCheckGood(t *testing.T) {
	f := newFixture(t)
	r, err := Check(f.good(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Problems) > 0 {
		t.Fatalf("good OVA has problems: %v", r.Problems)
	}
	var names []string
	for _, m := range r.Members {
		names = append(names, m.Name)
	}
	if strings.Join(names, " ") != "cairn-svm.ovf cairn-svm.mf cairn-svm-disk1.vmdk" {
		t.Errorf("members %v", names)
	}
	if len(r.Disks) != 1 || r.Disks[0].CreateType != "streamOptimized" || r.Disks[0].Capacity != 16<<20 {
		t.Errorf("disks %+v", r.Disks)
	}
	if len(r.Properties) != len(ovfdesc.Properties()) {
		t.Errorf("properties %v", r.Properties)
	}
}

func TestBuildReproducible(t *testing.T) {
	f := newFixture(t)
	a, err := os.ReadFile(f.good(t))
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(f.good(t))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Error("two builds from the same inputs differ")
	}
}

// gdAtEndHeader turns qemu's layout into VMware's (GD_AT_END in the header) without
// adding the footer, i.e. a VMware-style stream cut before its end.
func gdAtEndHeader(b []byte) []byte {
	c := bytes.Clone(b)
	for i := 56; i < 64; i++ {
		c[i] = 0xff
	}
	return c
}

// member is one entry for writeTar.
type member struct {
	name string
	data []byte
	hdr  func(*tar.Header)
}

func readMembers(t *testing.T, ova string) []member {
	t.Helper()
	fh, err := os.Open(ova)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	tr := tar.NewReader(fh)
	var ms []member
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return ms
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		ms = append(ms, member{name: h.Name, data: b})
	}
}

func writeTar(t *testing.T, path string, format tar.Format, ms []member) {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, m := range ms {
		h := &tar.Header{Name: m.name, Size: int64(len(m.data)), Mode: 0o644, Typeflag: tar.TypeReg, Format: format, ModTime: time.Unix(1700000000, 0)}
		if m.hdr != nil {
			m.hdr(h)
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(m.data); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestCheckBroken(t *testing.T) {
	f := newFixture(t)
	good := readMembers(t, f.good(t))
	ovf, mf, disk := good[0], good[1], good[2]
	streamVMDK, _ := os.ReadFile(f.vmdk)
	sparseVMDK, _ := testvmdk.Make(t, t.TempDir(), "monolithicSparse")
	sparse, _ := os.ReadFile(sparseVMDK)

	hdr, err := ParseVMDKHeader(streamVMDK)
	if err != nil || hdr.GDOffset == gdAtEnd {
		t.Fatalf("qemu-img layout expected: %+v %v", hdr, err)
	}
	gdCut := int(hdr.GDOffset) * sector // the stream cut just before its grain directory
	flip := func(b []byte, at int) []byte {
		c := bytes.Clone(b)
		c[at] ^= 0xff
		return c
	}
	replaceDesc := func(old, new string) member {
		return member{name: ovf.name, data: bytes.Replace(ovf.data, []byte(old), []byte(new), 1)}
	}

	cases := []struct {
		name    string
		format  tar.Format
		members []member
		mutate  func([]byte) []byte // applied to the whole archive
		want    string
	}{
		{name: "descriptor not first", format: tar.FormatUSTAR, members: []member{mf, ovf, disk}, want: "descriptor must come first"},
		{name: "disk before manifest", format: tar.FormatUSTAR, members: []member{ovf, disk, mf}, want: "member order"},
		{name: "pax format", format: tar.FormatPAX, members: []member{ovf, mf, {name: disk.name, data: disk.data, hdr: func(h *tar.Header) { h.PAXRecords = map[string]string{"comment": "x"} }}}, want: "PAX/GNU"},
		{name: "gnu format", format: tar.FormatGNU, members: []member{ovf, mf, disk}, want: "not POSIX ustar"},
		{name: "dot slash prefix", format: tar.FormatUSTAR, members: []member{{name: "./" + ovf.name, data: ovf.data}, mf, disk}, want: "./ prefix"},
		{name: "no manifest", format: tar.FormatUSTAR, members: []member{ovf, disk}, want: "no manifest"},
		{name: "hash mismatch", format: tar.FormatUSTAR, members: []member{ovf, mf, {name: disk.name, data: flip(disk.data, 5000)}}, want: "manifest SHA256 of cairn-svm-disk1.vmdk"},
		{name: "manifest line broken", format: tar.FormatUSTAR, members: []member{ovf, {name: mf.name, data: append(bytes.Clone(mf.data), "MD5(x) = 00\n"...)}, disk}, want: "is not \"SHA256(file)= hex\""},
		{name: "manifest incomplete", format: tar.FormatUSTAR, members: []member{ovf, {name: mf.name, data: mf.data[:bytes.IndexByte(mf.data, '\n')+1]}, disk}, want: "does not list cairn-svm-disk1.vmdk"},
		{name: "size mismatch", format: tar.FormatUSTAR, members: []member{ovf, mf, {name: disk.name, data: append(bytes.Clone(disk.data), 0)}}, want: "References says ovf:size"},
		{name: "missing disk", format: tar.FormatUSTAR, members: []member{ovf, mf}, want: "missing from the archive"},
		{name: "not streamOptimized", format: tar.FormatUSTAR, members: []member{ovf, mf, {name: disk.name, data: sparse}}, want: "want streamOptimized"},
		{name: "raw disk", format: tar.FormatUSTAR, members: []member{ovf, mf, {name: disk.name, data: make([]byte, len(streamVMDK))}}, want: "not a sparse VMDK"},
		{name: "truncated stream", format: tar.FormatUSTAR, members: []member{ovf, mf, {name: disk.name, data: streamVMDK[:gdCut]}}, want: "truncated stream"},
		{name: "vmware footer missing", format: tar.FormatUSTAR, members: []member{ovf, mf, {name: disk.name, data: gdAtEndHeader(streamVMDK)}}, want: "no footer header"},
		{name: "capacity mismatch", format: tar.FormatUSTAR, members: []member{replaceDesc(`ovf:capacity="16777216"`, `ovf:capacity="1048576"`), mf, disk}, want: "ovf:capacity 1048576 bytes"},
		{name: "no guestinfo transport", format: tar.FormatUSTAR, members: []member{replaceDesc(`ovf:transport="com.vmware.guestInfo"`, ``), mf, disk}, want: "com.vmware.guestInfo"},
		{name: "property without label", format: tar.FormatUSTAR, members: []member{replaceDesc(`<Label>Host name</Label>`, ``), mf, disk}, want: "lacks a Label"},
		{name: "descriptor not xml", format: tar.FormatUSTAR, members: []member{{name: ovf.name, data: []byte("<Envelope")}, mf, disk}, want: "not a readable OVF envelope"},
		{name: "truncated archive", format: tar.FormatUSTAR, members: []member{ovf, mf, disk}, mutate: func(b []byte) []byte { return b[:len(b)/2] }, want: "truncated"},
		{name: "corrupt header", format: tar.FormatUSTAR, members: []member{ovf, mf, disk}, mutate: func(b []byte) []byte { return flip(b, 20) }, want: "header checksum"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "bad.ova")
			writeTar(t, p, c.format, c.members)
			if c.mutate != nil {
				b, _ := os.ReadFile(p)
				os.WriteFile(p, c.mutate(b), 0o644)
			}
			r, err := Check(p)
			if err != nil {
				t.Fatal(err)
			}
			if len(r.Problems) == 0 {
				t.Fatal("broken OVA passed the check")
			}
			if !strings.Contains(strings.Join(r.Problems, "\n"), c.want) {
				t.Errorf("problems do not mention %q:\n%s", c.want, strings.Join(r.Problems, "\n"))
			}
		})
	}
}
