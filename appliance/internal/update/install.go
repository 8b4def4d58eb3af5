package update

// Installing a version and switching to it.
//
// Layout on an SVM (Root is "/" there; a test gives a temporary directory):
//
//	/usr/local/lib/cairn/versions/<version>/{cairn,cairnctl}   each installed version
//	/usr/local/bin/cairn     -> ../../lib/cairn/versions/<version>/cairn     (symlink)
//	/usr/local/bin/cairnctl  -> ../../lib/cairn/versions/<version>/cairnctl  (symlink)
//
// The image installs plain files into /usr/local/bin; the first switch moves
// them into versions/<their version>/ (what `cairn version` says), so the
// version that ran before the first update can be rolled back to as well.
//
// The switch is one rename(2) per binary of a new symlink over the old name:
// a process that starts reads either the old or the new binary, never a
// half-written one, and a running process keeps the inode it started from.
// cairn is switched before cairnctl; a crash between the two leaves a
// cairnctl of the previous version, which talks to the gateway's API of N
// and N-1 alike.
//
// The restart and health check (Update): the Cairn daemon units this SVM
// runs (Units: every cairn-*.service in the unit directory that is not a
// oneshot and is active now) are restarted, the MDM first and alone (its
// etcd member must be back and settled before the others lean on it), then
// the rest by name, one after another, settled together (restartAll). A
// unit is healthy when it has stayed active for Settle and its main process
// runs the new version (/proc/<MainPID>/exe answers `version` with it,
// which is true of the process itself, whatever the symlinks say). The
// first unit that is not healthy within Settle+StartTimeout stops the
// update: the symlinks are switched back, the units restarted so far are
// restarted again on the previous version (and checked the same way), and
// Update returns an error that says what failed.
//
// Keep is 2: the new version and the one it replaced stay installed (a
// roll back needs only the switch); older directories are removed.

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// MDMUnit is restarted first.
const MDMUnit = "cairn-mdm.service"

// UpdaterUnit is the updater's own unit (see Updater for how it restarts).
const UpdaterUnit = "cairn-updater.service"

// Installer installs bundles under Root and switches this SVM's daemons to
// them.
type Installer struct {
	Root      string // "/" on an SVM
	Systemctl string // the systemctl program ("systemctl")
	// Settle is how long a restarted unit must stay active on the new
	// version; StartTimeout is how long it may take to get there.
	Settle, StartTimeout time.Duration
	// Skip is a unit not to restart (the updater's own: it restarts itself
	// after the others are healthy; see Updater).
	Skip string
	Log  *slog.Logger
	// Progress, when set, is told each step (the updater writes it into its
	// state's message).
	Progress func(msg string)
}

func (in *Installer) path(p string) string { return filepath.Join(in.Root, p) }

// VersionsDir holds one directory per installed version.
func (in *Installer) VersionsDir() string { return in.path("/usr/local/lib/cairn/versions") }

func (in *Installer) binPath(name string) string { return in.path("/usr/local/bin/" + name) }

func (in *Installer) unitDir() string { return in.path("/etc/systemd/system") }

func (in *Installer) progress(format string, a ...any) {
	msg := fmt.Sprintf(format, a...)
	if in.Log != nil {
		in.Log.Info(msg)
	}
	if in.Progress != nil {
		in.Progress(msg)
	}
}

// Current is the version /usr/local/bin/cairn runs: the version directory
// its symlink names, or, for the image's plain file, what it answers.
func (in *Installer) Current() (string, error) {
	target, err := os.Readlink(in.binPath("cairn"))
	if err == nil {
		v := filepath.Base(filepath.Dir(target))
		if !ValidVersion(v) {
			return "", fmt.Errorf("%s points to %s, not into a version directory: repair the link by hand", in.binPath("cairn"), target)
		}
		return v, nil
	}
	return VersionOf(in.binPath("cairn"))
}

// adopt moves the image's plain binaries into versions/<their version>/
// and makes the names symlinks to them (nothing when they are links).
func (in *Installer) adopt() (string, error) {
	if fi, err := os.Lstat(in.binPath("cairn")); err != nil {
		return "", fmt.Errorf("%s: %w (is Cairn installed under %s?)", in.binPath("cairn"), err, in.Root)
	} else if fi.Mode()&fs.ModeSymlink != 0 {
		return in.Current()
	}
	v, err := VersionOf(in.binPath("cairn"))
	if err != nil {
		return "", err
	}
	dir := filepath.Join(in.VersionsDir(), v)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	for _, name := range Binaries {
		if err := os.Rename(in.binPath(name), filepath.Join(dir, name)); err != nil {
			return "", fmt.Errorf("move the running %s into %s: %w", name, dir, err)
		}
		if err := in.link(name, v); err != nil {
			return "", err
		}
	}
	in.progress("moved the image's binaries (version %s) into %s", v, dir)
	return v, nil
}

// link points /usr/local/bin/name at version v (rename of a new symlink).
func (in *Installer) link(name, v string) error {
	bin := in.binPath(name)
	rel, err := filepath.Rel(filepath.Dir(bin), filepath.Join(in.VersionsDir(), v, name))
	if err != nil {
		return err
	}
	tmp := bin + ".switch"
	os.Remove(tmp)
	if err := os.Symlink(rel, tmp); err != nil {
		return fmt.Errorf("switch %s to %s: %w", name, v, err)
	}
	if err := os.Rename(tmp, bin); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("switch %s to %s: %w", name, v, err)
	}
	return nil
}

func (in *Installer) switchTo(v string) error {
	for _, name := range Binaries {
		if err := in.link(name, v); err != nil {
			return err
		}
	}
	return syncDir(filepath.Dir(in.binPath("cairn")))
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// install writes b's files into versions/<version>/ (through a temporary
// directory renamed into place, so a version directory is always whole).
func (in *Installer) install(b *Bundle) error {
	v := b.Manifest.Version
	dir := filepath.Join(in.VersionsDir(), v)
	if err := os.MkdirAll(in.VersionsDir(), 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(in.VersionsDir(), ".install-"+v+"-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	for _, name := range Binaries {
		f, err := os.OpenFile(filepath.Join(tmp, name), os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o755)
		if err != nil {
			return err
		}
		_, err = f.Write(b.Files[name])
		if err == nil {
			err = f.Sync()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("write %s of %s: %w", name, v, err)
		}
	}
	// A directory of that version from an earlier try is replaced: the
	// bundle's checksums are the truth.
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	if err := os.Rename(tmp, dir); err != nil {
		return err
	}
	return syncDir(in.VersionsDir())
}

// prune removes every version directory but keep (and leftovers of
// interrupted installs).
func (in *Installer) prune(keep ...string) {
	ents, err := os.ReadDir(in.VersionsDir())
	if err != nil {
		return
	}
	for _, e := range ents {
		n := e.Name()
		kept := false
		for _, k := range keep {
			kept = kept || n == k
		}
		if !kept {
			if err := os.RemoveAll(filepath.Join(in.VersionsDir(), n)); err == nil {
				in.progress("removed version %s (older than the two kept)", n)
			}
		}
	}
}

// Units lists the Cairn daemon units to restart, in restart order: the
// active cairn-*.service units that are not oneshots (first boot,
// readiness), the MDM first, the others by name, without Skip.
func (in *Installer) Units(ctx context.Context) ([]string, error) {
	paths, err := filepath.Glob(filepath.Join(in.unitDir(), "cairn-*.service"))
	if err != nil {
		return nil, err
	}
	var units []string
	for _, p := range paths {
		u := filepath.Base(p)
		if u == in.Skip {
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		if strings.Contains("\n"+string(b), "\nType=oneshot") {
			continue
		}
		if st, _ := in.systemctl(ctx, "is-active", u); st != "active" {
			continue
		}
		units = append(units, u)
	}
	sort.Slice(units, func(a, b int) bool {
		if (units[a] == MDMUnit) != (units[b] == MDMUnit) {
			return units[a] == MDMUnit
		}
		return units[a] < units[b]
	})
	return units, nil
}

func (in *Installer) systemctl(ctx context.Context, args ...string) (string, error) {
	prog := in.Systemctl
	if prog == "" {
		prog = "systemctl"
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, prog, args...).Output()
	s := strings.TrimSpace(string(out))
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) && len(ee.Stderr) > 0 {
			err = fmt.Errorf("%w: %s", err, strings.TrimSpace(string(ee.Stderr)))
		}
		return s, fmt.Errorf("systemctl %s: %w", strings.Join(args, " "), err)
	}
	return s, nil
}

// restartGroups splits units (in Units' order) into the groups they are
// restarted in: the MDM alone first, when it is among them (its etcd
// member must be back and settled before the others lean on it), then the
// others together.
func restartGroups(units []string) [][]string {
	if len(units) > 1 && units[0] == MDMUnit {
		return [][]string{units[:1], units[1:]}
	}
	return [][]string{units}
}

// restartAll restarts units on version v group by group (restartGroups):
// each unit of a group one after another (each `systemctl restart`
// returns once systemd has started it), then the group settled together.
// restarted is the units restarted so far, also on error (a roll back
// restarts those).
//
// Settling the others together, not one by one, is what keeps an SVM's
// turn in a rolling upgrade short: five units settled one at a time cost
// five settle times; together, two (the MDM's, the rest's). Every unit is
// still watched for the whole settle time, and a unit that crashes
// meanwhile fails the update.
func (in *Installer) restartAll(ctx context.Context, units []string, v string) (restarted []string, err error) {
	for _, g := range restartGroups(units) {
		for _, u := range g {
			in.progress("restarting %s on %s", u, v)
			restarted = append(restarted, u)
			if _, err := in.systemctl(ctx, "restart", u); err != nil {
				return restarted, err
			}
		}
		if len(g) > 1 {
			in.progress("checking that %s stay active on %s for %s", strings.Join(g, ", "), v, in.Settle)
		}
		if err := in.healthy(ctx, g, v); err != nil {
			return restarted, err
		}
	}
	return restarted, nil
}

// unitWatch is what healthy knows of one unit.
type unitWatch struct {
	since    time.Time // active on the version since (zero: not now)
	deadline time.Time
	crashed  bool
	why      string
}

// healthy waits until every one of units has stayed active on version v
// for Settle, each given Settle+StartTimeout from now (a unit seen
// activating, systemd's auto-restart after a crash, 2*Settle+5 s); the
// first unit that fails, or runs out of time, is the error.
func (in *Installer) healthy(ctx context.Context, units []string, v string) error {
	start := time.Now()
	watch := make([]unitWatch, len(units))
	for i := range watch {
		watch[i] = unitWatch{deadline: start.Add(in.Settle + in.StartTimeout), why: "not checked"}
	}
	for {
		settled := 0
		for i, unit := range units {
			w := &watch[i]
			ok, reason, state := in.runsState(ctx, unit, v)
			switch {
			case state == "failed":
				return fmt.Errorf("%s failed on version %s", unit, v)
			case state == "activating" && !w.crashed:
				// A simple service is active as soon as it started:
				// activating is systemd's auto-restart after a crash. Give
				// a crash loop a short while, not the whole start timeout.
				w.crashed = true
				if d := time.Now().Add(2*in.Settle + 5*time.Second); d.Before(w.deadline) {
					w.deadline = d
				}
				w.since, w.why = time.Time{}, reason+" (it exited and is being restarted)"
			case !ok:
				w.since, w.why = time.Time{}, reason
				if w.crashed {
					w.why += " (it exited and is being restarted)"
				}
			case w.since.IsZero():
				w.since = time.Now()
			case time.Since(w.since) >= in.Settle:
				settled++
				continue
			}
			if time.Now().After(w.deadline) {
				return fmt.Errorf("%s did not run version %s for %s (given %s): %s", unit, v, in.Settle, time.Since(start).Round(time.Second), w.why)
			}
		}
		if settled == len(units) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// runs says whether unit is active with a main process of version v.
func (in *Installer) runs(ctx context.Context, unit, v string) (bool, string) {
	ok, why, _ := in.runsState(ctx, unit, v)
	return ok, why
}

// runsState is runs, also returning the unit's state (is-active).
func (in *Installer) runsState(ctx context.Context, unit, v string) (bool, string, string) {
	st, _ := in.systemctl(ctx, "is-active", unit)
	ok, why := in.mainRuns(ctx, unit, st, v)
	return ok, why, st
}

func (in *Installer) mainRuns(ctx context.Context, unit, st, v string) (bool, string) {
	if st != "active" {
		return false, "its state is " + st
	}
	out, err := in.systemctl(ctx, "show", "-p", "MainPID", "--value", unit)
	pid, perr := strconv.Atoi(out)
	if err != nil || perr != nil || pid <= 0 {
		return false, fmt.Sprintf("no main process (%v)", err)
	}
	got, err := VersionOf(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		return false, fmt.Sprintf("its process %d: %v", pid, err)
	}
	if got != v {
		return false, fmt.Sprintf("its process %d runs %s", pid, got)
	}
	return true, ""
}

// Result is what an update did.
type Result struct {
	From, To string
	Units    []string // restarted (on To, or back on From after a roll back)
}

// ErrRolledBack marks an update that failed and was switched back: the
// previous version runs.
var ErrRolledBack = errors.New("rolled back")

// Update installs b and switches this SVM to it (see the top of this file).
// On failure after the switch it switches back and returns an error
// wrapping ErrRolledBack, or, when the roll back failed too, an error that
// says so and what to do.
func (in *Installer) Update(ctx context.Context, b *Bundle) (Result, error) {
	to := b.Manifest.Version
	from, err := in.adopt()
	if err != nil {
		return Result{}, err
	}
	res := Result{From: from, To: to}
	units, err := in.Units(ctx)
	if err != nil {
		return res, err
	}
	in.progress("installing %s beside %s", to, from)
	if from != to {
		if err := in.install(b); err != nil {
			return res, fmt.Errorf("install %s: %w (still on %s)", to, err, from)
		}
	}
	if err := in.switchTo(to); err != nil {
		in.switchTo(from)
		return res, fmt.Errorf("%w: %v (still on %s)", ErrRolledBack, err, from)
	}
	restarted, err := in.restartAll(ctx, units, to)
	if err != nil {
		return res, in.rollBack(context.WithoutCancel(ctx), from, to, restarted, err)
	}
	res.Units = restarted
	in.prune(to, from)
	in.progress("%s runs %s (%s kept for a roll back)", strings.Join(units, ", "), to, from)
	return res, nil
}

func (in *Installer) rollBack(ctx context.Context, from, to string, units []string, cause error) error {
	in.progress("rolling back to %s: %v", from, cause)
	if err := in.switchTo(from); err != nil {
		return fmt.Errorf("%v; the roll back to %s failed too: %v: point /usr/local/bin/cairn and cairnctl at %s by hand and restart %s",
			cause, from, err, filepath.Join(in.VersionsDir(), from), strings.Join(units, ", "))
	}
	// Every unit restarted on the new version goes back the way it came
	// (restartGroups), even when one of them does not come up on the old
	// version either: each group's failure is named.
	var failed []string
	for _, g := range restartGroups(units) {
		var up []string
		for _, u := range g {
			if _, err := in.systemctl(ctx, "restart", u); err != nil {
				failed = append(failed, err.Error())
			} else {
				up = append(up, u)
			}
		}
		if err := in.healthy(ctx, up, from); err != nil {
			failed = append(failed, err.Error())
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("%v; switched back to %s, but %s: look at `journalctl -u` of those units", cause, from, strings.Join(failed, "; "))
	}
	return fmt.Errorf("%w to %s: %v; version %s stays installed in %s: fix the bundle or the SVM and order it again",
		ErrRolledBack, from, cause, to, filepath.Join(in.VersionsDir(), to))
}
