package vcsimkit

import (
	"context"
	"testing"
	"time"

	"github.com/vmware/govmomi"
)

// StartTest starts a kit for a test (Dir defaults to t.TempDir(), Template
// to "cairn-svm") and a logged-in client; both are closed by t.Cleanup.
func StartTest(t testing.TB, opts Options) (*Kit, *govmomi.Client) {
	t.Helper()
	if opts.Dir == "" {
		opts.Dir = t.TempDir()
	}
	if opts.Template == "" {
		opts.Template = "cairn-svm"
	}
	k, err := Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := k.Client(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Logout(context.Background()) })
	return k, c
}
