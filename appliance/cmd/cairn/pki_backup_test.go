package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cairn-storage/cairn/appliance/internal/etcdtest"
	"github.com/cairn-storage/cairn/appliance/internal/model"
	"github.com/cairn-storage/cairn/appliance/internal/pki"
	"github.com/cairn-storage/cairn/appliance/internal/pki/pkitest"
)

// TestPKIBackupRestore: an MDM seals the CA key into etcd; the recovery key
// lands in a 0600 file and nowhere in etcd; an SDS cannot read the seal; the
// CA restored with the recovery key is the same CA; a wrong key restores
// nothing.
func TestPKIBackupRestore(t *testing.T) {
	kit := pkitest.New(t)
	u := etcdtest.StartTLS(t, kit)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	mdmDir := kit.Identity(pki.RoleMDM, "mdm1").Dir()
	rkFile := filepath.Join(t.TempDir(), "recovery-key")
	if err := pkiBackup(ctx, []string{"--mdm", u, "--pki", mdmDir, "--ca", kit.CADir(), "--recovery-key-out", rkFile}); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(rkFile)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("recovery key file: %v %v", st, err)
	}
	rk, _ := os.ReadFile(rkFile)
	root := etcdtest.Client(t, u, kit.Identity(pki.RoleGateway, "gw"))
	r, err := root.Get(ctx, model.CAKeyBackupKey)
	if err != nil || len(r.Kvs) != 1 || strings.Contains(string(r.Kvs[0].Value), strings.TrimSpace(string(rk))) {
		t.Fatalf("the seal in etcd: %v %v", r, err)
	}
	keyPEM, _ := os.ReadFile(filepath.Join(kit.CADir(), pki.CAKeyFile))
	if strings.Contains(string(r.Kvs[0].Value), string(keyPEM[28:80])) {
		t.Fatal("the CA key is in etcd in clear")
	}
	if r, err := etcdtest.Client(t, u, kit.Identity(pki.RoleSDS, "sds1")).Get(ctx, model.CAKeyBackupKey); err == nil {
		t.Fatalf("an SDS read the sealed CA key: %v", r)
	}
	// A second backup does not overwrite the recovery key file.
	if err := pkiBackup(ctx, []string{"--mdm", u, "--pki", mdmDir, "--ca", kit.CADir(), "--recovery-key-out", rkFile}); err == nil {
		t.Fatal("a backup overwrote the earlier recovery key file")
	}

	out := filepath.Join(t.TempDir(), "ca")
	wrong := filepath.Join(t.TempDir(), "wrong")
	if err := os.WriteFile(wrong, []byte(pki.NewRecoveryKey()), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := pkiRestore(ctx, []string{"--mdm", u, "--pki", mdmDir, "--out", out, "--recovery-key-file", wrong}); err == nil ||
		!strings.Contains(err.Error(), "does not open") {
		t.Fatalf("restore with a wrong key: %v", err)
	}
	if _, err := os.Stat(filepath.Join(out, pki.CAKeyFile)); !os.IsNotExist(err) {
		t.Fatalf("a failed restore wrote a key: %v", err)
	}
	if err := pkiRestore(ctx, []string{"--mdm", u, "--pki", mdmDir, "--out", out, "--recovery-key-file", rkFile}); err != nil {
		t.Fatal(err)
	}
	restored, err := pki.LoadCA(out)
	if err != nil {
		t.Fatal(err)
	}
	if !restored.Cert.Equal(kit.CA.Cert) {
		t.Fatal("restored a different CA")
	}
}
