package main

// cairn pki backup | restore: the CA key's sealed copy in etcd (pki/backup.go
// has the format and why).

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/cairn-storage/cairn/appliance/internal/model"
	"github.com/cairn-storage/cairn/appliance/internal/pki"
)

// pkiBackup seals the CA key of --ca under a new recovery key, written to
// --recovery-key-out (0600, never printed or logged), and stores the seal in
// etcd as an MDM (--pki: its mdm certificate).
func pkiBackup(ctx context.Context, args []string) error {
	var c common
	fs := flag.NewFlagSet("pki backup", flag.ContinueOnError)
	c.add(fs)
	caDir := fs.String("ca", "", "the CA directory the MDMs keep (ca.crt, ca.key)")
	out := fs.String("recovery-key-out", "", "file to write the new recovery key to (mode 0600; must not exist): move it off the system")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *caDir == "" || *out == "" {
		return errorf("--ca and --recovery-key-out are required")
	}
	ca, err := pki.LoadCA(*caDir)
	if err != nil {
		return err
	}
	rk := pki.NewRecoveryKey()
	sealed, err := ca.SealBackup(rk)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(*out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("--recovery-key-out: %w (an earlier recovery key is not overwritten: choose another file)", err)
	}
	if _, err := f.WriteString(rk + "\n"); err != nil {
		f.Close()
		os.Remove(*out)
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(*out)
		return err
	}
	cli, err := c.etcd(ctx)
	if err != nil {
		os.Remove(*out)
		return err
	}
	defer cli.Close()
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := cli.Put(pctx, model.CAKeyBackupKey, string(sealed)); err != nil {
		os.Remove(*out)
		return fmt.Errorf("store the sealed CA key in etcd (as an MDM: --pki with its mdm certificate): %w", err)
	}
	fmt.Printf("CA key sealed into etcd (%s) under a new recovery key; any earlier backup is replaced.\n"+
		"The recovery key is in %s: move it off this system (a password manager, a safe) and delete the file.\n"+
		"Without it the backup cannot be opened; with it, anyone holding a copy of etcd has the CA key.\n", model.CAKeyBackupKey, *out)
	return nil
}

// pkiRestore opens the sealed CA key from etcd with the recovery key and
// writes the CA into --out (an empty directory): an MDM host that lost its
// CA directory, or a new one.
func pkiRestore(ctx context.Context, args []string) error {
	var c common
	fs := flag.NewFlagSet("pki restore", flag.ContinueOnError)
	c.add(fs)
	out := fs.String("out", "", "CA directory to write (ca.crt, ca.key 0600); must not hold a CA")
	keyFile := fs.String("recovery-key-file", "", "file holding the recovery key of the last `cairn pki backup`")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *out == "" || *keyFile == "" {
		return errorf("--out and --recovery-key-file are required")
	}
	rk, err := os.ReadFile(*keyFile)
	if err != nil {
		return fmt.Errorf("--recovery-key-file: %w", err)
	}
	cli, err := c.etcd(ctx)
	if err != nil {
		return err
	}
	defer cli.Close()
	gctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	r, err := cli.Get(gctx, model.CAKeyBackupKey)
	if err != nil {
		return fmt.Errorf("read the sealed CA key from etcd (as an MDM: --pki with its mdm certificate): %w", err)
	}
	if len(r.Kvs) == 0 {
		return errors.New("etcd holds no CA key backup: none was made (`cairn pki backup` on an MDM that still has the CA)")
	}
	ca, err := pki.OpenBackup(r.Kvs[0].Value, string(rk))
	if err != nil {
		return err
	}
	if err := ca.WriteTo(*out); err != nil {
		return err
	}
	sum := sha256.Sum256(ca.Cert.Raw)
	fmt.Printf("CA restored into %s: %s, expires %s, SHA-256 %s\n", *out, ca.Cert.Subject.CommonName,
		ca.Cert.NotAfter.UTC().Format(time.RFC3339), hex.EncodeToString(sum[:8]))
	return nil
}
