// Package testvmdk makes small real streamOptimized VMDKs for tests, with qemu-img.
package testvmdk

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Make writes a 16 MiB disk holding some data, converted to a streamOptimized VMDK
// by qemu-img (package qemu-utils), and returns its path and virtual size.
func Make(t testing.TB, dir, subformat string) (path string, capacity int64) {
	t.Helper()
	if _, err := exec.LookPath("qemu-img"); err != nil {
		t.Fatal("qemu-img not found: install qemu-utils (needed to make test VMDKs)")
	}
	const size = 16 << 20
	raw := filepath.Join(dir, "disk.raw")
	data := make([]byte, size)
	copy(data[1<<20:], bytes.Repeat([]byte("cairn test disk "), 4096))
	if err := os.WriteFile(raw, data, 0o644); err != nil {
		t.Fatal(err)
	}
	path = filepath.Join(dir, "disk-"+subformat+".vmdk")
	out, err := exec.Command("qemu-img", "convert", "-O", "vmdk", "-o", "subformat="+subformat, raw, path).CombinedOutput()
	if err != nil {
		t.Fatalf("qemu-img convert: %v: %s", err, out)
	}
	return path, size
}
