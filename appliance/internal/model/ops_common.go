package model

// Validated mutations of the system model (the ops_*.go files). Every
// operation checks its input first and then writes in one etcd transaction
// whose comparisons re-check what the decision depended on, so a refused or
// raced request changes nothing.
//
// Referential integrity without locks: a child (a volume in a pool, a device
// on an SDS, ...) is created only under the comparison "parent exists"; a
// parent is deleted only after listing its children at revision R and under
// the comparison "no key under the child kind's prefix changed after R". One
// of two racing transactions therefore fails with ErrConflict.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// More sentinel errors (see store.go for ErrNotFound, ErrExists, ErrConflict).
var (
	// ErrInvalid: the request itself is wrong; the message says how to fix it.
	ErrInvalid = errors.New("invalid request")
	// ErrInUse: the object is still referenced; remove the references first.
	ErrInUse = errors.New("still in use")
	// ErrUnavailable: a component needed for the operation (an SDS, etcd) is
	// unreachable; retrying later may succeed.
	ErrUnavailable = errors.New("unavailable")
	// ErrNoChange: an update that names nothing to change.
	ErrNoChange = errors.New("no change requested")
	// ErrPrecondition: the object changed since the version the caller
	// named (If-Match); nothing was written.
	ErrPrecondition = errors.New("version mismatch")
)

// fieldError names the request field an error is about (a body field,
// "ref" for the object named in the path). The outermost one wins, so a
// caller that resolved a reference from a request field overrides the
// "ref" that fetch put there.
type fieldError struct {
	field string
	err   error
}

func (e *fieldError) Error() string { return e.err.Error() }
func (e *fieldError) Unwrap() error { return e.err }

// WithField marks err as being about request field field (nil stays nil).
func WithField(err error, field string) error {
	if err == nil {
		return nil
	}
	return &fieldError{field, err}
}

// FieldOf returns the request field err is about, or "".
func FieldOf(err error) string {
	var fe *fieldError
	if errors.As(err, &fe) {
		return fe.field
	}
	return ""
}

// invalidField is invalidf about one request field.
func invalidField(field, format string, a ...any) error {
	return WithField(invalidf(format, a...), field)
}

// expectKey carries the version a caller expects of one object (If-Match).
type expectKey struct{}

type expectation struct {
	kind, ref string
	rev       int64
}

// ExpectRevision returns a context under which an operation on the object
// (kind, ref) fails with ErrPrecondition unless the object's etcd
// modification revision is rev. The check joins the operation's own
// read-compare-write, so it is exact: the write compares the same revision.
func ExpectRevision(ctx context.Context, kind, ref string, rev int64) context.Context {
	return context.WithValue(ctx, expectKey{}, expectation{kind, ref, rev})
}

// opError carries a user-facing message and the sentinel callers branch on,
// without appending the sentinel's text to the message.
type opError struct {
	kind error
	msg  string
}

func (e *opError) Error() string { return e.msg }
func (e *opError) Unwrap() error { return e.kind }

func invalidf(format string, a ...any) error {
	return &opError{ErrInvalid, fmt.Sprintf(format, a...)}
}
func inUsef(format string, a ...any) error { return &opError{ErrInUse, fmt.Sprintf(format, a...)} }
func existsf(format string, a ...any) error {
	return &opError{ErrExists, fmt.Sprintf(format, a...)}
}
func notFoundf(format string, a ...any) error {
	return &opError{ErrNotFound, fmt.Sprintf(format, a...)}
}

var (
	nameRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)
	idRe   = regexp.MustCompile(`^[0-9a-f]{16}$`)
)

// kindNoun is how a kind is named in messages and in cairnctl.
var kindNoun = map[string]string{
	KindPD: "protection domain", KindFaultSet: "fault set", KindSDS: "SDS",
	KindDevice: "device", KindPool: "pool", KindVolume: "volume",
	KindHost: "host", KindUser: "user",
}

// ValidateName checks an object name: 1-64 characters from [A-Za-z0-9._-],
// starting with a letter or digit, and not 16 hex digits (those are ids, and
// every API path accepts an id or a name).
func ValidateName(kind, name string) error {
	if name == "" {
		return invalidField("name", "%s name is required", kindNoun[kind])
	}
	if !nameRe.MatchString(name) {
		return invalidField("name", "%s name %q: use 1-64 characters from A-Z a-z 0-9 . _ -, starting with a letter or digit", kindNoun[kind], name)
	}
	if idRe.MatchString(name) {
		return invalidField("name", "%s name %q looks like an object id (16 hex digits); choose another name", kindNoun[kind], name)
	}
	return nil
}

// Resolve turns an id or a name of a kind into the id. Users are keyed by
// name, so for them the name is the id.
func (s *Store) Resolve(ctx context.Context, kind, ref string) (string, error) {
	if ref == "" {
		return "", invalidf("%s: give a name or an id", kindNoun[kind])
	}
	if kind == KindUser || idRe.MatchString(ref) { // users have no id: the name is the key
		r, err := s.C.Get(ctx, Key(kind, ref), clientv3.WithCountOnly())
		if err != nil {
			return "", unavailable(err)
		}
		if r.Count > 0 {
			return ref, nil
		}
		if kind == KindUser {
			return "", notFoundf("user %q not found; list them with `cairnctl user ls`", ref)
		}
	}
	id, err := s.Lookup(ctx, kind, ref)
	if errors.Is(err, ErrNotFound) {
		return "", notFoundf("%s %q not found; list them with `cairnctl %s ls`", kindNoun[kind], ref, CLINoun(kind))
	}
	if err != nil {
		return "", unavailable(err)
	}
	return id, nil
}

// fetch resolves ref and reads the object with its mod revision. Its
// errors are about the path's object ("ref"); callers resolving a request
// field wrap them with that field. Under ExpectRevision for this object it
// fails with ErrPrecondition when the object has another revision.
func fetch[T any](ctx context.Context, s *Store, kind, ref string) (T, int64, error) {
	var v T
	id, err := s.Resolve(ctx, kind, ref)
	if err != nil {
		return v, 0, WithField(err, "ref")
	}
	rev, err := s.Get(ctx, Key(kind, id), &v)
	if errors.Is(err, ErrNotFound) {
		return v, 0, WithField(notFoundf("%s %q not found; list them with `cairnctl %s ls`", kindNoun[kind], ref, CLINoun(kind)), "ref")
	}
	if err != nil {
		return v, 0, unavailable(err)
	}
	if e, ok := ctx.Value(expectKey{}).(expectation); ok && e.kind == kind && (e.ref == ref || e.ref == id) && e.rev != rev {
		return v, 0, &opError{ErrPrecondition, fmt.Sprintf("%s %q changed since version %d (now %d); read it again (GET) and retry with the new ETag", kindNoun[kind], ref, e.rev, rev)}
	}
	return v, rev, nil
}

// CLINoun is the cairnctl object name of a kind.
func CLINoun(kind string) string {
	if kind == KindPD {
		return "pd"
	}
	if kind == KindFaultSet {
		return "faultset"
	}
	return kind
}

// unavailable marks an etcd client error (timeout, no leader) as
// ErrUnavailable unless it already is a model error.
func unavailable(err error) error {
	var oe *opError
	if err == nil || errors.As(err, &oe) || errors.Is(err, context.Canceled) {
		return err
	}
	return &opError{ErrUnavailable, fmt.Sprintf("cluster metadata store (etcd) unavailable: %v; check that the MDMs are running and retry", err)}
}

// listAt lists every object of a kind and returns the revision of the read.
func listAt[T any](ctx context.Context, s *Store, kind string) ([]T, int64, error) {
	r, err := s.C.Get(ctx, KindPrefix(kind), clientv3.WithPrefix())
	if err != nil {
		return nil, 0, unavailable(err)
	}
	out := make([]T, 0, len(r.Kvs))
	for _, kv := range r.Kvs {
		var v T
		if err := json.Unmarshal(kv.Value, &v); err != nil {
			return nil, 0, fmt.Errorf("decode %s: %w", kv.Key, err)
		}
		out = append(out, v)
	}
	return out, r.Header.Revision, nil
}

// exists compares true while key exists.
func exists(key string) clientv3.Cmp {
	return clientv3.Compare(clientv3.CreateRevision(key), ">", 0)
}

// unchangedSince compares true while no key of a kind was created or changed
// after rev (a deleted child only makes a parent deletion safer).
func unchangedSince(kind string, rev int64) clientv3.Cmp {
	return clientv3.Compare(clientv3.ModRevision(KindPrefix(kind)), "<", rev+1).WithPrefix()
}

// txn commits ops under cmps; a failed comparison is ErrConflict.
func (s *Store) txn(ctx context.Context, what string, cmps []clientv3.Cmp, ops ...clientv3.Op) error {
	r, err := s.C.Txn(ctx).If(cmps...).Then(ops...).Commit()
	if err != nil {
		return unavailable(err)
	}
	if !r.Succeeded {
		return &opError{ErrConflict, what + ": changed concurrently by another request; retry"}
	}
	return nil
}

// create wraps Store.Create, turning its ErrExists into a message.
func (s *Store) create(ctx context.Context, kind, id, name string, v any, cmps []clientv3.Cmp, extra ...clientv3.Op) error {
	err := s.Create(ctx, kind, id, name, v, cmps, extra...)
	switch {
	case errors.Is(err, ErrExists):
		return existsf("%s %q already exists; choose another name", kindNoun[kind], name)
	case errors.Is(err, ErrConflict):
		return &opError{ErrConflict, fmt.Sprintf("create %s %q: a referenced object changed or was removed concurrently; retry", kindNoun[kind], name)}
	}
	return unavailable(err)
}

// deleteObj deletes an object and its name index under cmps.
func (s *Store) deleteObj(ctx context.Context, kind, id, name string, rev int64, cmps []clientv3.Cmp, extra ...clientv3.Op) error {
	cmps = append([]clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(Key(kind, id)), "=", rev)}, cmps...)
	ops := []clientv3.Op{clientv3.OpDelete(Key(kind, id))}
	if name != "" {
		ops = append(ops, clientv3.OpDelete(NameKey(kind, name)))
	}
	return s.txn(ctx, fmt.Sprintf("delete %s %q", kindNoun[kind], name), cmps, append(ops, extra...)...)
}

// nameList formats up to 5 names for a message.
func nameList(names []string) string {
	sort.Strings(names)
	if len(names) > 5 {
		return strings.Join(names[:5], ", ") + fmt.Sprintf(" and %d more", len(names)-5)
	}
	return strings.Join(names, ", ")
}

// plural returns "1 volume" / "2 volumes".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// FormatSize renders bytes as the largest binary unit that divides them.
func FormatSize(b int64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	i := 0
	for b != 0 && b%1024 == 0 && i < len(units)-1 {
		b /= 1024
		i++
	}
	return fmt.Sprintf("%d %s", b, units[i])
}
