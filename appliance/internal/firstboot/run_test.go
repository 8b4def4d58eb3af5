package firstboot

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"github.com/cairn-storage/cairn/appliance/contract"
	"math/big"

	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeRunner stands in for vmtoolsd, blkid, mount and systemctl.
type fakeRunner struct {
	mu       sync.Mutex
	calls    []string
	ovfEnv   string                       // what info-get guestinfo.ovfEnv returns; "" = vmtoolsd fails
	seedDev  string                       // what blkid finds; "" = nothing
	seedData map[string]string            // files "mount" puts into the mount point
	isos     map[string]map[string]string // iso9660 device -> its files (OVF ISO transport)
	unitSt   map[string]string            // systemctl is-active answers
	guest    map[string]string            // guestinfo set via info-set
}

func (f *fakeRunner) Run(_ context.Context, name string, args ...string) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, name+" "+strings.Join(args, " "))
	switch name {
	case "vmtoolsd":
		cmd := args[1]
		if cmd == "info-get guestinfo.ovfEnv" {
			if f.ovfEnv == "" {
				return nil, errors.New("not running on VMware")
			}
			return []byte(f.ovfEnv), nil
		}
		if rest, ok := strings.CutPrefix(cmd, "info-set "); ok {
			k, v, _ := strings.Cut(rest, " ")
			if f.guest == nil {
				f.guest = map[string]string{}
			}
			f.guest[k] = v
			return nil, nil
		}
	case "blkid":
		if slices.Contains(args, "TYPE=iso9660") {
			if len(f.isos) == 0 {
				return nil, errors.New("exit status 2")
			}
			return []byte(strings.Join(slices.Sorted(maps.Keys(f.isos)), "\n") + "\n"), nil
		}
		if f.seedDev != "" && slices.Contains(args, "LABEL="+SeedLabel) {
			return []byte(f.seedDev + "\n"), nil
		}
		return nil, errors.New("exit status 2")
	case "mount":
		mnt, dev := args[len(args)-1], args[len(args)-2]
		files := f.seedData
		if slices.Contains(args, "iso9660") {
			files = f.isos[dev]
		}
		for n, c := range files {
			if err := os.WriteFile(filepath.Join(mnt, n), []byte(c), 0o644); err != nil {
				return nil, err
			}
		}
		return nil, nil
	case "umount":
		ents, _ := os.ReadDir(args[0])
		for _, e := range ents {
			os.Remove(filepath.Join(args[0], e.Name()))
		}
		return nil, nil
	case "systemctl":
		if args[0] == "is-active" {
			st := f.unitSt[args[1]]
			if st == "" {
				st = "inactive"
			}
			return []byte(st + "\n"), nil
		}
		return nil, nil
	}
	return nil, fmt.Errorf("unexpected command %s", name)
}

// newRoot makes a target root with the admin user in its passwd file.
func newRoot(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	must(t, os.MkdirAll(filepath.Join(root, "etc"), 0o755))
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/bin/bash\ncairn:x:%d:%d::/home/cairn:/bin/bash\n", os.Getuid(), os.Getgid())
	must(t, os.WriteFile(filepath.Join(root, "etc", "passwd"), []byte(passwd), 0o644))
	return root
}

func listTree(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	must(t, filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		out = append(out, rel)
		return nil
	}))
	return out
}

func testOptions(root string, r *fakeRunner, console io.Writer) Options {
	return Options{Root: root, Runner: r, Console: console, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
}

func TestRunFromSeedDir(t *testing.T) {
	root := newRoot(t)
	seed := t.TempDir()
	ud, err := EncodeUserData(goodSettings())
	must(t, err)
	must(t, os.WriteFile(filepath.Join(seed, "user-data"), ud, 0o644))
	r := &fakeRunner{}
	var console bytes.Buffer
	opts := testOptions(root, r, &console)
	opts.Seed = seed
	must(t, Run(context.Background(), opts))

	read := func(p string) string {
		b, err := os.ReadFile(filepath.Join(root, p))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	if got := read("/etc/hostname"); got != "svm-esx01.lab.example\n" {
		t.Errorf("hostname file %q", got)
	}
	mgmt := read("/etc/systemd/network/10-cairn-mgmt.network")
	for _, want := range []string{"Name=eth0", "Address=192.0.2.10/24", "Gateway=192.0.2.1", "DNS=192.0.2.53", "DNS=192.0.2.54"} {
		if !strings.Contains(mgmt, want+"\n") {
			t.Errorf("mgmt network lacks %q:\n%s", want, mgmt)
		}
	}
	if data := read("/etc/systemd/network/20-cairn-data.network"); !strings.Contains(data, "Name=eth1\n") || !strings.Contains(data, "Address=198.51.100.10/24\n") {
		t.Errorf("data network:\n%s", data)
	}
	if ntp := read("/etc/chrony/sources.d/cairn.sources"); !strings.Contains(ntp, "server ntp1.example.org iburst\nserver 192.0.2.123 iburst\n") {
		t.Errorf("ntp:\n%s", ntp)
	}
	env := read(EnvFile)
	for _, want := range []string{"CAIRN_CLUSTER_NAME=prod-cluster.1", "CAIRN_ROLES=mdm,sds,target,gateway", "CAIRN_MGMT_ADDRESS=192.0.2.10", "CAIRN_DATA_ADDRESS=198.51.100.10", "CAIRN_MDM_TIEBREAKER=false",
		"CAIRN_MDM=https://192.0.2.10:2379,https://192.0.2.11:2379,https://192.0.2.12:2379",
		"CAIRN_MDM_INITIAL_CLUSTER=svm-esx01.lab.example=https://192.0.2.10:2380,svm-esx02=https://192.0.2.11:2380,svm-esx03=https://192.0.2.12:2380",
		// Every MDM member keeps the CA and serves joins; every SVM is given every
		// member's join service. Given a join token (cj1.), even the first member
		// joins the existing system rather than create a CA.
		"CAIRN_PKI=/etc/cairn/pki", "CAIRN_CA_CREATOR=false", "CAIRN_CA_KEEPER=true",
		"CAIRN_JOIN_URLS=https://192.0.2.10:7443,https://192.0.2.11:7443,https://192.0.2.12:7443",
		"CAIRN_GATEWAYS=https://192.0.2.10:8443,https://192.0.2.11:8443",
		"CAIRN_TARGET_PORT_NUMBER=2", "CAIRN_TARGET_GROUP_PORTS=1,2,3",
		"CAIRN_JOIN_TOKEN_FILE=" + JoinTokenFile, "CAIRN_CONTRACT=3"} {
		if !strings.Contains(env, want+"\n") {
			t.Errorf("env lacks %q:\n%s", want, env)
		}
	}
	fw := read("/etc/nftables.conf")
	for _, want := range []string{"policy drop;", `iifname "eth0" ip saddr { 192.0.2.10, 192.0.2.11, 192.0.2.12 } tcp dport 2380 accept`,
		`ip saddr { 192.0.2.10, 198.51.100.10, 192.0.2.11, 198.51.100.11, 192.0.2.12, 198.51.100.12 } tcp dport 7100 accept`,
		`iifname "eth1" ip saddr { 198.51.100.0/24 } tcp dport 3260 accept`} {
		if !strings.Contains(fw, want) {
			t.Errorf("firewall lacks %q:\n%s", want, fw)
		}
	}
	if strings.Contains(env, "0123456789abcdef") {
		t.Error("join token leaked into the world-readable env file")
	}
	fi, err := os.Stat(filepath.Join(root, JoinTokenFile))
	must(t, err)
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("join token mode %v", fi.Mode())
	}
	ak := filepath.Join(root, "/home/cairn/.ssh/authorized_keys")
	if b, err := os.ReadFile(ak); err != nil || string(b) != testSSHKey+"\n" {
		t.Errorf("authorized_keys %q %v", b, err)
	}
	if fi, err := os.Stat(filepath.Dir(ak)); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf(".ssh dir %v %v", fi, err)
	}
	if _, err := os.Stat(filepath.Join(root, DoneFile)); err != nil {
		t.Error("done stamp missing")
	}
	if r.guest["guestinfo.cairn.ready"] != "configured" {
		t.Errorf("guestinfo %v", r.guest)
	}
	if !strings.Contains(console.String(), "configured from seed") {
		t.Errorf("console: %s", console.String())
	}
	for _, f := range listTree(t, root) {
		if strings.HasSuffix(f, ".cairn-new") {
			t.Errorf("staging file left behind: %s", f)
		}
	}

	// Second run: already done, changes nothing even with different settings.
	must(t, os.WriteFile(filepath.Join(seed, "user-data"), []byte(UserDataHeader+"\ncairn.hostname: other\n"), 0o644))
	must(t, Run(context.Background(), opts))
	if got := read("/etc/hostname"); got != "svm-esx01.lab.example\n" {
		t.Errorf("second run rewrote hostname: %q", got)
	}
}

// Invalid settings change nothing and say why on the console and in guestinfo.
func TestRunInvalidChangesNothing(t *testing.T) {
	root := newRoot(t)
	before := listTree(t, root)
	bad := goodSettings()
	bad[contract.KeyHostname] = "svm;reboot"
	delete(bad, contract.KeyJoinToken)
	r := &fakeRunner{ovfEnv: string(contract.EncodeOVFEnv(bad))}
	var console bytes.Buffer
	err := Run(context.Background(), testOptions(root, r, &console))
	if err == nil {
		t.Fatal("invalid settings accepted")
	}
	if after := listTree(t, root); !slices.Equal(before, after) {
		t.Errorf("files changed:\nbefore %v\nafter  %v", before, after)
	}
	out := console.String()
	for _, want := range []string{"FAILED; nothing was configured", contract.KeyHostname, contract.KeyJoinToken, "guestinfo.ovfEnv"} {
		if !strings.Contains(out, want) {
			t.Errorf("console lacks %q:\n%s", want, out)
		}
	}
	if g := r.guest["guestinfo.cairn.ready"]; !strings.HasPrefix(g, "error: ") || strings.Contains(g, "\n") {
		t.Errorf("guestinfo ready = %q", g)
	}
	for _, c := range r.calls {
		if strings.HasPrefix(c, "systemctl") || strings.HasPrefix(c, "hostname") {
			t.Errorf("ran %q despite invalid settings", c)
		}
	}
}

// A broken image (no admin user) fails before any file is installed.
func TestRunMissingAdminUserInstallsNothing(t *testing.T) {
	root := newRoot(t)
	must(t, os.WriteFile(filepath.Join(root, "etc", "passwd"), []byte("root:x:0:0:root:/root:/bin/bash\n"), 0o644))
	r := &fakeRunner{ovfEnv: string(contract.EncodeOVFEnv(goodSettings()))}
	err := Run(context.Background(), testOptions(root, r, io.Discard))
	if err == nil || !strings.Contains(err.Error(), "user cairn does not exist") {
		t.Fatalf("got %v", err)
	}
	for _, f := range listTree(t, root) {
		if strings.HasPrefix(f, "etc/hostname") || strings.Contains(f, "cairn-new") || strings.HasPrefix(f, "etc/cairn/") {
			t.Errorf("left %s behind", f)
		}
	}
}

func TestRunOVFEnvPreferredOverSeedDisk(t *testing.T) {
	root := newRoot(t)
	in := goodSettings()
	in[contract.KeyHostname] = "from-ovf"
	in[contract.KeyMDMMembers] = "from-ovf=192.0.2.10,svm-esx02=192.0.2.11,svm-esx03=192.0.2.12"
	r := &fakeRunner{ovfEnv: string(contract.EncodeOVFEnv(in)), seedDev: "/dev/vdb"}
	must(t, Run(context.Background(), testOptions(root, r, io.Discard)))
	if b, _ := os.ReadFile(filepath.Join(root, "etc/hostname")); string(b) != "from-ovf\n" {
		t.Errorf("hostname %q", b)
	}
	for _, c := range r.calls {
		if strings.HasPrefix(c, "mount") {
			t.Error("mounted the seed disk although the OVF environment had settings")
		}
	}
}

func TestRunSeedDisk(t *testing.T) {
	root := newRoot(t)
	ud, err := EncodeUserData(map[string]string{contract.KeyClusterName: "c1", contract.KeyRoles: "tiebreaker",
		contract.KeyMDMMembers: "m1=192.0.2.11,m2=192.0.2.12,tb1=192.0.2.13", contract.KeyJoinToken: "bootstrap-token-0123456789"})
	must(t, err)
	r := &fakeRunner{seedDev: "/dev/vdb", seedData: map[string]string{"user-data": string(ud), "meta-data": "instance-id: x\nlocal-hostname: tb1\n"}}
	must(t, Run(context.Background(), testOptions(root, r, io.Discard)))
	env, err := os.ReadFile(filepath.Join(root, EnvFile))
	must(t, err)
	if !strings.Contains(string(env), "CAIRN_MDM_TIEBREAKER=true\n") || !strings.Contains(string(env), "CAIRN_HOSTNAME=tb1\n") ||
		!strings.Contains(string(env), "CAIRN_MDM_INITIAL_CLUSTER=m1=https://192.0.2.11:2380,m2=https://192.0.2.12:2380,tb1=https://192.0.2.13:2380\n") ||
		// Not the first member: it joins at the members' join services with
		// its token, then keeps a copy of the CA and serves joins too.
		!strings.Contains(string(env), "CAIRN_CA_CREATOR=false\nCAIRN_CA_KEEPER=true\nCAIRN_JOIN_URLS=https://192.0.2.11:7443,https://192.0.2.12:7443,https://192.0.2.13:7443\nCAIRN_JOIN_TOKEN_FILE=/etc/cairn/join-token\n") {
		t.Errorf("env:\n%s", env)
	}
	var mounted, unmounted bool
	for _, c := range r.calls {
		mounted = mounted || strings.HasPrefix(c, "mount -o ro,nosuid,nodev,noexec /dev/vdb ")
		unmounted = unmounted || strings.HasPrefix(c, "umount ")
	}
	if !mounted || !unmounted {
		t.Errorf("mount/umount not both called: %v", r.calls)
	}
}

func TestRunNoSource(t *testing.T) {
	root := newRoot(t)
	var console bytes.Buffer
	err := Run(context.Background(), testOptions(root, &fakeRunner{}, &console))
	if !errors.Is(err, contract.ErrNoSettings) {
		t.Fatalf("got %v", err)
	}
	if !strings.Contains(console.String(), "labelled CIDATA") {
		t.Errorf("console does not say what to do:\n%s", console.String())
	}
}

func TestRunDryRun(t *testing.T) {
	root := newRoot(t)
	before := listTree(t, root)
	var console bytes.Buffer
	opts := testOptions(root, &fakeRunner{ovfEnv: string(contract.EncodeOVFEnv(goodSettings()))}, &console)
	opts.DryRun = true
	must(t, Run(context.Background(), opts))
	if after := listTree(t, root); !slices.Equal(before, after) {
		t.Errorf("dry run wrote files: %v", after)
	}
	if !strings.Contains(console.String(), "--- /etc/hostname") || strings.Contains(console.String(), "0123456789abcdef") {
		t.Errorf("dry run output wrong or shows the token:\n%s", console.String())
	}
}

func TestReportReady(t *testing.T) {
	root := newRoot(t)
	r := &fakeRunner{ovfEnv: string(contract.EncodeOVFEnv(goodSettings()))}
	must(t, Run(context.Background(), testOptions(root, r, io.Discard)))

	// The daemons look up while the SVM has no certificates yet: not ready.
	r.unitSt = map[string]string{"cairn-mdm.service": "active", "cairn-sds.service": "active", "cairn-target.service": "active", "cairn-gateway.service": "active",
		"cairn-certs.service": "activating"}
	opts := testOptions(root, r, io.Discard)
	opts.ReportReady = true
	opts.ReadyTimeout = 1500 * time.Millisecond
	if err := Run(context.Background(), opts); err == nil || !strings.Contains(err.Error(), "cairn-certs.service=activating") {
		t.Fatalf("ready without certificates: %v", err)
	}
	r.unitSt["cairn-certs.service"], r.unitSt["cairn-gateway.service"] = "active", "failed"
	err := Run(context.Background(), opts)
	if err == nil || !strings.Contains(err.Error(), "cairn-gateway.service=failed") {
		t.Fatalf("got %v", err)
	}
	if g := r.guest["guestinfo.cairn.ready"]; !strings.Contains(g, "cairn-gateway.service=failed") {
		t.Errorf("guestinfo %q", g)
	}

	// The gateway runs but has not written its certificate yet: not ready.
	r.unitSt["cairn-gateway.service"] = "active"
	if err := Run(context.Background(), opts); err == nil || !strings.Contains(err.Error(), "gateway certificate") {
		t.Fatalf("ready without the gateway certificate: %v", err)
	}
	der := writeTestCert(t, filepath.Join(root, contract.GatewayCertFile))
	must(t, Run(context.Background(), opts))
	if g := r.guest[contract.GuestReady]; g != "ready" {
		t.Errorf("guestinfo %q", g)
	}
	sum := sha256.Sum256(der)
	if g := r.guest[contract.GuestThumbprint]; g != hex.EncodeToString(sum[:]) {
		t.Errorf("published thumbprint %q, want the SHA-256 of the certificate %x", g, sum)
	}
	b, err := os.ReadFile(filepath.Join(root, ReadyFile))
	if err != nil || !strings.HasPrefix(string(b), "ready ") {
		t.Errorf("ready file %q %v", b, err)
	}
}

func TestReportReadyUnconfigured(t *testing.T) {
	opts := testOptions(newRoot(t), &fakeRunner{}, io.Discard)
	opts.ReportReady = true
	if err := Run(context.Background(), opts); err == nil {
		t.Fatal("reported ready without configuration")
	}
}

func TestExecRunnerBoundsOutput(t *testing.T) {
	out, err := ExecRunner{}.Run(context.Background(), "sh", "-c", "echo hello")
	if err != nil || string(out) != "hello\n" {
		t.Fatalf("got %q %v", out, err)
	}
	_, err = ExecRunner{}.Run(context.Background(), "sh", "-c", "head -c 2000000 /dev/zero")
	if err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("unbounded output accepted: %v", err)
	}
	_, err = ExecRunner{}.Run(context.Background(), "sh", "-c", "echo oops >&2; exit 3")
	if err == nil || !strings.Contains(err.Error(), "oops") {
		t.Fatalf("stderr not in error: %v", err)
	}
}

// writeTestCert writes a self-signed certificate as the gateway would and returns its DER.
func writeTestCert(t *testing.T, path string) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "gw"},
		NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	must(t, err)
	must(t, os.MkdirAll(filepath.Dir(path), 0o700))
	must(t, os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644))
	return der
}

// The OVF ISO transport: vSphere (or any hypervisor) attaches a CD-ROM holding
// ovf-env.xml. It is read after guestinfo and before a CIDATA disk; a CD-ROM without
// the file is skipped, a broken environment on it is refused (nothing configured).
func TestRunOVFISOTransport(t *testing.T) {
	in := goodSettings()
	in[contract.KeyHostname] = "from-iso"
	in[contract.KeyMDMMembers] = "from-iso=192.0.2.10,svm-esx02=192.0.2.11,svm-esx03=192.0.2.12"
	env := string(contract.EncodeOVFEnv(in))

	t.Run("second CD-ROM, upper-case name, preferred over CIDATA", func(t *testing.T) {
		root := newRoot(t)
		var console bytes.Buffer
		r := &fakeRunner{
			isos:     map[string]map[string]string{"/dev/sr0": {"README.TXT": "an installer"}, "/dev/sr1": {"OVF-ENV.XML": env}},
			seedDev:  "/dev/vdb",
			seedData: map[string]string{"user-data": "#cairn-config v1\ncairn.hostname: from-cidata\n"},
		}
		must(t, Run(context.Background(), testOptions(root, r, &console)))
		if b, _ := os.ReadFile(filepath.Join(root, "etc/hostname")); string(b) != "from-iso\n" {
			t.Errorf("hostname %q", b)
		}
		if !strings.Contains(console.String(), "from OVF environment ISO /dev/sr1") {
			t.Errorf("console does not name the source: %s", console.String())
		}
		var isoMounts, umounts int
		for _, c := range r.calls {
			if strings.HasPrefix(c, "mount -o ro,nosuid,nodev,noexec -t iso9660 ") {
				isoMounts++
			}
			if strings.HasPrefix(c, "mount") && strings.Contains(c, "/dev/vdb") {
				t.Error("mounted the CIDATA disk although the ISO had settings")
			}
			if strings.HasPrefix(c, "umount") {
				umounts++
			}
		}
		if isoMounts != 2 || umounts != 2 {
			t.Errorf("want both CD-ROMs mounted read-only and unmounted, calls: %v", r.calls)
		}
	})
	t.Run("guestinfo wins over the ISO", func(t *testing.T) {
		root := newRoot(t)
		g := goodSettings()
		g[contract.KeyHostname] = "from-guestinfo"
		g[contract.KeyMDMMembers] = "from-guestinfo=192.0.2.10,svm-esx02=192.0.2.11,svm-esx03=192.0.2.12"
		r := &fakeRunner{ovfEnv: string(contract.EncodeOVFEnv(g)), isos: map[string]map[string]string{"/dev/sr0": {"ovf-env.xml": env}}}
		must(t, Run(context.Background(), testOptions(root, r, io.Discard)))
		if b, _ := os.ReadFile(filepath.Join(root, "etc/hostname")); string(b) != "from-guestinfo\n" {
			t.Errorf("hostname %q", b)
		}
	})
	t.Run("broken environment on the ISO is refused, nothing configured", func(t *testing.T) {
		root := newRoot(t)
		var console bytes.Buffer
		r := &fakeRunner{isos: map[string]map[string]string{"/dev/sr0": {"ovf-env.xml": `<!DOCTYPE x [<!ENTITY a "b">]><Environment/>`}}}
		err := Run(context.Background(), testOptions(root, r, &console))
		if err == nil || !strings.Contains(err.Error(), "CD-ROM /dev/sr0") {
			t.Fatalf("want a refusal naming the CD-ROM, got %v", err)
		}
		if _, err := os.Stat(filepath.Join(root, EnvFile)); !os.IsNotExist(err) {
			t.Errorf("configured something: %v", listTree(t, root))
		}
	})
	t.Run("a CD-ROM without the file: the next source is used", func(t *testing.T) {
		root := newRoot(t)
		var console bytes.Buffer
		r := &fakeRunner{isos: map[string]map[string]string{"/dev/sr0": {"boot.cat": "x"}}}
		err := Run(context.Background(), testOptions(root, r, &console))
		if !errors.Is(err, contract.ErrNoSettings) || !strings.Contains(err.Error(), "no ovf-env.xml on the CD-ROM(s) /dev/sr0") {
			t.Fatalf("got %v", err)
		}
	})
}
