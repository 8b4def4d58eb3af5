package sds_test

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cairn-storage/cairn/appliance/internal/model"
	"github.com/cairn-storage/cairn/appliance/internal/testcluster"
)

// TestLivenessRegistersAgainAfterExpiry: when its lease is gone (the leader
// declared it dead; here it is revoked), a running SDS notices at its next
// renewal and registers again under a new lease, instead of renewing a dead
// one for ever.
func TestLivenessRegistersAgainAfterExpiry(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{SDSs: 2, DevicesPerSDS: 1, DeviceSize: 64 * MiB, PGCount: 8})
	ctx := context.Background()
	key := model.LiveKey(c.SDSs[0].ID)
	lease := func() clientv3.LeaseID {
		r, err := c.Etcd.Get(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Kvs) == 0 {
			return 0
		}
		return clientv3.LeaseID(r.Kvs[0].Lease)
	}
	old := lease()
	if old == 0 {
		t.Fatalf("%s is not held under a lease", key)
	}
	if _, err := c.Etcd.Revoke(ctx, old); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(15 * time.Second) // renewals are 1 s apart
	for {
		if l := lease(); l != 0 && l != old {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not registered again 15 s after its lease was revoked", key)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
