// Package join gives a new node its certificate: an admin (the gateway's
// POST /system/join-tokens) creates a short-lived join token; the node sends
// it, with a certificate signing request, to the join service an MDM runs
// beside the CA (`cairn pki serve`); the MDM checks and spends the token and
// signs. The node's private key never leaves it, the CA's key never leaves
// the MDM, and nobody copies certificates by hand.
//
// A token is one string carrying everything the node needs to trust the
// service as well as to be trusted by it:
//
//	cj1.<id>.<secret>.<ca-sha256>
//
// id (16 hex) names its record in etcd (model.JoinTokenKey), which keeps only
// the secret's SHA-256, the roles the token may be spent on and its expiry;
// secret is 32 random bytes, base64url; ca-sha256 is the fingerprint of the
// cluster CA, which the node pins: the service must present a chain ending in
// that CA, so a node that reaches an impostor sends it nothing but a CSR and
// a token the impostor cannot spend without the real CA. The whole string
// fits the OVF property cairn.cluster.join_token.
package join

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cairn-storage/cairn/appliance/contract"
	"github.com/cairn-storage/cairn/appliance/internal/pki"
)

const prefix = contract.JoinTokenPrefix

// Token lifetimes the gateway accepts.
const (
	MinTTL     = time.Minute
	MaxTTL     = 7 * 24 * time.Hour
	DefaultTTL = time.Hour
)

// Token is a parsed join token.
type Token struct {
	ID     string // 16 hex digits
	Secret string // base64url of 32 bytes
	CA     string // the CA's SHA-256, 64 hex digits
}

// Record is what etcd keeps of a token: never the secret itself.
type Record struct {
	ID        string    `json:"id"`
	Hash      string    `json:"hash"` // SHA-256 of the secret, hex
	Roles     []string  `json:"roles"`
	Expires   time.Time `json:"expires"`
	CreatedBy string    `json:"created_by"`
	Created   time.Time `json:"created"`
	// Name is the node that spent the token's first role: a token for
	// several roles (an SVM runs sds and target) gives one certificate per
	// role, all to that one name.
	Name string `json:"name,omitempty"`
}

// New makes a token for the CA whose fingerprint is ca, and its record.
func New(ca string, roles []string, ttl time.Duration, by string, now time.Time) (Token, Record, error) {
	if len(ca) != 64 || !isHexString(ca) {
		return Token{}, Record{}, errors.New("join token: the CA fingerprint must be 64 hex digits")
	}
	if ttl < MinTTL || ttl > MaxTTL {
		return Token{}, Record{}, fmt.Errorf("join token lifetime %s: give %s to %s", ttl, MinTTL, MaxTTL)
	}
	if err := checkRoles(roles); err != nil {
		return Token{}, Record{}, err
	}
	var id [8]byte
	var sec [32]byte
	if _, err := rand.Read(id[:]); err != nil {
		return Token{}, Record{}, err
	}
	if _, err := rand.Read(sec[:]); err != nil {
		return Token{}, Record{}, err
	}
	t := Token{ID: hex.EncodeToString(id[:]), Secret: base64.RawURLEncoding.EncodeToString(sec[:]), CA: strings.ToLower(ca)}
	r := Record{ID: t.ID, Hash: hashOf(t.Secret), Roles: slices.Clone(roles), Expires: now.Add(ttl).UTC(),
		CreatedBy: by, Created: now.UTC()}
	return t, r, nil
}

// checkRoles accepts 1-7 distinct node roles. A token for mdm is allowed (a
// new MDM needs a certificate too), and its certificate then also gets the
// CA from the join service (cakey.go): give one only to a new MDM member.
func checkRoles(roles []string) error {
	if len(roles) == 0 || len(roles) > len(pki.Roles) {
		return fmt.Errorf("join token roles: give 1-%d of %s", len(pki.Roles), strings.Join(pki.Roles, ", "))
	}
	for i, r := range roles {
		if !pki.ValidRole(r) || slices.Contains(roles[:i], r) {
			return fmt.Errorf("join token role %q: give each of %s at most once", contract.Clip(r), strings.Join(pki.Roles, ", "))
		}
	}
	return nil
}

// String is the token as given to a node. It is a secret: never log it.
func (t Token) String() string { return prefix + "." + t.ID + "." + t.Secret + "." + t.CA }

// Parse reads a token (surrounding white space allowed, as from a file).
// Its errors never echo the input: it is a secret.
func Parse(s string) (Token, error) {
	s = strings.TrimSpace(s)
	if len(s) > 256 {
		return Token{}, errors.New("join token: too long (a token is about 130 characters: cj1.<id>.<secret>.<ca-sha256>)")
	}
	p := strings.Split(s, ".")
	if len(p) != 4 || p[0] != prefix {
		return Token{}, errors.New("join token: malformed (expected cj1.<id>.<secret>.<ca-sha256>; create one with `cairnctl join-token create`)")
	}
	t := Token{ID: p[1], Secret: p[2], CA: strings.ToLower(p[3])}
	if len(t.ID) != 16 || !isHexString(t.ID) {
		return Token{}, errors.New("join token: malformed id")
	}
	if b, err := base64.RawURLEncoding.DecodeString(t.Secret); err != nil || len(b) != 32 {
		return Token{}, errors.New("join token: malformed secret")
	}
	if len(t.CA) != 64 || !isHexString(t.CA) {
		return Token{}, errors.New("join token: malformed CA fingerprint")
	}
	return t, nil
}

// Check reports whether t may be spent on role for name at now, by r.
func (r Record) Check(t Token, role, name string, now time.Time) error {
	if subtle.ConstantTimeCompare([]byte(hashOf(t.Secret)), []byte(r.Hash)) != 1 {
		return errRefused
	}
	if !now.Before(r.Expires) {
		return refusal{fmt.Errorf("join token %s expired at %s: create a new one with `cairnctl join-token create`", r.ID, r.Expires.Format(time.RFC3339))}
	}
	if !slices.Contains(r.Roles, role) {
		return refusal{fmt.Errorf("join token %s may be spent on %s, not %q: create one for that role", r.ID, strings.Join(r.Roles, ", "), contract.Clip(role))}
	}
	if r.Name != "" && r.Name != name {
		return refusal{fmt.Errorf("join token %s was spent by %s; its other roles are for that node only, not %q", r.ID, r.Name, contract.Clip(name))}
	}
	return nil
}

// errRefused is the one answer to an unknown token or a wrong secret: which
// of the two it was is not told.
var errRefused error = refusal{errors.New("join token refused: unknown, already used or revoked; create a new one with `cairnctl join-token create`")}

// refusal marks an error as the token's fault (403), not the service's.
type refusal struct{ error }

// Refused reports whether err refuses the token (as opposed to etcd failing).
func Refused(err error) bool {
	var r refusal
	return errors.As(err, &r)
}

func hashOf(secret string) string {
	s := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(s[:])
}

// isHexString reports whether s is hex digits (either case), an even number.
func isHexString(s string) bool {
	_, err := hex.DecodeString(s)
	return err == nil
}

// marshal is the record as stored.
func (r Record) marshal() string {
	b, _ := json.Marshal(r)
	return string(b)
}
