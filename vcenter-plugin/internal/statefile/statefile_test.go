package statefile_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/cairn-storage/cairn/vcenter-plugin/internal/statefile"
)

func TestWriteJSONReplacesPrivately(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state", "deploy-cairn1.json")
	if err := statefile.WriteJSON(path, map[string]int{"version": 1}); err != nil {
		t.Fatal(err)
	}
	// A leftover of a crash, world-readable: its mode must not carry over.
	if err := os.WriteFile(path+".tmp", []byte("torn"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := statefile.WriteJSON(path, map[string]int{"version": 2}); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil || string(got) != "{\n  \"version\": 2\n}" {
		t.Fatalf("content %q, %v", got, err)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Fatalf("state file mode %v, want 0600: it holds secrets", fi.Mode())
	}
	if fi, _ := os.Stat(filepath.Dir(path)); fi.Mode().Perm() != 0o700 {
		t.Fatalf("state directory mode %v, want 0700", fi.Mode())
	}
	if _, err := os.Stat(path + ".tmp"); !os.IsNotExist(err) {
		t.Fatalf("temporary file left behind: %v", err)
	}
}

func TestWriteFailsClearlyAndKeepsTheOldFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "plan-cairn1.json")
	if err := statefile.Write(path, []byte("old")); err != nil {
		t.Fatal(err)
	}
	if err := statefile.WriteJSON(path, func() {}); err == nil {
		t.Fatal("a value JSON cannot encode was written")
	}
	// The rename fails when the target is a non-empty directory.
	blocked := filepath.Join(dir, "blocked")
	if err := os.MkdirAll(filepath.Join(blocked, "x"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := statefile.Write(blocked, []byte("new")); err == nil {
		t.Fatal("replaced a directory")
	}
	if _, err := os.Stat(blocked + ".tmp"); !os.IsNotExist(err) {
		t.Fatalf("temporary file left behind after a failure: %v", err)
	}
	if got, _ := os.ReadFile(path); string(got) != "old" {
		t.Fatalf("a failed write changed the file: %q", got)
	}
}
