package etcdtest

import (
	"context"
	"testing"
)

func TestStartPutGet(t *testing.T) {
	cli := Start(t)
	ctx := context.Background()
	if _, err := cli.Put(ctx, "k", "v"); err != nil {
		t.Fatal(err)
	}
	r, err := cli.Get(ctx, "k")
	if err != nil || len(r.Kvs) != 1 || string(r.Kvs[0].Value) != "v" {
		t.Fatalf("get: %v %v", r, err)
	}
}
