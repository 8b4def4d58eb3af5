// Package firstboot configures a freshly deployed Cairn SVM from its deployment settings
// (the OVF environment on vSphere, a NoCloud seed elsewhere) and reports readiness.
package firstboot

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/pem"
	"github.com/cairn-storage/cairn/appliance/contract"
	"github.com/cairn-storage/cairn/appliance/internal/firewall"
	"slices"

	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Runner runs an external command and returns its standard output. Tests replace it.
type Runner interface {
	Run(ctx context.Context, name string, args ...string) ([]byte, error)
}

// ExecRunner runs commands with os/exec.
type ExecRunner struct{}

// maxCommandOutput bounds what is kept of a command's output: the OVF environment is
// set by whoever edits the VM's options and could be made huge. contract.ParseOVFEnv rejects
// anything near this size anyway.
const maxCommandOutput = 1 << 20

// Run runs name with args; a failure includes the command's standard error.
func (ExecRunner) Run(ctx context.Context, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	stdout := &boundedBuffer{max: maxCommandOutput}
	stderr := &boundedBuffer{max: 4096}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Run(); err != nil {
		return stdout.Bytes(), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	if stdout.overflow {
		return nil, fmt.Errorf("%s %s: output larger than %d bytes", name, strings.Join(args, " "), maxCommandOutput)
	}
	return stdout.Bytes(), nil
}

// boundedBuffer keeps the first max bytes written and notes that more came. It has no
// ReadFrom (unlike an embedded bytes.Buffer), so io.Copy must go through Write.
type boundedBuffer struct {
	buf      bytes.Buffer
	max      int
	overflow bool
}

func (b *boundedBuffer) Write(p []byte) (int, error) {
	if room := b.max - b.buf.Len(); room < len(p) {
		b.overflow = true
		if room > 0 {
			b.buf.Write(p[:room])
		}
		return len(p), nil // keep draining so the command does not block on a full pipe
	}
	return b.buf.Write(p)
}

func (b *boundedBuffer) Bytes() []byte  { return b.buf.Bytes() }
func (b *boundedBuffer) String() string { return b.buf.String() }

// Options configures Run. The zero value plus Root="/" is the production setup.
type Options struct {
	// Root is the filesystem root that files are written under ("/" on the appliance).
	Root string
	// Seed is an explicit NoCloud seed (directory or user-data file). When set, it is the
	// only source consulted.
	Seed string
	// VMTools is the vmtoolsd binary used for guestinfo ("" = "vmtoolsd"; "-" disables).
	VMTools string
	// NoSeedDisk disables looking for a filesystem labelled CIDATA.
	NoSeedDisk bool
	// ReportReady selects the readiness mode: wait for the role units configured by a
	// previous first boot to be active, then report through guestinfo and ReadyFile.
	ReportReady bool
	// ReadyTimeout bounds the wait in ReportReady mode (0 = 3 minutes).
	ReadyTimeout time.Duration
	// Force re-applies settings even if first boot already completed.
	Force bool
	// DryRun validates and prints the plan without changing anything.
	DryRun bool

	Runner Runner       // nil = ExecRunner
	Log    *slog.Logger // nil = slog.Default()
	// Console receives the human-readable outcome; the unit sends stdout to the console
	// and the journal (StandardOutput=journal+console). nil = os.Stdout.
	Console io.Writer
}

// RegisterFlags declares the `cairn firstboot` flags on fs, bound to o.
func (o *Options) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.Root, "root", "/", "filesystem root to configure")
	fs.StringVar(&o.Seed, "seed", "", "NoCloud seed directory or user-data file (skips guestinfo and the CIDATA disk)")
	fs.StringVar(&o.VMTools, "vmtoolsd", "vmtoolsd", `vmtoolsd binary for guestinfo ("-" to disable)`)
	fs.BoolVar(&o.NoSeedDisk, "no-seed-disk", false, "do not look for a disk labelled "+SeedLabel)
	fs.BoolVar(&o.ReportReady, "report-ready", false, "wait for the configured units, then report readiness")
	fs.DurationVar(&o.ReadyTimeout, "ready-timeout", 3*time.Minute, "how long -report-ready waits for the units")
	fs.BoolVar(&o.Force, "force", false, "apply the settings again even if first boot already completed")
	fs.BoolVar(&o.DryRun, "dry-run", false, "validate the settings and print what would be done; change nothing")
}

func (o *Options) defaults() {
	if o.Root == "" {
		o.Root = "/"
	}
	if o.VMTools == "" {
		o.VMTools = "vmtoolsd"
	}
	if o.ReadyTimeout == 0 {
		o.ReadyTimeout = 3 * time.Minute
	}
	if o.Runner == nil {
		o.Runner = ExecRunner{}
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.Console == nil {
		o.Console = os.Stdout
	}
}

// Run performs first boot: find the settings, validate them, write the configuration
// and start the role units. Invalid or missing settings change nothing; the reason goes
// to the console, the journal and guestinfo.cairn.ready ("error: ...").
func Run(ctx context.Context, opts Options) error {
	opts.defaults()
	if opts.ReportReady {
		return reportReady(ctx, &opts)
	}
	if _, err := os.Stat(opts.path(DoneFile)); err == nil && !opts.Force && !opts.DryRun {
		opts.Log.Info("first boot already completed; nothing to do", "stamp", DoneFile)
		return nil
	}
	err := configure(ctx, &opts)
	if err != nil {
		what := "nothing was configured"
		if errors.Is(err, errAfterInstall) {
			// Files are in place but starting the units failed: a reboot retries
			// (no done stamp was written).
			what = "configuration files installed, but the services could not be started"
		}
		fmt.Fprintf(opts.Console, "\n*** Cairn first boot FAILED; %s ***\n%s\n"+
			"Fix the vApp properties (vSphere) or the %s seed, then reboot the SVM.\n\n", what, indent(err.Error()), SeedLabel)
		opts.Log.Error("first boot failed", "err", err)
		if !opts.DryRun {
			opts.setGuestInfo(ctx, contract.GuestReady, "error: "+oneLine(err.Error()))
		}
	}
	return err
}

func configure(ctx context.Context, o *Options) error {
	raw, source, err := o.findSettings(ctx)
	if err != nil {
		return err
	}
	o.Log.Info("deployment settings found", "source", source, "keys", len(raw))
	s, err := contract.Validate(raw)
	if err != nil {
		return fmt.Errorf("settings from %s rejected:\n%w", source, err)
	}
	plan := Render(s)
	saved, err := SettingsFileContent(raw)
	if err != nil {
		return fmt.Errorf("settings from %s: %w; report this as a bug with the settings", source, err)
	}
	plan.Files = append(plan.Files, File{Path: SettingsFile, Mode: 0o600, Content: saved})
	if o.DryRun {
		for _, f := range plan.Files {
			content := f.Content
			switch f.Path {
			case JoinTokenFile:
				content = "(join token)\n"
			case SettingsFile:
				content = "(the settings above, for cairn peersync)\n"
			}
			fmt.Fprintf(o.Console, "--- %s (%o %s)\n%s", f.Path, f.Mode, ownerName(f.Owner), content)
		}
		fmt.Fprintf(o.Console, "--- units to start: %s\n", strings.Join(plan.Units, " "))
		return nil
	}
	if err := o.apply(ctx, plan); err != nil {
		return err
	}
	stamp := fmt.Sprintf("source=%s\ntime=%s\n", source, time.Now().UTC().Format(time.RFC3339))
	if err := WriteAtomic(o.path(DoneFile), []byte(stamp), 0o644, -1, -1); err != nil {
		return fmt.Errorf("%w: write %s: %w", errAfterInstall, DoneFile, err)
	}
	o.setGuestInfo(ctx, contract.GuestReady, "configured")
	fmt.Fprintf(o.Console, "Cairn first boot: %s configured from %s (roles %s); starting %s\n",
		s.Hostname, source, strings.Join(rolesStrings(s.Roles), ","), strings.Join(plan.Units, " "))
	o.Log.Info("first boot applied", "hostname", s.Hostname, "roles", rolesStrings(s.Roles), "units", plan.Units)
	return nil
}

// findSettings tries the sources in order: an explicit seed, the OVF environment, a
// CIDATA disk. A source that exists but holds broken settings is an error, never a
// reason to fall through to the next one.
func (o *Options) findSettings(ctx context.Context) (map[string]string, string, error) {
	if o.Seed != "" {
		seed, err := ReadSeed(o.Seed)
		if err != nil {
			return nil, "", err
		}
		return seed.Settings, "seed " + o.Seed, nil
	}
	var tried []string
	if o.VMTools != "-" {
		tctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		out, err := o.Runner.Run(tctx, o.VMTools, "--cmd", "info-get guestinfo.ovfEnv")
		cancel()
		switch {
		case err != nil:
			o.Log.Debug("no OVF environment from vmtoolsd", "err", err)
			tried = append(tried, "guestinfo.ovfEnv (vmtoolsd: not on VMware or no vApp options)")
		case len(bytes.TrimSpace(out)) == 0:
			tried = append(tried, "guestinfo.ovfEnv (empty: vApp options disabled?)")
		default:
			props, err := contract.ParseOVFEnv(out)
			if errors.Is(err, contract.ErrNoSettings) {
				tried = append(tried, "guestinfo.ovfEnv (no cairn.* properties)")
				break
			}
			if err != nil {
				return nil, "", err
			}
			return props, "guestinfo.ovfEnv", nil
		}
	}
	if !o.NoSeedDisk {
		props, src, err := o.readOVFISO(ctx)
		if err == nil {
			return props, src, nil
		}
		if !errors.Is(err, contract.ErrNoSettings) {
			return nil, "", err
		}
		tried = append(tried, err.Error())
	}
	if !o.NoSeedDisk {
		props, src, err := o.readSeedDisk(ctx)
		if err == nil {
			return props, src, nil
		}
		if !errors.Is(err, contract.ErrNoSettings) {
			return nil, "", err
		}
		tried = append(tried, err.Error())
	}
	return nil, "", fmt.Errorf("%w; looked at: %s. Deploy the OVA with its vApp properties filled in (guestinfo or ISO transport), or attach a disk labelled %s holding user-data",
		contract.ErrNoSettings, strings.Join(tried, "; "), SeedLabel)
}

// readOVFISO reads the OVF environment from the ISO transport (DSP0243: vSphere, or
// any hypervisor, attaches an ISO 9660 image holding ovf-env.xml at its root as a
// CD-ROM). Every iso9660 device is looked at, at most maxISODevices of them; a
// CD-ROM without ovf-env.xml (an installer ISO, a NoCloud seed) is skipped.
func (o *Options) readOVFISO(ctx context.Context) (map[string]string, string, error) {
	out, err := o.Runner.Run(ctx, "blkid", "-o", "device", "-t", "TYPE=iso9660")
	devs := strings.Fields(string(out))
	if err != nil || len(devs) == 0 {
		return nil, "", fmt.Errorf("no ISO 9660 CD-ROM (OVF ISO transport): %w", contract.ErrNoSettings)
	}
	if len(devs) > maxISODevices {
		devs = devs[:maxISODevices]
	}
	for _, dev := range devs {
		var doc []byte
		err := o.withMounted(ctx, dev, "iso9660", func(dir string) error {
			ents, err := os.ReadDir(dir)
			if err != nil {
				return err
			}
			for _, e := range ents {
				// ISO 9660 without Rock Ridge shows upper-case names, some tools write ovf_env.xml.
				if n := strings.ToLower(e.Name()); (n == ovfEnvFile || n == "ovf_env.xml") && e.Type().IsRegular() {
					doc, err = readBounded(filepath.Join(dir, e.Name()))
					if err == nil && len(doc) > maxSeedFileBytes {
						err = fmt.Errorf("%s is larger than %d bytes", e.Name(), maxSeedFileBytes)
					}
					return err
				}
			}
			return nil
		})
		if err != nil {
			return nil, "", fmt.Errorf("CD-ROM %s: %w", dev, err)
		}
		if doc == nil {
			continue
		}
		props, err := contract.ParseOVFEnv(doc)
		if err != nil {
			return nil, "", fmt.Errorf("CD-ROM %s: %s: %w", dev, ovfEnvFile, err)
		}
		return props, "OVF environment ISO " + dev, nil
	}
	return nil, "", fmt.Errorf("no %s on the CD-ROM(s) %s (OVF ISO transport): %w", ovfEnvFile, strings.Join(devs, ", "), contract.ErrNoSettings)
}

const (
	ovfEnvFile    = "ovf-env.xml"
	maxISODevices = 4
)

// readSeedDisk mounts the filesystem labelled CIDATA read-only, reads the seed and
// unmounts it again.
func (o *Options) readSeedDisk(ctx context.Context) (map[string]string, string, error) {
	var dev string
	for _, label := range []string{SeedLabel, strings.ToLower(SeedLabel)} {
		out, err := o.Runner.Run(ctx, "blkid", "-l", "-o", "device", "-t", "LABEL="+label)
		if d := strings.TrimSpace(string(out)); err == nil && d != "" {
			dev = d
			break
		}
	}
	if dev == "" {
		return nil, "", fmt.Errorf("no disk labelled %s: %w", SeedLabel, contract.ErrNoSettings)
	}
	var seed *Seed
	err := o.withMounted(ctx, dev, "", func(dir string) error {
		var err error
		seed, err = ReadSeed(dir)
		return err
	})
	if err != nil {
		return nil, "", fmt.Errorf("seed disk %s: %w", dev, err)
	}
	return seed.Settings, "seed disk " + dev, nil
}

// withMounted mounts dev read-only (fstype "" = let mount probe) on a fresh directory,
// calls fn with it and unmounts it again, even when ctx is already cancelled.
func (o *Options) withMounted(ctx context.Context, dev, fstype string, fn func(dir string) error) error {
	mnt, err := os.MkdirTemp("", "cairn-seed-")
	if err != nil {
		return err
	}
	defer os.Remove(mnt)
	args := []string{"-o", "ro,nosuid,nodev,noexec"}
	if fstype != "" {
		args = append(args, "-t", fstype)
	}
	if _, err := o.Runner.Run(ctx, "mount", append(args, dev, mnt)...); err != nil {
		return fmt.Errorf("mount: %w", err)
	}
	defer func() {
		if _, err := o.Runner.Run(context.WithoutCancel(ctx), "umount", mnt); err != nil {
			o.Log.Warn("unmount", "dev", dev, "err", err)
		}
	}()
	return fn(mnt)
}

// apply writes the plan's files and starts its units. Files are first staged next to
// their targets and renamed into place only when every one was written, so a failure
// (disk full, missing admin user) leaves the previous configuration untouched.
func (o *Options) apply(ctx context.Context, plan *Plan) error {
	type staged struct{ tmp, dst string }
	var done []staged
	cleanup := func() {
		for _, s := range done {
			os.Remove(s.tmp)
		}
	}
	// Resolve every owner first: a missing account is a broken image, found before
	// anything is touched.
	type ids struct{ uid, gid int }
	owners := map[string]ids{"": {-1, -1}}
	for _, f := range plan.Files {
		if _, ok := owners[f.Owner]; !ok {
			uid, gid, err := lookupUser(o.path("/etc/passwd"), f.Owner)
			if err != nil {
				return fmt.Errorf("%s: %w", f.Path, err)
			}
			owners[f.Owner] = ids{uid, gid}
		}
	}
	for _, f := range plan.Files {
		uid, gid := owners[f.Owner].uid, owners[f.Owner].gid
		dst := o.path(f.Path)
		dir := filepath.Dir(dst)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			cleanup()
			return fmt.Errorf("create %s: %w", filepath.Dir(f.Path), err)
		}
		if uid >= 0 {
			// e.g. ~cairn/.ssh: the owner's, not world-readable.
			if err := os.Chmod(dir, 0o700); err != nil {
				cleanup()
				return err
			}
			if err := os.Lchown(dir, uid, gid); err != nil {
				cleanup()
				return fmt.Errorf("chown %s: %w", filepath.Dir(f.Path), err)
			}
		}
		tmp := dst + ".cairn-new"
		if err := writeFile(tmp, []byte(f.Content), f.Mode, uid, gid); err != nil {
			cleanup()
			return fmt.Errorf("write %s: %w", f.Path, err)
		}
		done = append(done, staged{tmp, dst})
	}
	if o.Root == "/" {
		// A ruleset nft refuses would leave the SVM with the image's closed firewall
		// at the next boot: check it before anything is installed.
		for _, s := range done {
			if s.dst == o.path(firewall.Path) {
				if _, err := o.Runner.Run(ctx, "nft", "-c", "-f", s.tmp); err != nil {
					cleanup()
					return fmt.Errorf("the generated firewall (%s) is refused by nft: %w; report this as a bug with the settings", firewall.Path, err)
				}
			}
		}
	}
	for i, s := range done {
		if err := os.Rename(s.tmp, s.dst); err != nil {
			for _, rest := range done[i:] {
				os.Remove(rest.tmp)
			}
			return fmt.Errorf("install %s: %w", s.dst, err)
		}
	}
	if o.Root != "/" {
		return nil // a test root: no host to reconfigure
	}
	// Load the firewall before the role units start listening.
	if _, err := o.Runner.Run(ctx, "nft", "-f", firewall.Path); err != nil {
		return fmt.Errorf("%w: load the firewall: %w", errAfterInstall, err)
	}
	hn, err := os.ReadFile(o.path("/etc/hostname"))
	if err == nil {
		if _, err := o.Runner.Run(ctx, "hostname", strings.TrimSpace(string(hn))); err != nil {
			return fmt.Errorf("%w: %w", errAfterInstall, err)
		}
	}
	// The units are ordered After=cairn-firstboot.service, so a blocking start from
	// inside first boot would wait for itself: queue the jobs instead.
	if _, err := o.Runner.Run(ctx, "systemctl", append([]string{"enable"}, plan.Units...)...); err != nil {
		return fmt.Errorf("%w: %w", errAfterInstall, err)
	}
	if _, err := o.Runner.Run(ctx, "systemctl", append([]string{"start", "--no-block"}, plan.Units...)...); err != nil {
		return fmt.Errorf("%w: %w", errAfterInstall, err)
	}
	return nil
}

// errAfterInstall marks failures that happen after the files were installed.
var errAfterInstall = errors.New("configuration installed, starting services failed")

// reportReady waits until every unit the configured roles need is active, then tells
// the deployer: guestinfo.cairn.ready=ready (or "error: ...") and ReadyFile.
func reportReady(ctx context.Context, o *Options) error {
	env, err := readEnvFile(o.path(EnvFile))
	if err != nil {
		o.setGuestInfo(ctx, contract.GuestReady, "error: not configured")
		return fmt.Errorf("report readiness: %w (did first boot succeed? see journalctl -u cairn-firstboot)", err)
	}
	var units []string
	if env["CAIRN_PKI"] != "" {
		// The daemons' certificates first: a unit may show active for a
		// moment before its daemon finds it has none, and the deployer
		// redeems the bootstrap token (closing the join window) once every
		// SVM is ready.
		units = append(units, CertsUnit)
	}
	seen := map[string]bool{}
	for _, r := range strings.Split(env["CAIRN_ROLES"], ",") {
		if u := UnitForRole(contract.Role(r)); u != "" && !seen[u] {
			seen[u] = true
			units = append(units, u)
		}
	}
	deadline := time.Now().Add(o.ReadyTimeout)
	for {
		var notActive []string
		for _, u := range units {
			out, _ := o.Runner.Run(ctx, "systemctl", "is-active", u)
			if st := strings.TrimSpace(string(out)); st != "active" {
				notActive = append(notActive, u+"="+st)
			}
		}
		if len(notActive) == 0 {
			break
		}
		if time.Now().After(deadline) {
			msg := "units not active after " + o.ReadyTimeout.String() + ": " + strings.Join(notActive, " ")
			o.setGuestInfo(ctx, contract.GuestReady, "error: "+msg)
			fmt.Fprintf(o.Console, "Cairn SVM NOT ready: %s\n", msg)
			return errors.New(msg)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
	if slices.Contains(strings.Split(env["CAIRN_ROLES"], ","), string(contract.RoleGateway)) {
		tp, err := waitThumbprint(ctx, o.path(contract.GatewayCertFile), deadline)
		if err != nil {
			o.setGuestInfo(ctx, contract.GuestReady, "error: "+err.Error())
			fmt.Fprintf(o.Console, "Cairn SVM NOT ready: %s\n", err)
			return err
		}
		// Published before "ready", so the deployer finds it when it sees ready.
		o.setGuestInfo(ctx, contract.GuestThumbprint, tp)
		fmt.Fprintf(o.Console, "Cairn gateway certificate SHA-256: %s\n", tp)
	}
	uptime := readUptime()
	if err := WriteAtomic(o.path(ReadyFile), []byte(fmt.Sprintf("ready uptime=%s units=%s\n", uptime, strings.Join(units, ","))), 0o644, -1, -1); err != nil {
		return fmt.Errorf("write %s: %w", ReadyFile, err)
	}
	o.setGuestInfo(ctx, contract.GuestReady, "ready")
	fmt.Fprintf(o.Console, "Cairn SVM ready (uptime %ss): %s\n", uptime, strings.Join(units, " "))
	o.Log.Info("svm ready", "units", units, "uptime_s", uptime)
	return nil
}

// setGuestInfo publishes key=value to vSphere through open-vm-tools. Off VMware the call
// fails; that is expected and only logged.
func (o *Options) setGuestInfo(ctx context.Context, key, value string) {
	if o.VMTools == "-" {
		return
	}
	const maxGuestInfo = 1024
	if len(value) > maxGuestInfo {
		value = value[:maxGuestInfo]
	}
	tctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if _, err := o.Runner.Run(tctx, o.VMTools, "--cmd", "info-set "+key+" "+value); err != nil {
		o.Log.Debug("guestinfo not set (not on VMware?)", "key", key, "err", err)
	}
}

func (o *Options) path(p string) string { return filepath.Join(o.Root, p) }

func WriteAtomic(path string, data []byte, mode os.FileMode, uid, gid int) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp := path + ".cairn-new"
	if err := writeFile(tmp, data, mode, uid, gid); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// writeFile writes data durably (fsync) with mode and owner, never following a symlink
// planted at path.
func writeFile(path string, data []byte, mode os.FileMode, uid, gid int) error {
	os.Remove(path)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(mode) // not subject to umask
	}
	if err == nil && uid >= 0 {
		err = f.Chown(uid, gid)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
	}
	return err
}

// lookupUser finds name in a passwd file (the target root's, not the running host's).
func lookupUser(passwd, name string) (uid, gid int, err error) {
	f, err := os.Open(passwd)
	if err != nil {
		return -1, -1, fmt.Errorf("look up user %s: %w", name, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Split(sc.Text(), ":")
		if len(fields) >= 4 && fields[0] == name {
			u, err1 := strconv.Atoi(fields[2])
			g, err2 := strconv.Atoi(fields[3])
			if err1 != nil || err2 != nil {
				return -1, -1, fmt.Errorf("user %s: malformed %s entry", name, passwd)
			}
			return u, g, nil
		}
	}
	return -1, -1, fmt.Errorf("user %s does not exist in %s: the image is broken (built without packer/scripts/10-base.sh?)", name, passwd)
}

func readEnvFile(path string) (map[string]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	env := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
			env[k] = v
		}
	}
	return env, nil
}

func readUptime() string {
	b, err := os.ReadFile("/proc/uptime")
	if err != nil {
		return "?"
	}
	up, _, _ := strings.Cut(string(b), " ")
	return up
}

func rolesStrings(rs []contract.Role) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = string(r)
	}
	return out
}

func ownerName(o string) string {
	if o == "" {
		return "root"
	}
	return o
}

func indent(s string) string { return "  " + strings.ReplaceAll(s, "\n", "\n  ") }

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// waitThumbprint waits (until deadline) for the gateway's certificate, which the
// gateway writes at its first start, and returns its SHA-256 thumbprint.
func waitThumbprint(ctx context.Context, certFile string, deadline time.Time) (string, error) {
	for {
		b, err := os.ReadFile(certFile)
		if err == nil {
			if blk, _ := pem.Decode(b); blk != nil && blk.Type == "CERTIFICATE" {
				sum := sha256.Sum256(blk.Bytes)
				return hex.EncodeToString(sum[:]), nil
			}
			err = errors.New("no PEM certificate in it")
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("gateway certificate %s not readable (%v): see journalctl -u cairn-gateway", certFile, err)
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}
