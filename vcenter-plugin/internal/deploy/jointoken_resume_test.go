package deploy_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cairn-storage/cairn/appliance/contract"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/deploy"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/progress"
)

// stopAt cancels the run when the engine logs a message holding substr:
// the plugin stopping right after that point. slog handlers run in the
// engine's own goroutine, so nothing after that point runs.
type stopAt struct {
	substr string
	cancel context.CancelFunc
}

func (s stopAt) Enabled(context.Context, slog.Level) bool { return true }
func (s stopAt) Handle(_ context.Context, r slog.Record) error {
	if strings.Contains(r.Message, s.substr) {
		s.cancel()
	}
	return nil
}
func (s stopAt) WithAttrs([]slog.Attr) slog.Handler { return s }
func (s stopAt) WithGroup(string) slog.Handler      { return s }

// joinTokenOf is the id of the join token the SVM on host carries.
func (g *grown) joinTokenOf(t *testing.T, host string) string {
	t.Helper()
	ctx := context.Background()
	vm, err := g.finder.VirtualMachine(ctx, g.full.SVMName(host))
	if err != nil {
		t.Fatal(err)
	}
	var m mo.VirtualMachine
	if err := vm.Properties(ctx, vm.Reference(), []string{"config.vAppConfig"}, &m); err != nil {
		t.Fatal(err)
	}
	for _, p := range m.Config.VAppConfig.(*types.VmConfigInfo).Property {
		if p.Id == contract.KeyJoinToken {
			if parts := strings.Split(p.Value, "."); len(parts) == 4 && parts[0] == "cj1" {
				return parts[1]
			}
		}
	}
	t.Fatalf("SVM on %s carries no join token", host)
	return ""
}

// An expansion stopped right after a new SVM's configure step (which made
// its one-hour join token) and resumed later: the power-on step asks the
// gateway about the token the SVM carries. One expired, revoked or good
// for less than the margin is replaced in the SVM's vApp property by a
// fresh one, the old one revoked, and the SVM joins with the new one; one
// still good is kept; an SVM powered on before is left as it is.
func TestExpandResumeRenewsStaleJoinToken(t *testing.T) {
	for _, c := range []struct {
		name string
		age  time.Duration // how long before the resume the token was made
		// revoke: an admin revoked it meanwhile; booted: someone powered
		// the SVM on (it joined) and off again before the resume.
		revoke, booted bool
		renew          bool
	}{
		{name: "expired", age: 61 * time.Minute, renew: true},
		{name: "revoked", revoke: true, renew: true},
		{name: "near its expiry", age: 50 * time.Minute, renew: true},
		{name: "still good", age: 10 * time.Minute},
		{name: "powered on before", booted: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := setupGrown(t, 4, 3)
			h := g.full.Hosts[3].Name
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			g.engine.Log = progress.NewLog(10000, slog.New(stopAt{"svm/" + h + "/configure: done", cancel}))
			// The first run, age ago by the gateway's clock: the token's
			// expiry is its creation (then) plus an hour.
			g.array.SetClock(func() time.Time { return time.Now().Add(-c.age) })
			if err := g.engine.Expand(ctx, g.deployed, g.full); !errors.Is(err, context.Canceled) {
				t.Fatalf("first run: %v, want it stopped after the configure step", err)
			}
			g.array.SetClock(time.Now)
			st, err := deploy.LoadState(g.engine.StateDir, g.deployed)
			if err != nil || !st.Steps["svm/"+h+"/configure"].Done || st.Steps["svm/"+h+"/power-on"].Done {
				t.Fatalf("state after the stop: %+v %v", st, err)
			}
			old := g.joinTokenOf(t, h)
			if st.JoinTokenIDs[h] != old {
				t.Fatalf("state records join token %q for %s, the SVM carries %s", st.JoinTokenIDs[h], h, old)
			}
			b, _ := os.ReadFile(deploy.StatePath(g.engine.StateDir, "cairn1"))
			if strings.Contains(string(b), "cj1.") {
				t.Fatal("the state file holds a join token")
			}
			if c.revoke {
				if err := g.array.RevokeJoinToken(context.Background(), old); err != nil {
					t.Fatal(err)
				}
			}
			if c.booted {
				vm, err := g.finder.VirtualMachine(context.Background(), g.full.SVMName(h))
				if err != nil {
					t.Fatal(err)
				}
				for _, f := range []func(context.Context) (*object.Task, error){vm.PowerOn, vm.PowerOff} {
					task, err := f(context.Background())
					if err == nil {
						err = task.Wait(context.Background())
					}
					if err != nil {
						t.Fatal(err)
					}
				}
				if rec := g.array.JoinTokens()[old]; rec.SpentBy == "" {
					t.Fatalf("the SVM powered on by hand did not spend its token: %+v", rec)
				}
			}
			created := count(g.array.Calls(), "CreateJoinToken")
			if err := g.engine.Expand(context.Background(), g.deployed, g.full); err != nil {
				t.Fatalf("resume: %v", err)
			}
			now := g.joinTokenOf(t, h)
			listed, err := g.array.ListJoinTokens(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			_, kept := g.array.JoinTokens()[old]
			switch {
			case c.renew && (now == old || kept || count(g.array.Calls(), "CreateJoinToken") != created+1):
				t.Fatalf("resume with a stale token: the SVM carries %s (was %s), old token kept %v, %d token(s) created",
					now, old, kept, count(g.array.Calls(), "CreateJoinToken")-created)
			case !c.renew && (now != old || count(g.array.Calls(), "CreateJoinToken") != created):
				t.Fatalf("resume with a good token: the SVM carries %s (was %s), %d token(s) created", now, old, count(g.array.Calls(), "CreateJoinToken")-created)
			case len(listed) != 0:
				t.Fatalf("join tokens left unspent: %+v", listed)
			}
			// The SVM spent the token it carries, and joined.
			g.checkJoinTokens(t, []string{h}, []string{"sds", "target"})
			g.checkState(t, g.full)
			if st, _ := deploy.LoadState(g.engine.StateDir, g.full); st.JoinTokenIDs != nil {
				t.Fatalf("the ended change keeps join token ids %v", st.JoinTokenIDs)
			}
			msgs := eventsMsgs(g.events(deploy.ExpandJob("cairn1")))
			if c.booted && count(msgs, "SVM cairn-cairn1-esx-04 was powered on before") != 1 {
				t.Fatalf("no warning that the SVM booted before: %v", msgs)
			}
		})
	}
}
