package pki

// The CA key's backup: the MDMs keep the CA key in their CA directory (mode
// 0600); should every copy be lost (all MDM hosts replaced), no certificate
// could be issued again. So the key may be kept in etcd too, but only sealed
// under a recovery key that etcd never holds: the admin keeps it off the
// system. Whoever reads etcd's data files (a stolen disk, a backup of
// etcd) gets ciphertext.
//
// Sealed format, version 1 (JSON, at model.CAKeyBackupKey):
//
//	{"format": 1,
//	 "aead": "AES-256-GCM",
//	 "ca_cert": "<the CA certificate, PEM>",
//	 "nonce": "<12 bytes, base64>",
//	 "sealed": "<GCM(recovery key, nonce, the CA key's PKCS#8 DER), base64>"}
//
// The additional data of the seal is "cairn-ca-key-backup/1" and the SHA-256
// of the CA certificate's DER: a backup opens only as the key of the
// certificate stored beside it, and a swapped certificate fails to open.
// The recovery key is 32 random bytes, written for people as
// "cairn-rk1-" and 52 base32 characters in groups of four.

import (
	"bytes"
	"crypto"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base32"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

const (
	backupFormat     = 1
	backupAEAD       = "AES-256-GCM"
	recoveryPrefix   = "cairn-rk1-"
	backupAADPrefix  = "cairn-ca-key-backup/1"
	maxBackupSize    = 16 << 10 // a P-256 key and its certificate fit many times over
	recoveryKeyBytes = 32
)

// ErrBackupKey: the recovery key does not open the backup (wrong key, or
// the backup was altered).
var ErrBackupKey = errors.New("the recovery key does not open this CA key backup (wrong key, or the backup was altered)")

var recoveryEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)

// NewRecoveryKey returns a fresh recovery key in its written form.
func NewRecoveryKey() string {
	var k [recoveryKeyBytes]byte
	if _, err := rand.Read(k[:]); err != nil {
		panic("pki: no randomness: " + err.Error())
	}
	s := recoveryEncoding.EncodeToString(k[:])
	var groups []string
	for len(s) > 4 {
		groups = append(groups, s[:4])
		s = s[4:]
	}
	return recoveryPrefix + strings.Join(append(groups, s), "-")
}

// parseRecoveryKey reads the written form back (case, spaces, dashes and a
// trailing newline forgiven: it is typed or pasted by people).
func parseRecoveryKey(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	if !strings.HasPrefix(strings.ToLower(s), recoveryPrefix) {
		return nil, fmt.Errorf("not a Cairn recovery key (it starts with %q)", recoveryPrefix)
	}
	body := strings.ToUpper(strings.NewReplacer("-", "", " ", "").Replace(s[len(recoveryPrefix):]))
	k, err := recoveryEncoding.DecodeString(body)
	if err != nil || len(k) != recoveryKeyBytes {
		return nil, fmt.Errorf("the recovery key is mistyped: want %q and 52 characters A-Z 2-7", recoveryPrefix)
	}
	return k, nil
}

type sealedCAKey struct {
	Format int    `json:"format"`
	AEAD   string `json:"aead"`
	CACert string `json:"ca_cert"`
	Nonce  []byte `json:"nonce"`
	Sealed []byte `json:"sealed"`
}

func backupAAD(der []byte) []byte {
	sum := sha256.Sum256(der)
	return append([]byte(backupAADPrefix), sum[:]...)
}

func gcmFor(key []byte) (cipher.AEAD, error) {
	b, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(b)
}

// SealBackup seals ca's key under the recovery key (written form).
func (ca *CA) SealBackup(recoveryKey string) ([]byte, error) {
	k, err := parseRecoveryKey(recoveryKey)
	if err != nil {
		return nil, err
	}
	der, err := x509.MarshalPKCS8PrivateKey(ca.key)
	if err != nil {
		return nil, err
	}
	g, err := gcmFor(k)
	if err != nil {
		return nil, err
	}
	nonce := make([]byte, g.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	return json.Marshal(sealedCAKey{Format: backupFormat, AEAD: backupAEAD, CACert: string(ca.pem), Nonce: nonce,
		Sealed: g.Seal(nil, nonce, der, backupAAD(ca.Cert.Raw))})
}

// OpenBackup opens a sealed backup with the recovery key and returns the
// CA it holds, its key checked against its certificate. b comes from etcd:
// it is bounded and checked before use.
func OpenBackup(b []byte, recoveryKey string) (*CA, error) {
	if len(b) > maxBackupSize {
		return nil, fmt.Errorf("CA key backup of %d bytes: larger than any backup Cairn writes (%d); it is not one", len(b), maxBackupSize)
	}
	var s sealedCAKey
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("CA key backup malformed: %w", err)
	}
	if s.Format != backupFormat || s.AEAD != backupAEAD {
		return nil, fmt.Errorf("CA key backup of format %d (%s): this Cairn reads format %d (%s)", s.Format, s.AEAD, backupFormat, backupAEAD)
	}
	cert, err := parseCert([]byte(s.CACert))
	if err != nil || !cert.IsCA {
		return nil, fmt.Errorf("CA key backup: its certificate is not a CA certificate (%v)", err)
	}
	k, err := parseRecoveryKey(recoveryKey)
	if err != nil {
		return nil, err
	}
	g, err := gcmFor(k)
	if err != nil {
		return nil, err
	}
	if len(s.Nonce) != g.NonceSize() {
		return nil, fmt.Errorf("CA key backup malformed: nonce of %d bytes", len(s.Nonce))
	}
	der, err := g.Open(nil, s.Nonce, s.Sealed, backupAAD(cert.Raw))
	if err != nil {
		return nil, ErrBackupKey
	}
	key, err := x509.ParsePKCS8PrivateKey(der)
	if err != nil {
		return nil, fmt.Errorf("CA key backup: the opened key does not parse: %w", err)
	}
	ca := &CA{Cert: cert, pem: []byte(s.CACert)}
	var ok bool
	if ca.key, ok = key.(crypto.Signer); !ok || !publicEqual(ca.key.Public(), cert.PublicKey) {
		return nil, errors.New("CA key backup: the key does not belong to its certificate")
	}
	return ca, nil
}

// WriteTo writes the CA into dir as InitCA would (ca.crt, ca.key 0600),
// refusing to replace a CA already there.
func (ca *CA) WriteTo(dir string) error {
	if _, err := os.Stat(filepath.Join(dir, CAKeyFile)); err == nil {
		return fmt.Errorf("%s already holds a CA key (%s): restore into an empty directory", dir, CAKeyFile)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	// Only root reads a CA directory, whoever made it beforehand.
	if err := os.Chmod(dir, 0o700); err != nil {
		return err
	}
	keyPEM, err := encodeKey(ca.key)
	if err != nil {
		return err
	}
	if err := writeFile(filepath.Join(dir, CAKeyFile), keyPEM, 0o600); err != nil {
		return err
	}
	return writeFile(filepath.Join(dir, CACertFile), ca.pem, 0o644)
}
