package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cairn-storage/cairn/appliance/internal/update"
)

// TestUpgradeCommands: upload a bundle, order an SVM and wait while its
// "updater" (the store calls a real updater makes) carries the order out
// and then fails a second one.
func TestUpgradeCommands(t *testing.T) {
	h := newHarness(t, time.Hour)
	h.login()
	dir := t.TempDir()
	for _, n := range update.Binaries {
		os.WriteFile(filepath.Join(dir, n), []byte("#!/bin/sh\necho 0.3.0\n"), 0o755)
	}
	var buf bytes.Buffer
	if _, err := update.Write(&buf, dir); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "cairn-0.3.0.tgz")
	os.WriteFile(file, buf.Bytes(), 0o644)
	if out := h.ok("upgrade", "upload", file); !strings.Contains(out, "stored bundle 0.3.0") {
		t.Fatalf("upload: %s", out)
	}
	st := update.Store{Etcd: h.etcd}
	ctx := t.Context()
	st.PutState(ctx, update.State{Name: "svm1", Running: "0.2.0", State: update.StateIdle})
	play := func(final, msg string) {
		go func() {
			for ctx.Err() == nil {
				s, _ := st.State(ctx, "svm1")
				if o, rev, err := st.Order(context.Background(), "svm1"); err == nil && rev != s.Order {
					time.Sleep(300 * time.Millisecond)
					st.PutState(ctx, update.State{Name: "svm1", Running: "0.2.0", Ordered: o.Version, State: final, Message: msg, Order: rev})
					return
				}
				time.Sleep(50 * time.Millisecond)
			}
		}()
	}
	play(update.StateDone, "3 units run 0.3.0")
	if out := h.ok("upgrade", "order", "svm1", "--version", "0.3.0", "--wait"); !strings.Contains(out, "svm1 runs 0.3.0: 3 units run 0.3.0") {
		t.Fatalf("order --wait: %s", out)
	}
	play(update.StateRolledBack, "rolled back to 0.2.0: cairn-mdm.service failed")
	h.fails(1, "svm1 rolled-back: rolled back to 0.2.0", "upgrade", "order", "svm1", "--version", "0.3.0", "--wait")
	out := h.ok("upgrade", "ls")
	if !strings.Contains(out, "0.3.0") || !strings.Contains(out, "rolled-back") || !strings.Contains(out, "svm1") {
		t.Fatalf("ls:\n%s", out)
	}
	h.fails(1, "no bundle of version 9.9.9 is stored", "upgrade", "order", "svm1", "--version", "9.9.9")
}
