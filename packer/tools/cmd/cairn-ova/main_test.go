package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-storage/cairn/packer/tools/internal/testvmdk"
)

// The pipeline make-ova.sh runs: build from a streamOptimized VMDK, then check.
func TestBuildThenCheck(t *testing.T) {
	dir := t.TempDir()
	vmdk, _ := testvmdk.Make(t, dir, "streamOptimized")
	out := filepath.Join(dir, "cairn-svm-1.0.ova")
	if err := build("build", []string{"-disk", vmdk, "-version", "1.0", "-out", out, "-mtime", "1700000000"}); err != nil {
		t.Fatal(err)
	}
	if err := check([]string{out}); err != nil {
		t.Fatalf("freshly built OVA fails the check: %v", err)
	}
	// A corrupted copy must fail.
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-3000] ^= 0xff
	bad := filepath.Join(dir, "bad.ova")
	if err := os.WriteFile(bad, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := check([]string{bad}); err == nil {
		t.Fatal("corrupted OVA passed the check")
	}
}

func TestBuildRefusesNonStreamDisk(t *testing.T) {
	dir := t.TempDir()
	vmdk, _ := testvmdk.Make(t, dir, "monolithicSparse")
	err := build("build", []string{"-disk", vmdk, "-out", filepath.Join(dir, "x.ova")})
	if err == nil || !strings.Contains(err.Error(), "streamOptimized") {
		t.Fatalf("got %v", err)
	}
}
