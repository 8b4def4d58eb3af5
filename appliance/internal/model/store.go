package model

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Sentinel errors for callers to branch on.
var (
	ErrNotFound = errors.New("not found")
	ErrExists   = errors.New("already exists")
	ErrConflict = errors.New("changed concurrently; retry")
)

// Store reads and writes model objects in etcd.
type Store struct {
	C *clientv3.Client
}

// NewStore wraps an etcd client.
func NewStore(c *clientv3.Client) *Store { return &Store{C: c} }

// Get decodes the object at key into v and returns its mod revision.
func (s *Store) Get(ctx context.Context, key string, v any) (int64, error) {
	r, err := s.C.Get(ctx, key)
	if err != nil {
		return 0, err
	}
	if len(r.Kvs) == 0 {
		return 0, fmt.Errorf("%s: %w", key, ErrNotFound)
	}
	if err := json.Unmarshal(r.Kvs[0].Value, v); err != nil {
		return 0, fmt.Errorf("decode %s: %w", key, err)
	}
	return r.Kvs[0].ModRevision, nil
}

// List returns every object of a kind, decoded as T, in key order.
func List[T any](ctx context.Context, s *Store, kind string) ([]T, error) {
	return ListPrefix[T](ctx, s, KindPrefix(kind))
}

// ListPrefix returns every object under prefix decoded as T.
func ListPrefix[T any](ctx context.Context, s *Store, prefix string) ([]T, error) {
	r, err := s.C.Get(ctx, prefix, clientv3.WithPrefix())
	if err != nil {
		return nil, err
	}
	out := make([]T, 0, len(r.Kvs))
	for _, kv := range r.Kvs {
		var v T
		if err := json.Unmarshal(kv.Value, &v); err != nil {
			return nil, fmt.Errorf("decode %s: %w", kv.Key, err)
		}
		out = append(out, v)
	}
	return out, nil
}

// Lookup resolves a name of a kind to its id.
func (s *Store) Lookup(ctx context.Context, kind, name string) (string, error) {
	r, err := s.C.Get(ctx, NameKey(kind, name))
	if err != nil {
		return "", err
	}
	if len(r.Kvs) == 0 {
		return "", fmt.Errorf("%s %q: %w", kind, name, ErrNotFound)
	}
	return string(r.Kvs[0].Value), nil
}

// ElectionCandidates returns the MDM members campaigning for the control
// loop, oldest candidate first: the first leads, the others wait in that
// order (concurrency.Election stores each candidate's name as the value of
// its key under ElectionPrefix). A member that is down, or a tie-breaker,
// has no key.
func (s *Store) ElectionCandidates(ctx context.Context) ([]string, error) {
	r, err := s.C.Get(ctx, ElectionPrefix, clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(r.Kvs))
	for _, kv := range r.Kvs {
		out = append(out, string(kv.Value))
	}
	return out, nil
}

// Create writes a new object with a unique name in one transaction; it fails
// with ErrExists if the name or id is taken. extra operations (e.g. updates of
// related objects guarded by cmps) join the same transaction.
func (s *Store) Create(ctx context.Context, kind, id, name string, v any, cmps []clientv3.Cmp, extra ...clientv3.Op) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	conds := append([]clientv3.Cmp{
		clientv3.Compare(clientv3.CreateRevision(Key(kind, id)), "=", 0),
	}, cmps...)
	ops := append([]clientv3.Op{clientv3.OpPut(Key(kind, id), string(b))}, extra...)
	if name != "" {
		conds = append(conds, clientv3.Compare(clientv3.CreateRevision(NameKey(kind, name)), "=", 0))
		ops = append(ops, clientv3.OpPut(NameKey(kind, name), id))
	}
	r, err := s.C.Txn(ctx).If(conds...).Then(ops...).Commit()
	if err != nil {
		return err
	}
	if !r.Succeeded {
		if name != "" {
			if _, err := s.Lookup(ctx, kind, name); err == nil {
				return fmt.Errorf("%s %q: %w", kind, name, ErrExists)
			}
		}
		return fmt.Errorf("%s %s: %w", kind, id, ErrConflict)
	}
	return nil
}

// Update replaces the object at key if it has not changed since rev.
func (s *Store) Update(ctx context.Context, key string, rev int64, v any, extra ...clientv3.Op) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	r, err := s.C.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", rev)).
		Then(append([]clientv3.Op{clientv3.OpPut(key, string(b))}, extra...)...).Commit()
	if err != nil {
		return err
	}
	if !r.Succeeded {
		return fmt.Errorf("%s: %w", key, ErrConflict)
	}
	return nil
}

// Delete removes an object and its name index if it has not changed since rev.
func (s *Store) Delete(ctx context.Context, kind, id, name string, rev int64, extra ...clientv3.Op) error {
	ops := []clientv3.Op{clientv3.OpDelete(Key(kind, id))}
	if name != "" {
		ops = append(ops, clientv3.OpDelete(NameKey(kind, name)))
	}
	r, err := s.C.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(Key(kind, id)), "=", rev)).
		Then(append(ops, extra...)...).Commit()
	if err != nil {
		return err
	}
	if !r.Succeeded {
		return fmt.Errorf("%s %s: %w", kind, id, ErrConflict)
	}
	return nil
}
