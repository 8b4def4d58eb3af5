package model_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/cairn-storage/cairn/appliance/internal/model"
	"golang.org/x/crypto/bcrypt"
)

// storedHash reads the password hash etcd holds for a user.
func (f *fixture) storedHash(name string) string {
	f.t.Helper()
	r, err := f.c.Get(f.ctx, model.PasswordHashKey(name))
	if err != nil || len(r.Kvs) != 1 {
		f.t.Fatalf("password hash of %s: %v %v", name, r, err)
	}
	return string(r.Kvs[0].Value)
}

func TestPasswordsAreArgon2id(t *testing.T) {
	f := newFixture(t)
	must(f.s.CreateUser(f.ctx, model.UserSpec{Name: "ann", Role: model.RoleMonitor, Password: "correct horse"}))
	h := f.storedHash("ann")
	if !strings.HasPrefix(h, "$argon2id$v=19$m=64,t=1,p=1$") || len(strings.Split(h, "$")) != 6 {
		t.Fatalf("stored hash %q is not an argon2id PHC string with the configured parameters", h)
	}
	if strings.Contains(h, "correct horse") {
		t.Fatal("the password is in the stored hash")
	}
	if _, err := f.s.Authenticate(f.ctx, "ann", "correct horse"); err != nil {
		t.Fatalf("right password refused: %v", err)
	}
	if _, err := f.s.Authenticate(f.ctx, "ann", "correct horsf"); !errors.Is(err, model.ErrBadCredentials) {
		t.Fatalf("wrong password: %v", err)
	}
	// Same password, other salt: two users' hashes differ.
	must(f.s.CreateUser(f.ctx, model.UserSpec{Name: "bob", Role: model.RoleMonitor, Password: "correct horse"}))
	if f.storedHash("bob") == h {
		t.Fatal("two hashes of one password are equal: no salt")
	}
	// A changed password is argon2id too, and only the new one works.
	must(f.s.UpdateUser(f.ctx, "ann", model.UserUpdate{Password: "battery staple"}))
	if !strings.HasPrefix(f.storedHash("ann"), "$argon2id$") {
		t.Fatal("updated password not argon2id")
	}
	if _, err := f.s.Authenticate(f.ctx, "ann", "correct horse"); !errors.Is(err, model.ErrBadCredentials) {
		t.Fatalf("old password still works: %v", err)
	}
}

// putUserHash stores a user record with the given hash, as an older Cairn
// (bcrypt) or a corrupted record would have it.
func (f *fixture) putUserHash(name, hash string) {
	f.t.Helper()
	if _, err := f.c.Put(f.ctx, model.PasswordHashKey(name), hash); err != nil {
		f.t.Fatal(err)
	}
}

func TestLegacyBcryptRehashedAtLogin(t *testing.T) {
	f := newFixture(t)
	must(f.s.CreateUser(f.ctx, model.UserSpec{Name: "old", Role: model.RoleAdmin, Password: "placeholder1"}))
	legacy, err := bcrypt.GenerateFromPassword([]byte("from version one"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	f.putUserHash("old", string(legacy))
	// A wrong password changes nothing.
	if _, err := f.s.Authenticate(f.ctx, "old", "from version two"); !errors.Is(err, model.ErrBadCredentials) {
		t.Fatalf("wrong password against bcrypt: %v", err)
	}
	if f.storedHash("old") != string(legacy) {
		t.Fatal("a failed login rewrote the hash")
	}
	u, err := f.s.Authenticate(f.ctx, "old", "from version one")
	if err != nil {
		t.Fatalf("bcrypt hash no longer verifies: %v", err)
	}
	now := f.storedHash("old")
	if !strings.HasPrefix(now, "$argon2id$") || u.PasswordHash != now {
		t.Fatalf("bcrypt hash not replaced by argon2id at login: %q", now)
	}
	if _, err := f.s.Authenticate(f.ctx, "old", "from version one"); err != nil {
		t.Fatalf("re-hashed password refused: %v", err)
	}
	if f.storedHash("old") != now {
		t.Fatal("an up-to-date hash was rewritten")
	}

	// Raised parameters: the next login re-hashes with them.
	saved := model.PasswordHashParams
	t.Cleanup(func() { model.PasswordHashParams = saved })
	model.PasswordHashParams = model.Argon2Params{MemoryKiB: 128, Passes: 2, Lanes: 1}
	if _, err := f.s.Authenticate(f.ctx, "old", "from version one"); err != nil {
		t.Fatal(err)
	}
	if h := f.storedHash("old"); !strings.HasPrefix(h, "$argon2id$v=19$m=128,t=2,p=1$") {
		t.Fatalf("hash not upgraded to the new parameters: %q", h)
	}
}

func TestMalformedHashNeverMatches(t *testing.T) {
	f := newFixture(t)
	must(f.s.CreateUser(f.ctx, model.UserSpec{Name: "eve", Role: model.RoleMonitor, Password: "placeholder1"}))
	for _, h := range []string{
		"", "plain text", "$argon2id$v=19$m=64,t=1,p=1$", "$argon2i$v=19$m=64,t=1,p=1$c2FsdHNhbHQ$aGFzaGhhc2hoYXNoaGFzaA",
		"$argon2id$v=16$m=64,t=1,p=1$c2FsdHNhbHQ$aGFzaGhhc2hoYXNoaGFzaA",
		"$argon2id$v=19$m=99999999,t=1,p=1$c2FsdHNhbHQ$aGFzaGhhc2hoYXNoaGFzaA", // 95 GiB: refused, not allocated
		"$argon2id$v=19$m=64,t=1,p=0$c2FsdHNhbHQ$aGFzaGhhc2hoYXNoaGFzaA",
	} {
		f.putUserHash("eve", h)
		if _, err := f.s.Authenticate(f.ctx, "eve", "placeholder1"); !errors.Is(err, model.ErrBadCredentials) {
			t.Errorf("hash %q: %v, want ErrBadCredentials", h, err)
		}
	}
}
