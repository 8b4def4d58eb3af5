package join

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cairn-storage/cairn/appliance/internal/model"
)

// Store keeps the records in etcd, under the secrets (readable by the MDM
// and gateway roles only).
type Store struct{ Etcd *clientv3.Client }

// Create stores r (a new id: never overwrites).
func (s Store) Create(ctx context.Context, r Record) error {
	k := model.JoinTokenKey(r.ID)
	resp, err := s.Etcd.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(k), "=", 0)).
		Then(clientv3.OpPut(k, r.marshal())).Commit()
	if err != nil {
		return fmt.Errorf("store the join token: %w", err)
	}
	if !resp.Succeeded {
		return fmt.Errorf("join token id %s exists: try again", r.ID)
	}
	return nil
}

// List is every record not yet spent or revoked, oldest first; expired ones
// are listed (and removed by Prune).
func (s Store) List(ctx context.Context) ([]Record, error) {
	resp, err := s.Etcd.Get(ctx, model.JoinTokenPrefix, clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("read the join tokens: %w", err)
	}
	out := []Record{}
	for _, kv := range resp.Kvs {
		var r Record
		if json.Unmarshal(kv.Value, &r) == nil {
			out = append(out, r)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Created.Before(out[j].Created) })
	return out, nil
}

// Revoke deletes a record; it reports whether there was one.
func (s Store) Revoke(ctx context.Context, id string) (bool, error) {
	resp, err := s.Etcd.Delete(ctx, model.JoinTokenKey(id))
	if err != nil {
		return false, fmt.Errorf("revoke the join token: %w", err)
	}
	return resp.Deleted > 0, nil
}

// Prune deletes the records that expired before now.
func (s Store) Prune(ctx context.Context, now time.Time) error {
	l, err := s.List(ctx)
	if err != nil {
		return err
	}
	for _, r := range l {
		if !now.Before(r.Expires) {
			if _, err := s.Revoke(ctx, r.ID); err != nil {
				return err
			}
		}
	}
	return nil
}

// Spend checks t for role and name and takes the role out of its record in
// the same transaction (the record goes with its last role), so each role of
// a token gives exactly one certificate, to one node, even when several
// present it at once.
func (s Store) Spend(ctx context.Context, t Token, role, name string, now time.Time) (Record, error) {
	k := model.JoinTokenKey(t.ID)
	resp, err := s.Etcd.Get(ctx, k)
	if err != nil {
		return Record{}, fmt.Errorf("read the join token: %w", err)
	}
	if len(resp.Kvs) == 0 {
		return Record{}, errRefused
	}
	var r Record
	if err := json.Unmarshal(resp.Kvs[0].Value, &r); err != nil {
		return Record{}, errRefused
	}
	if err := r.Check(t, role, name, now); err != nil {
		return Record{}, err
	}
	left := r
	left.Name = name
	left.Roles = slices.DeleteFunc(slices.Clone(r.Roles), func(x string) bool { return x == role })
	op := clientv3.OpDelete(k)
	if len(left.Roles) > 0 {
		op = clientv3.OpPut(k, left.marshal())
	}
	done, err := s.Etcd.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(k), "=", resp.Kvs[0].ModRevision)).Then(op).Commit()
	if err != nil {
		return Record{}, fmt.Errorf("spend the join token: %w", err)
	}
	if !done.Succeeded {
		return Record{}, errRefused
	}
	return r, nil
}
