// Package pkitest gives tests a throw-away cluster CA and node identities
// made by the product's own pki package (nothing here bypasses it).
package pkitest

import (
	"path/filepath"
	"testing"

	"github.com/cairn-storage/cairn/appliance/internal/pki"
)

// Kit is a CA in a test's temporary directory.
type Kit struct {
	CA  *pki.CA
	dir string
	t   testing.TB
}

// New creates a CA for the test (removed with the test's files).
func New(t testing.TB) *Kit {
	t.Helper()
	dir := t.TempDir()
	ca, err := pki.InitCA(filepath.Join(dir, "ca"), "test", 0)
	if err != nil {
		t.Fatal(err)
	}
	return &Kit{CA: ca, dir: dir, t: t}
}

// CADir is the CA's directory (ca.crt, ca.key).
func (k *Kit) CADir() string { return filepath.Join(k.dir, "ca") }

// Dir issues a certificate for role/name (serving at hosts, default
// 127.0.0.1 and localhost) into its own PKI directory and returns it.
func (k *Kit) Dir(role, name string, hosts ...string) string {
	k.t.Helper()
	if len(hosts) == 0 {
		hosts = []string{"127.0.0.1", "localhost"}
	}
	d := filepath.Join(k.dir, role+"-"+name)
	if err := k.CA.IssueTo(d, pki.Request{Role: role, Name: name, Hosts: hosts}); err != nil {
		k.t.Fatal(err)
	}
	return d
}

// Identity issues and loads an identity for role/name.
func (k *Kit) Identity(role, name string, hosts ...string) *pki.Identity {
	k.t.Helper()
	id, err := pki.LoadIdentity(k.Dir(role, name, hosts...))
	if err != nil {
		k.t.Fatal(err)
	}
	return id
}
