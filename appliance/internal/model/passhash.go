package model

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"sync"

	"golang.org/x/crypto/argon2"
	"golang.org/x/crypto/bcrypt"
)

// Password hashes. New hashes are argon2id (RFC 9106), stored in the PHC
// string format:
//
//	$argon2id$v=19$m=<KiB>,t=<passes>,p=<lanes>$<salt, base64 raw std>$<hash, base64 raw std>
//
// with a 16-byte random salt and a 32-byte hash. The parameters are in the
// string, so raising them later keeps old hashes verifiable (and they are
// re-hashed at the next login, see Authenticate). Hashes made before
// argon2id ("$2a$"/"$2b$" bcrypt) still verify and are replaced by argon2id
// at the next successful login.
//
// Why these parameters (Argon2Default): 64 MiB and 2 passes with 1 lane is
// RFC 9106's memory-constrained choice scaled to an SVM: about 0.1 s of one
// core per login, and 64 MiB of memory a GPU or ASIC attacker must pay per
// guess. p=1 because an SVM has 2 cores shared with the data path; more
// lanes would buy the attacker nothing and take both cores from I/O.
//
// Memory: each hash in progress holds m KiB, so at most hashSlots run at
// once (the others wait, bounded by their request's context): a storm of
// logins costs hashSlots × 64 MiB, never more, and queues instead of
// exhausting the gateway's memory.

// Argon2Params are the cost parameters of new hashes.
type Argon2Params struct {
	MemoryKiB uint32
	Passes    uint32
	Lanes     uint8
}

// Argon2Default is the cost of new password hashes (see above).
var Argon2Default = Argon2Params{MemoryKiB: 64 << 10, Passes: 2, Lanes: 1}

// PasswordHashParams is the cost of new hashes; tests lower it (as they
// lower BcryptCost, which now only makes legacy hashes in tests).
var PasswordHashParams = Argon2Default

// hashSlots bounds concurrent password hashes (memory: see above).
const hashSlots = 2

var hashSem = make(chan struct{}, hashSlots)

const (
	argonSaltLen = 16
	argonKeyLen  = 32
	// maxArgonMemoryKiB refuses a stored hash that would make a login
	// allocate more than 1 GiB (a corrupt or planted record).
	maxArgonMemoryKiB = 1 << 20
	maxArgonPasses    = 16
)

// withHashSlot runs f holding one of the hashSlots, or fails when ctx ends
// first.
func withHashSlot(ctx context.Context, f func()) error {
	select {
	case hashSem <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("password hashing: every hashing slot is busy (a login storm?) and the request ended (%v); retry later: %w", ctx.Err(), ErrUnavailable)
	}
	defer func() { <-hashSem }()
	f()
	return nil
}

// hashPassword returns the argon2id PHC string of pw with the current
// parameters.
func hashPassword(ctx context.Context, pw string) (string, error) {
	p := PasswordHashParams
	salt := make([]byte, argonSaltLen)
	if _, err := rand.Read(salt); err != nil {
		return "", fmt.Errorf("hash password: %w", err)
	}
	var key []byte
	if err := withHashSlot(ctx, func() { key = argon2.IDKey([]byte(pw), salt, p.Passes, p.MemoryKiB, p.Lanes, argonKeyLen) }); err != nil {
		return "", err
	}
	return encodePHC(p, salt, key), nil
}

func encodePHC(p Argon2Params, salt, key []byte) string {
	b64 := base64.RawStdEncoding
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argon2.Version, p.MemoryKiB, p.Passes, p.Lanes, b64.EncodeToString(salt), b64.EncodeToString(key))
}

var errBadHash = errors.New("stored password hash is malformed")

// parsePHC reads an argon2id PHC string.
func parsePHC(s string) (p Argon2Params, salt, key []byte, err error) {
	parts := strings.Split(s, "$")
	// "", "argon2id", "v=19", "m=..,t=..,p=..", salt, hash
	if len(parts) != 6 || parts[0] != "" || parts[1] != "argon2id" {
		return p, nil, nil, errBadHash
	}
	var v int
	if _, err := fmt.Sscanf(parts[2], "v=%d", &v); err != nil || v != argon2.Version {
		return p, nil, nil, errBadHash
	}
	if _, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &p.MemoryKiB, &p.Passes, &p.Lanes); err != nil ||
		p.Lanes < 1 || p.Passes < 1 || p.Passes > maxArgonPasses || p.MemoryKiB < 8*uint32(p.Lanes) || p.MemoryKiB > maxArgonMemoryKiB {
		return p, nil, nil, errBadHash
	}
	b64 := base64.RawStdEncoding
	if salt, err = b64.DecodeString(parts[4]); err != nil || len(salt) < 8 {
		return p, nil, nil, errBadHash
	}
	if key, err = b64.DecodeString(parts[5]); err != nil || len(key) < 16 || len(key) > 64 {
		return p, nil, nil, errBadHash
	}
	return p, salt, key, nil
}

// checkPasswordHash compares pw with a stored hash (argon2id or legacy
// bcrypt). rehash is true when the password is right but the hash should
// be replaced (bcrypt, or argon2id with other parameters than today's).
// A malformed hash never matches.
func checkPasswordHash(ctx context.Context, stored, pw string) (ok, rehash bool, err error) {
	if strings.HasPrefix(stored, "$2") {
		err = withHashSlot(ctx, func() { ok = bcrypt.CompareHashAndPassword([]byte(stored), []byte(pw)) == nil })
		return ok, ok, err
	}
	p, salt, key, perr := parsePHC(stored)
	if perr != nil {
		return false, false, nil
	}
	var got []byte
	if err := withHashSlot(ctx, func() { got = argon2.IDKey([]byte(pw), salt, p.Passes, p.MemoryKiB, p.Lanes, uint32(len(key))) }); err != nil {
		return false, false, err
	}
	ok = subtle.ConstantTimeCompare(got, key) == 1
	return ok, ok && p != PasswordHashParams, nil
}

// dummyHash keeps the time of a login with an unknown user name equal to
// one with a wrong password: the same argon2id work is done against it.
// Computed on first use, with the parameters current at that time.
var dummyHash = sync.OnceValue(func() string {
	p := PasswordHashParams
	salt := make([]byte, argonSaltLen)
	key := argon2.IDKey([]byte("cairn-timing-equaliser"), salt, p.Passes, p.MemoryKiB, p.Lanes, argonKeyLen)
	return encodePHC(p, salt, key)
})
