package update

// Delivery through etcd (keys in model/keys.go, under model.UpgradePrefix):
// the gateway stores each uploaded bundle in chunks of at most ChunkSize
// (etcd's request limit is 1.5 MiB) and then its BundleInfo, so a reader
// that finds the info finds every chunk; at most KeepBundles versions are
// kept (the oldest upload goes). An order names the version one SVM must
// run; that SVM's updater carries it out and writes its State.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cairn-storage/cairn/appliance/internal/model"
)

const (
	ChunkSize   = 1 << 20
	KeepBundles = 2
)

// ErrNotFound: no such bundle, order or state.
var ErrNotFound = errors.New("not found")

// ErrNoRoom: etcd has no room for a bundle now (Store.PutBundle).
var ErrNoRoom = errors.New("no room in etcd for the bundle")

// etcdDefaultQuota is the backend quota of an etcd member configured with
// none (it reports 0): etcd's storage.DefaultQuotaBytes, which a test
// compares with this.
const etcdDefaultQuota = 2 << 30

// BundleInfo is a stored bundle (UpgradeBundlePrefix+version).
type BundleInfo struct {
	Version  string    `json:"version"`
	SHA256   string    `json:"sha256"`
	Size     int64     `json:"size"`
	Chunks   int       `json:"chunks"`
	Uploaded time.Time `json:"uploaded"`
}

// Order is the version an SVM is to run (UpgradeOrderPrefix+svm).
type Order struct {
	Version string    `json:"version"`
	Ordered time.Time `json:"ordered"`
}

// States of an SVM's updater.
const (
	StateIdle        = "idle"
	StateDownloading = "downloading"
	StateInstalling  = "installing"
	StateDone        = "done"
	StateFailed      = "failed"
	StateRolledBack  = "rolled-back"
)

// State is an SVM's updater's report (UpgradeStatePrefix+svm). Order is
// the revision of the order it last carried out (0: none), so that an
// order is carried out once, also across the updater's own restart.
type State struct {
	Name    string    `json:"name"`
	Running string    `json:"running"` // the version the updater runs
	Ordered string    `json:"ordered"` // the version of the last order it took
	State   string    `json:"state"`
	Message string    `json:"message"`
	Updated time.Time `json:"updated"`
	Order   int64     `json:"order_revision"`
}

// Store reads and writes the upgrade keys.
type Store struct{ Etcd *clientv3.Client }

func chunkKey(version string, n int) string {
	return fmt.Sprintf("%s%s/%06d", model.UpgradeChunkPrefix, version, n)
}

// PutBundle stores a verified bundle (raw is its bytes) and drops the
// oldest stored versions beyond KeepBundles. It first checks that etcd has
// room for it (roomFor) and refuses with ErrNoRoom, changing nothing, when
// it has not.
func (s Store) PutBundle(ctx context.Context, b *Bundle, raw []byte) (BundleInfo, error) {
	v := b.Manifest.Version
	info := BundleInfo{Version: v, SHA256: b.SHA256, Size: int64(len(raw)), Uploaded: time.Now().UTC()}
	if err := s.roomFor(ctx, int64(len(raw))); err != nil {
		return info, fmt.Errorf("store bundle %s: %w", v, err)
	}
	// A new upload of a version replaces the old chunks (its count may differ).
	if _, err := s.Etcd.Delete(ctx, model.UpgradeBundlePrefix+v); err != nil {
		return info, fmt.Errorf("store bundle %s: %w", v, err)
	}
	if _, err := s.Etcd.Delete(ctx, model.UpgradeChunkPrefix+v+"/", clientv3.WithPrefix()); err != nil {
		return info, fmt.Errorf("store bundle %s: %w", v, err)
	}
	for off := 0; off < len(raw); off += ChunkSize {
		end := min(off+ChunkSize, len(raw))
		if _, err := s.Etcd.Put(ctx, chunkKey(v, info.Chunks), string(raw[off:end])); err != nil {
			// No bundle key names the chunks written so far: drop them.
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			s.Etcd.Delete(dctx, model.UpgradeChunkPrefix+v+"/", clientv3.WithPrefix())
			cancel()
			return info, fmt.Errorf("store bundle %s chunk %d: %w", v, info.Chunks, err)
		}
		info.Chunks++
	}
	j, _ := json.Marshal(info)
	if _, err := s.Etcd.Put(ctx, model.UpgradeBundlePrefix+v, string(j)); err != nil {
		return info, fmt.Errorf("store bundle %s: %w", v, err)
	}
	all, err := s.Bundles(ctx)
	if err != nil {
		return info, err
	}
	sort.Slice(all, func(i, j int) bool { return all[i].Uploaded.After(all[j].Uploaded) })
	for _, old := range all[min(KeepBundles, len(all)):] {
		if old.Version == v {
			continue
		}
		s.Etcd.Delete(ctx, model.UpgradeBundlePrefix+old.Version)
		s.Etcd.Delete(ctx, model.UpgradeChunkPrefix+old.Version+"/", clientv3.WithPrefix())
	}
	return info, nil
}

// roomFor checks that a bundle of n bytes fits in every etcd member that
// answers: what the member's database holds in use, plus the bundle and
// a sixteenth for etcd's per-key overhead and bbolt's page rounding, must
// stay within three quarters of its quota. The last quarter is the
// cluster's own: a member whose database reaches its quota raises etcd's
// NOSPACE alarm and takes no write at all (volumes, maps, heartbeats)
// until an operator frees space and disarms it, so no upload may take it
// there. Space does not come back when a bundle is replaced or dropped:
// etcd keeps the old values until its compaction (the MDM's periodic one,
// an hour behind), and so does this count.
func (s Store) roomFor(ctx context.Context, n int64) error {
	need := n + n/16
	answered := 0
	var lastErr error
	for _, ep := range s.Etcd.Endpoints() {
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		st, err := s.Etcd.Status(sctx, ep)
		cancel()
		if err != nil {
			lastErr = err
			continue
		}
		answered++
		quota := st.DbSizeQuota
		if quota == 0 {
			quota = etcdDefaultQuota
		} else if quota < 0 {
			continue // no quota configured: nothing to run out of
		}
		limit := quota / 4 * 3
		if st.DbSizeInUse+need > limit {
			return fmt.Errorf("%w: the etcd database of the MDM at %s holds %d MiB in use; the bundle needs %d MiB more, and bundles may bring it to %d MiB (three quarters of its %d MiB quota; the rest stays for the cluster's own records). Replaced and dropped bundles keep their space until etcd's hourly compaction: upload again in an hour",
				ErrNoRoom, ep, st.DbSizeInUse>>20, (need+1<<20-1)>>20, limit>>20, quota>>20)
		}
	}
	if answered == 0 {
		return fmt.Errorf("read the size of etcd's database (no MDM answered): %v", lastErr)
	}
	return nil
}

// Bundles lists the stored bundles, by version.
func (s Store) Bundles(ctx context.Context) ([]BundleInfo, error) {
	r, err := s.Etcd.Get(ctx, model.UpgradeBundlePrefix, clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("read bundles: %w", err)
	}
	out := []BundleInfo{}
	for _, kv := range r.Kvs {
		var i BundleInfo
		if json.Unmarshal(kv.Value, &i) == nil && i.Version != "" {
			out = append(out, i)
		}
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Version < out[b].Version })
	return out, nil
}

// BundleInfo returns a stored bundle's info, or ErrNotFound.
func (s Store) BundleInfo(ctx context.Context, version string) (BundleInfo, error) {
	var i BundleInfo
	r, err := s.Etcd.Get(ctx, model.UpgradeBundlePrefix+version)
	if err != nil {
		return i, fmt.Errorf("read bundle %s: %w", version, err)
	}
	if len(r.Kvs) == 0 {
		return i, fmt.Errorf("bundle %s: %w (upload it first: cairnctl upgrade upload FILE)", version, ErrNotFound)
	}
	return i, json.Unmarshal(r.Kvs[0].Value, &i)
}

// Bundle reads a stored bundle back and verifies it (checksum of the
// whole, then Parse).
func (s Store) Bundle(ctx context.Context, version string) (*Bundle, error) {
	info, err := s.BundleInfo(ctx, version)
	if err != nil {
		return nil, err
	}
	if info.Size > MaxBundleSize || info.Chunks > MaxBundleSize/ChunkSize+1 {
		return nil, invalid("stored bundle %s claims %d bytes in %d chunks", version, info.Size, info.Chunks)
	}
	var buf bytes.Buffer
	for n := 0; n < info.Chunks; n++ {
		r, err := s.Etcd.Get(ctx, chunkKey(version, n))
		if err != nil {
			return nil, fmt.Errorf("read bundle %s chunk %d: %w", version, n, err)
		}
		if len(r.Kvs) == 0 {
			return nil, fmt.Errorf("bundle %s: chunk %d is missing (replaced by a newer upload?): order it again", version, n)
		}
		buf.Write(r.Kvs[0].Value)
	}
	sum := sha256.Sum256(buf.Bytes())
	if got := hex.EncodeToString(sum[:]); got != info.SHA256 || int64(buf.Len()) != info.Size {
		return nil, fmt.Errorf("bundle %s read back from etcd: %d bytes with SHA-256 %s, stored as %d bytes with %s: upload it again", version, buf.Len(), got, info.Size, info.SHA256)
	}
	return Parse(buf.Bytes())
}

// PutOrder orders svm to run version.
func (s Store) PutOrder(ctx context.Context, svm, version string) (Order, error) {
	o := Order{Version: version, Ordered: time.Now().UTC()}
	j, _ := json.Marshal(o)
	_, err := s.Etcd.Put(ctx, model.UpgradeOrderPrefix+svm, string(j))
	return o, err
}

// Order returns svm's order and its revision (ErrNotFound without one).
func (s Store) Order(ctx context.Context, svm string) (Order, int64, error) {
	var o Order
	r, err := s.Etcd.Get(ctx, model.UpgradeOrderPrefix+svm)
	if err != nil {
		return o, 0, err
	}
	if len(r.Kvs) == 0 {
		return o, 0, ErrNotFound
	}
	if err := json.Unmarshal(r.Kvs[0].Value, &o); err != nil {
		return o, 0, fmt.Errorf("order of %s: %w", svm, err)
	}
	return o, r.Kvs[0].ModRevision, nil
}

// PutState writes an SVM's state.
func (s Store) PutState(ctx context.Context, st State) error {
	st.Updated = time.Now().UTC()
	j, _ := json.Marshal(st)
	_, err := s.Etcd.Put(ctx, model.UpgradeStatePrefix+st.Name, string(j))
	return err
}

// State returns svm's state (ErrNotFound without one).
func (s Store) State(ctx context.Context, svm string) (State, error) {
	var st State
	r, err := s.Etcd.Get(ctx, model.UpgradeStatePrefix+svm)
	if err != nil {
		return st, err
	}
	if len(r.Kvs) == 0 {
		return st, ErrNotFound
	}
	return st, json.Unmarshal(r.Kvs[0].Value, &st)
}

// States lists every SVM that has an updater state or an order, by name,
// with Ordered the version of its current order; an SVM ordered before its
// updater reported is listed as idle, running "".
func (s Store) States(ctx context.Context) ([]State, error) {
	// "order/" sorts before "state/", and nothing between them.
	r, err := s.Etcd.Get(ctx, model.UpgradeOrderPrefix, clientv3.WithRange(clientv3.GetPrefixRangeEnd(model.UpgradeStatePrefix)))
	if err != nil {
		return nil, fmt.Errorf("read upgrade states: %w", err)
	}
	byName := map[string]*State{}
	orders := map[string]string{}
	for _, kv := range r.Kvs {
		k := string(kv.Key)
		if name, ok := strings.CutPrefix(k, model.UpgradeOrderPrefix); ok {
			var o Order
			if json.Unmarshal(kv.Value, &o) == nil {
				orders[name] = o.Version
			}
		} else if name, ok := strings.CutPrefix(k, model.UpgradeStatePrefix); ok {
			var st State
			if json.Unmarshal(kv.Value, &st) == nil {
				st.Name = name
				byName[name] = &st
			}
		}
	}
	for name, v := range orders {
		if st := byName[name]; st != nil {
			st.Ordered = v
		} else {
			byName[name] = &State{Name: name, Ordered: v, State: StateIdle}
		}
	}
	out := make([]State, 0, len(byName))
	for _, st := range byName {
		out = append(out, *st)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Name < out[b].Name })
	return out, nil
}
