package update

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.etcd.io/etcd/server/v3/storage"

	"github.com/cairn-storage/cairn/appliance/internal/etcdtest"
)

func TestDefaultQuotaIsEtcds(t *testing.T) {
	if etcdDefaultQuota != storage.DefaultQuotaBytes {
		t.Fatalf("etcdDefaultQuota %d, etcd's default quota %d", etcdDefaultQuota, storage.DefaultQuotaBytes)
	}
}

// randomBundle is a bundle of n random (incompressible) bytes as PutBundle
// takes it: only its version and checksum are read.
func randomBundle(t *testing.T, version string, n int) (*Bundle, []byte) {
	t.Helper()
	raw := make([]byte, n)
	if _, err := rand.Read(raw); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(raw)
	return &Bundle{Manifest: Manifest{Format: 1, Version: version}, SHA256: hex.EncodeToString(sum[:])}, raw
}

// Bundles uploaded one after another into an etcd whose quota they would
// pass twice over, with no compaction between them (as within the hour
// after a replaced or dropped upload): PutBundle refuses with ErrNoRoom
// before the member's database reaches its quota, changes nothing, and
// etcd raises no NOSPACE alarm and keeps taking writes. Once etcd has
// compacted its history, the same upload goes in.
func TestPutBundleLeavesEtcdRoom(t *testing.T) {
	const quota, size = 96 << 20, 4 << 20
	m := etcdtest.StartMember(t, func(c *embed.Config) { c.QuotaBackendBytes = quota })
	cli := m.Client
	st := Store{Etcd: cli}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	refused, uploads := -1, 2*quota/size
	var b *Bundle
	var raw []byte
	for i := 0; i < uploads; i++ {
		b, raw = randomBundle(t, fmt.Sprintf("1.0.%d", i), size)
		before, err := st.Bundles(ctx)
		if err != nil {
			t.Fatal(err)
		}
		_, err = st.PutBundle(ctx, b, raw)
		if errors.Is(err, ErrNoRoom) {
			refused = i
			if !strings.Contains(err.Error(), "upload again in an hour") || !strings.Contains(err.Error(), "MiB in use") {
				t.Errorf("refusal does not say why and what to do: %v", err)
			}
			after, err := st.Bundles(ctx)
			if err != nil || !reflect.DeepEqual(before, after) {
				t.Fatalf("the refused upload changed the stored bundles: %v -> %v (%v)", before, after, err)
			}
			break
		}
		if err != nil {
			t.Fatalf("upload %d of %d MiB: %v (etcd's own refusal: the check let it get this far)", i, size>>20, err)
		}
	}
	if refused < 0 {
		t.Fatalf("%d uploads of %d MiB into a %d MiB quota, none refused", uploads, size>>20, quota>>20)
	}
	if refused*size < quota/2 {
		t.Errorf("refused after %d MiB of uploads into a %d MiB quota: too early", refused*size>>20, quota>>20)
	}
	s, err := cli.Status(ctx, cli.Endpoints()[0])
	if err != nil {
		t.Fatal(err)
	}
	if s.DbSize >= quota {
		t.Errorf("etcd's database is %d MiB of a %d MiB quota", s.DbSize>>20, quota>>20)
	}
	if a, err := cli.AlarmList(ctx); err != nil || len(a.Alarms) > 0 {
		t.Fatalf("etcd alarms: %v %v", a, err)
	}
	if _, err := cli.Put(ctx, "/cairn/test/after", "x"); err != nil {
		t.Fatalf("etcd refuses a write after the refused upload: %v", err)
	}
	t.Logf("refused upload %d (after %d MiB); etcd database %d MiB, %d MiB in use, quota %d MiB",
		refused, refused*size>>20, s.DbSize>>20, s.DbSizeInUse>>20, quota>>20)

	// Compaction frees the history of the dropped bundles.
	r, err := cli.Get(ctx, "/cairn/test/after")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Compact(ctx, r.Header.Revision, clientv3.WithCompactPhysical()); err != nil {
		t.Fatal(err)
	}
	for {
		_, err = st.PutBundle(ctx, b, raw)
		if !errors.Is(err, ErrNoRoom) || ctx.Err() != nil {
			break
		}
		time.Sleep(100 * time.Millisecond) // in-use is counted at the backend's next commit
	}
	if err != nil {
		t.Fatalf("upload after compaction: %v", err)
	}
	if info, err := st.BundleInfo(ctx, b.Manifest.Version); err != nil || info.SHA256 != b.SHA256 || info.Size != size {
		t.Fatalf("stored after compaction: %+v %v", info, err)
	}
}
