package model

// The model's schema version: what lets daemons of two Cairn versions share
// one etcd during a rolling upgrade, and stops a daemon too old for the
// model before it misreads it.
//
// SchemaKey holds {"version": N, "written_by": "<cairn version>"}. The rule:
//
//   - A binary reads schemas SchemaVersion and SchemaVersion-1 (N and N-1)
//     and refuses a newer one (CheckSchema, at every daemon's start): a
//     daemon of the old version brought back on a host after the system
//     moved on says so instead of misreading the model.
//   - A binary writes the model so that N-1 readers still understand it while
//     the stored schema is N-1: new fields are additions that old readers
//     ignore (JSON, unknown fields skipped), never changed meanings.
//   - The stored version is raised (a change N-1 readers would misread may
//     start) only once no daemon of the old version runs: after a roll,
//     when GET /system/versions is no longer mixed. Schema 1 is the key
//     layout v1 of keys.go; a system from before this key has none, which
//     reads as 1 (nothing changed in between).
//   - The MDM leader writes the key when it is missing, at the start of its
//     term (EnsureSchema), and does not lead a model newer than it reads.

import (
	"context"
	"encoding/json"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cairn-storage/cairn/appliance/internal/buildinfo"
)

// SchemaVersion is the model schema this binary writes; it reads it and the
// one before.
const SchemaVersion = 1

// SchemaKey holds the stored schema (see above).
const SchemaKey = Prefix + "schema"

// Schema is SchemaKey's value.
type Schema struct {
	Version   int    `json:"version"`
	WrittenBy string `json:"written_by"` // the Cairn version that wrote it
}

// ErrSchemaTooNew: the model is of a schema this binary cannot read.
var ErrSchemaTooNew = fmt.Errorf("model schema too new for this Cairn version")

// ReadSchema returns the stored schema; a model without the key reads as
// schema 1 (the layout from before the key), with found false.
func ReadSchema(ctx context.Context, cli *clientv3.Client) (Schema, bool, error) {
	r, err := cli.Get(ctx, SchemaKey)
	if err != nil {
		return Schema{}, false, fmt.Errorf("read the model schema: %v: %w", err, ErrUnavailable)
	}
	if len(r.Kvs) == 0 {
		return Schema{Version: 1}, false, nil
	}
	var s Schema
	if err := json.Unmarshal(r.Kvs[0].Value, &s); err != nil || s.Version < 1 {
		return Schema{}, true, fmt.Errorf("the model schema at %s is malformed (%q): restore it from a backup of etcd or write {\"version\":%d}", SchemaKey, r.Kvs[0].Value, SchemaVersion)
	}
	return s, true, nil
}

// CheckSchema refuses a model this binary cannot read (newer than
// SchemaVersion), saying what to do.
func CheckSchema(ctx context.Context, cli *clientv3.Client) error {
	s, _, err := ReadSchema(ctx, cli)
	if err != nil {
		return err
	}
	if s.Version > SchemaVersion {
		return fmt.Errorf("%w: the system's model is schema %d (written by Cairn %s) and this Cairn %s reads schemas up to %d: "+
			"upgrade Cairn on this host to the system's version (`cairnctl system versions` lists what the others run)",
			ErrSchemaTooNew, s.Version, s.WrittenBy, buildinfo.Version(), SchemaVersion)
	}
	return nil
}

// EnsureSchema writes SchemaVersion when the model has no schema yet (a new
// system, or one from before the key), and refuses a newer one than this
// binary reads. It never lowers or raises a stored schema.
func EnsureSchema(ctx context.Context, cli *clientv3.Client) (Schema, error) {
	s, found, err := ReadSchema(ctx, cli)
	if err != nil {
		return Schema{}, err
	}
	if found {
		return s, CheckSchema(ctx, cli)
	}
	s = Schema{Version: SchemaVersion, WrittenBy: buildinfo.Version()}
	b, _ := json.Marshal(s)
	r, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(SchemaKey), "=", 0)).
		Then(clientv3.OpPut(SchemaKey, string(b))).Commit()
	if err != nil {
		return Schema{}, fmt.Errorf("write the model schema: %v: %w", err, ErrUnavailable)
	}
	if !r.Succeeded { // another leader wrote it meanwhile: read what it wrote
		return EnsureSchema(ctx, cli)
	}
	return s, nil
}
