package model

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"

	clientv3 "go.etcd.io/etcd/client/v3"
	"golang.org/x/crypto/bcrypt"
)

// BcryptCost is the work factor of bcrypt hashes, which Cairn no longer
// makes (passhash.go): only tests use it, to store legacy hashes.
var BcryptCost = bcrypt.DefaultCost

// Password limits. 72 bytes was bcrypt's limit (it ignored the rest); it is
// kept so that every password valid before argon2id is valid now and the
// other way round.
const (
	MinPasswordLen = 8
	MaxPasswordLen = 72
)

// ErrBadCredentials: unknown user or wrong password (deliberately the same).
var ErrBadCredentials = errors.New("wrong user name or password")

// UserSpec is the request to create a user.
type UserSpec struct {
	Name     string `json:"name"`
	Role     string `json:"role"` // admin, operator or monitor
	Password string `json:"password"`
	Delegate bool   `json:"delegate,omitempty"` // see User.Delegate
}

// UserUpdate changes a user's role and/or password (empty fields are kept).
type UserUpdate struct {
	Role     string `json:"role,omitempty"`
	Password string `json:"password,omitempty"`
	Delegate *bool  `json:"delegate,omitempty"`
}

// ValidRole reports whether r is one of the three roles.
func ValidRole(r string) bool { return r == RoleAdmin || r == RoleOperator || r == RoleMonitor }

func checkPassword(user, pw string) error {
	if n := utf8.RuneCountInString(pw); n < MinPasswordLen || len(pw) > MaxPasswordLen {
		return invalidf("user %q: the password must be %d to %d bytes long", user, MinPasswordLen, MaxPasswordLen)
	}
	return nil
}

func checkRole(user, role string) error {
	if !ValidRole(role) {
		return invalidf("user %q: role %q is unknown; use %s (everything), %s (volumes, hosts, mappings) or %s (read only)", user, role, RoleAdmin, RoleOperator, RoleMonitor)
	}
	return nil
}

// CreateUser stores a user with an argon2id hash of the password.
func (s *Store) CreateUser(ctx context.Context, spec UserSpec) (User, error) {
	if err := ValidateName(KindUser, spec.Name); err != nil {
		return User{}, err
	}
	if err := checkRole(spec.Name, spec.Role); err != nil {
		return User{}, err
	}
	if err := checkPassword(spec.Name, spec.Password); err != nil {
		return User{}, err
	}
	hash, err := hashPassword(ctx, spec.Password)
	if err != nil {
		return User{}, err
	}
	u := User{Name: spec.Name, Role: spec.Role, PasswordHash: hash, Delegate: spec.Delegate}
	return u, s.create(ctx, KindUser, u.Name, u.Name, u, nil, clientv3.OpPut(PasswordHashKey(u.Name), u.PasswordHash))
}

func (s *Store) GetUser(ctx context.Context, name string) (User, error) {
	u, _, err := fetch[User](ctx, s, KindUser, name)
	return u, err
}

// UpdateUser changes role and/or password; the last admin keeps its role.
func (s *Store) UpdateUser(ctx context.Context, name string, up UserUpdate) (User, error) {
	u, rev, err := fetch[User](ctx, s, KindUser, name)
	if err != nil {
		return u, err
	}
	ops := []clientv3.Op{}
	if up.Role == "" && up.Password == "" && up.Delegate == nil {
		return u, &opError{ErrNoChange, fmt.Sprintf("user %q: the request changes nothing; give a new role, password and/or delegate", name)}
	}
	if up.Delegate != nil {
		u.Delegate = *up.Delegate
	}
	var cmps []clientv3.Cmp
	if up.Role != "" && up.Role != u.Role {
		if err := checkRole(name, up.Role); err != nil {
			return u, err
		}
		if u.Role == RoleAdmin {
			r, err := s.lastAdmin(ctx, u.Name, "change the role of")
			if err != nil {
				return u, err
			}
			cmps = append(cmps, unchangedSince(KindUser, r))
		}
		u.Role = up.Role
	}
	if up.Password != "" {
		if err := checkPassword(name, up.Password); err != nil {
			return u, err
		}
		hash, err := hashPassword(ctx, up.Password)
		if err != nil {
			return u, err
		}
		u.PasswordHash = hash
		ops = append(ops, clientv3.OpPut(PasswordHashKey(u.Name), hash))
	}
	b, err := json.Marshal(u)
	if err != nil {
		return u, err
	}
	key := Key(KindUser, u.Name)
	cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(key), "=", rev))
	return u, s.txn(ctx, fmt.Sprintf("user %q", u.Name), cmps, append([]clientv3.Op{clientv3.OpPut(key, string(b))}, ops...)...)
}

// lastAdmin refuses when name is the only admin; it returns the revision of
// the user list it checked.
func (s *Store) lastAdmin(ctx context.Context, name, verb string) (int64, error) {
	users, r, err := listAt[User](ctx, s, KindUser)
	if err != nil {
		return 0, err
	}
	admins := 0
	for _, o := range users {
		if o.Role == RoleAdmin && o.Name != name {
			admins++
		}
	}
	if admins == 0 {
		return 0, inUsef("cannot %s %q: it is the last admin; create another admin first", verb, name)
	}
	return r, nil
}

// DeleteUser removes a user, never the last admin.
func (s *Store) DeleteUser(ctx context.Context, name string) error {
	u, rev, err := fetch[User](ctx, s, KindUser, name)
	if err != nil {
		return err
	}
	var cmps []clientv3.Cmp
	if u.Role == RoleAdmin {
		r, err := s.lastAdmin(ctx, u.Name, "delete")
		if err != nil {
			return err
		}
		cmps = append(cmps, unchangedSince(KindUser, r))
	}
	return s.deleteObj(ctx, KindUser, u.Name, u.Name, rev, cmps, clientv3.OpDelete(PasswordHashKey(u.Name)))
}

// Authenticate checks a password; it returns ErrBadCredentials for an
// unknown user or a wrong password alike (and takes the same time for both:
// an unknown user is checked against dummyHash). A right password whose hash
// is bcrypt or has older argon2id parameters is re-hashed with today's; if
// that write fails (the user changed meanwhile, etcd busy) the login still
// succeeds and the next one tries again.
func (s *Store) Authenticate(ctx context.Context, name, password string) (User, error) {
	u, rev, err := s.userWithHash(ctx, name)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return User{}, unavailable(err)
	}
	if err != nil || name == "" {
		if _, _, err := checkPasswordHash(ctx, dummyHash(), password); err != nil {
			return User{}, err
		}
		return User{}, ErrBadCredentials
	}
	ok, rehash, err := checkPasswordHash(ctx, u.PasswordHash, password)
	if err != nil {
		return User{}, err
	}
	if !ok {
		return User{}, ErrBadCredentials
	}
	if rehash {
		if hash, err := hashPassword(ctx, password); err == nil {
			nu := u
			nu.PasswordHash = hash
			if b, err := json.Marshal(nu); err == nil {
				// The user's key is written too (unchanged): a secret
				// moves only with its object (keys.go).
				key := Key(KindUser, u.Name)
				tr, err := s.C.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", rev)).
					Then(clientv3.OpPut(key, string(b)), clientv3.OpPut(PasswordHashKey(u.Name), hash)).Commit()
				if err == nil && tr.Succeeded {
					u = nu
				}
			}
		}
	}
	return u, nil
}
