package model

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Bootstrap tokens let the deployer of a new system set the admin credential once,
// without a long-lived secret ever travelling in a vApp property. Layout v1:
//
//	key   /cairn/v1/token/bootstrap/<hex sha256(token)>
//	value {"user":"admin","created":"<RFC 3339>"}
//
// under an etcd lease of the token's lifetime, so an unused token vanishes by itself.
// Only the hash is stored: reading etcd does not reveal the token. Redeeming deletes
// the key in the same transaction that sets the password, so a token works at most
// once even when two requests race.

type bootstrapRecord struct {
	User    string    `json:"user"`
	Created time.Time `json:"created"`
}

// PutBootstrapToken stores token for user, valid for ttl (whole seconds, at least 1).
func (s *Store) PutBootstrapToken(ctx context.Context, token, user string, ttl time.Duration) error {
	secs := int64((ttl + time.Second - 1) / time.Second)
	lease, err := s.C.Grant(ctx, max(secs, 1))
	if err != nil {
		return fmt.Errorf("bootstrap token: grant lease: %w", err)
	}
	b, err := json.Marshal(bootstrapRecord{User: user, Created: time.Now().UTC()})
	if err != nil {
		return err
	}
	if _, err := s.C.Put(ctx, bootstrapKey(token), string(b), clientv3.WithLease(lease.ID)); err != nil {
		return fmt.Errorf("bootstrap token: store: %w", err)
	}
	return nil
}

// RedeemBootstrapToken sets the password of the token's user and deletes the token,
// atomically. An unknown, expired or already used token is ErrBadCredentials.
func (s *Store) RedeemBootstrapToken(ctx context.Context, token, password string) (User, error) {
	key := bootstrapKey(token)
	r, err := s.C.Get(ctx, key)
	if err != nil {
		return User{}, fmt.Errorf("bootstrap token: %w", err)
	}
	if len(r.Kvs) == 0 {
		return User{}, ErrBadCredentials
	}
	var rec bootstrapRecord
	if err := json.Unmarshal(r.Kvs[0].Value, &rec); err != nil {
		return User{}, fmt.Errorf("bootstrap token record: %w", err)
	}
	u, rev, err := fetch[User](ctx, s, KindUser, rec.User)
	if err != nil {
		return User{}, err
	}
	if err := checkPassword(u.Name, password); err != nil {
		return User{}, err
	}
	hash, err := hashPassword(ctx, password)
	if err != nil {
		return User{}, err
	}
	u.PasswordHash = hash
	b, err := json.Marshal(u)
	if err != nil {
		return User{}, err
	}
	ukey := Key(KindUser, u.Name)
	tr, err := s.C.Txn(ctx).If(
		clientv3.Compare(clientv3.ModRevision(key), "=", r.Kvs[0].ModRevision),
		clientv3.Compare(clientv3.ModRevision(ukey), "=", rev),
	).Then(clientv3.OpDelete(key), clientv3.OpPut(ukey, string(b)), clientv3.OpPut(PasswordHashKey(u.Name), hash)).Commit()
	if err != nil {
		return User{}, fmt.Errorf("bootstrap token: %w", err)
	}
	if !tr.Succeeded {
		// The token was used (or expired) meanwhile, or the user changed: either way
		// this request did not set the password.
		return User{}, ErrBadCredentials
	}
	return u, nil
}

// BootstrapRedeemed reports whether the deployer is done with token: the
// system's first admin exists (a gateway stores the token just before it
// creates that user) and the token is gone (redeemed, or its lease ran out).
// The join service closes its bootstrap window then: the token read later
// from a VM's settings gets no certificate either.
func BootstrapRedeemed(ctx context.Context, cli *clientv3.Client, token string) (bool, error) {
	r, err := cli.Txn(ctx).Then(clientv3.OpGet(Key(KindUser, "admin"), clientv3.WithCountOnly()),
		clientv3.OpGet(bootstrapKey(token), clientv3.WithCountOnly())).Commit()
	if err != nil {
		return false, err
	}
	admin, pending := r.Responses[0].GetResponseRange().Count, r.Responses[1].GetResponseRange().Count
	return admin > 0 && pending == 0, nil
}
