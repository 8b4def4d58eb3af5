package model

// Secrets outside the model (keys.go, SecretPrefix): the hosts' CHAP
// secrets and the users' password hashes, and the move of a model that
// still holds them inline.

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// chapSecretOps writes a host's CHAP secret (or deletes it when CHAP is
// off), to join the host's transaction.
func chapSecretOps(h Host) []clientv3.Op {
	if h.CHAPSecret == "" {
		return []clientv3.Op{clientv3.OpDelete(CHAPSecretKey(h.ID))}
	}
	return []clientv3.Op{clientv3.OpPut(CHAPSecretKey(h.ID), h.CHAPSecret)}
}

// loadCHAPSecret fills h.CHAPSecret from its key when h has CHAP.
func (s *Store) loadCHAPSecret(ctx context.Context, h *Host) error {
	if !h.CHAP {
		return nil
	}
	sec, err := s.HostCHAPSecret(ctx, h.ID)
	if err != nil {
		return err
	}
	h.CHAPSecret = sec
	return nil
}

// HostCHAPSecret returns the CHAP secret of a host ("" when it has none).
// Only mdm, gateway and target may read it (mdm/rbac.go).
func (s *Store) HostCHAPSecret(ctx context.Context, hostID string) (string, error) {
	r, err := s.C.Get(ctx, CHAPSecretKey(hostID))
	if err != nil {
		return "", fmt.Errorf("read the CHAP secret of host %s: %w", hostID, err)
	}
	if len(r.Kvs) == 0 {
		return "", nil
	}
	return string(r.Kvs[0].Value), nil
}

// CHAPSecrets returns every host's CHAP secret by host id (the iSCSI
// target configures LIO with them).
func (s *Store) CHAPSecrets(ctx context.Context) (map[string]string, error) {
	r, err := s.C.Get(ctx, CHAPSecretPrefix, clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("read the hosts' CHAP secrets: %w", err)
	}
	out := make(map[string]string, len(r.Kvs))
	for _, kv := range r.Kvs {
		out[strings.TrimPrefix(string(kv.Key), CHAPSecretPrefix)] = string(kv.Value)
	}
	return out, nil
}

// userWithHash reads a user and its password hash at one revision; it
// returns the user key's mod revision. A user without a hash (none set)
// has PasswordHash "".
func (s *Store) userWithHash(ctx context.Context, name string) (User, int64, error) {
	key := Key(KindUser, name)
	r, err := s.C.Txn(ctx).Then(clientv3.OpGet(key), clientv3.OpGet(PasswordHashKey(name))).Commit()
	if err != nil {
		return User{}, 0, err
	}
	ur, hr := r.Responses[0].GetResponseRange(), r.Responses[1].GetResponseRange()
	if len(ur.Kvs) == 0 {
		return User{}, 0, fmt.Errorf("%s: %w", key, ErrNotFound)
	}
	var u User
	if err := json.Unmarshal(ur.Kvs[0].Value, &u); err != nil {
		return User{}, 0, fmt.Errorf("decode %s: %w", key, err)
	}
	if len(hr.Kvs) > 0 {
		u.PasswordHash = string(hr.Kvs[0].Value)
	}
	return u, ur.Kvs[0].ModRevision, nil
}

// moveBatch is how many objects one migration transaction moves: each
// takes two operations, and etcd allows 128 per transaction by default.
const moveBatch = 60

// MoveSecrets moves secrets stored inline in model objects by a Cairn
// from before SecretPrefix (a host's "chap_secret", a user's
// "password_hash") to their keys under SecretPrefix, leaving the object
// its flag (Host.CHAP) and no secret. The MDM leader runs it at the start
// of each term. Every object moves with its secret in one transaction,
// under the object's mod revision (up to moveBatch objects per
// transaction, so a model of any size moves); an object that changed
// meanwhile is left to the next run. It returns how many objects moved;
// a model with nothing inline writes nothing.
func (s *Store) MoveSecrets(ctx context.Context) (int, error) {
	r, err := s.C.Txn(ctx).Then(
		clientv3.OpGet(KindPrefix(KindHost), clientv3.WithPrefix()),
		clientv3.OpGet(KindPrefix(KindUser), clientv3.WithPrefix()),
	).Commit()
	if err != nil {
		return 0, fmt.Errorf("read hosts and users: %w", err)
	}
	type move struct {
		cmp clientv3.Cmp
		ops []clientv3.Op
	}
	var moves []move
	for i, field := range []string{"chap_secret", "password_hash"} {
		for _, kv := range r.Responses[i].GetResponseRange().Kvs {
			var obj map[string]json.RawMessage
			if err := json.Unmarshal(kv.Value, &obj); err != nil {
				return 0, fmt.Errorf("decode %s: %w", kv.Key, err)
			}
			raw, ok := obj[field]
			if !ok {
				continue
			}
			var secret string
			if err := json.Unmarshal(raw, &secret); err != nil {
				return 0, fmt.Errorf("decode %s of %s: %w", field, kv.Key, err)
			}
			delete(obj, field)
			key := string(kv.Key)
			var ops []clientv3.Op
			if field == "chap_secret" {
				id := strings.TrimPrefix(key, KindPrefix(KindHost))
				if secret != "" {
					obj["chap"] = json.RawMessage("true")
					ops = append(ops, clientv3.OpPut(CHAPSecretKey(id), secret))
				}
			} else if secret != "" {
				ops = append(ops, clientv3.OpPut(PasswordHashKey(strings.TrimPrefix(key, KindPrefix(KindUser))), secret))
			}
			b, err := json.Marshal(obj)
			if err != nil {
				return 0, err
			}
			moves = append(moves, move{clientv3.Compare(clientv3.ModRevision(key), "=", kv.ModRevision),
				append([]clientv3.Op{clientv3.OpPut(key, string(b))}, ops...)})
		}
	}
	moved := 0
	for len(moves) > 0 {
		n := min(len(moves), moveBatch)
		var cmps []clientv3.Cmp
		var ops []clientv3.Op
		for _, m := range moves[:n] {
			cmps = append(cmps, m.cmp)
			ops = append(ops, m.ops...)
		}
		tr, err := s.C.Txn(ctx).If(cmps...).Then(ops...).Commit()
		if err != nil {
			return moved, fmt.Errorf("move secrets out of the model: %w", err)
		}
		if !tr.Succeeded {
			return moved, fmt.Errorf("move secrets out of the model: %w", ErrConflict)
		}
		moved += n
		moves = moves[n:]
	}
	return moved, nil
}
