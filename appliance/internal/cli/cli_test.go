package cli

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cairn-storage/cairn/appliance/internal/etcdtest"
	"github.com/cairn-storage/cairn/appliance/internal/gateway"
	"github.com/cairn-storage/cairn/appliance/internal/model"
	clientv3 "go.etcd.io/etcd/client/v3"
	"golang.org/x/crypto/bcrypt"
)

// Cheap password hashes: the cost of the real ones is the point of them.
func init() {
	model.BcryptCost = bcrypt.MinCost
	model.PasswordHashParams = model.Argon2Params{MemoryKiB: 64, Passes: 1, Lanes: 1}
}

// prober plays the SDSs for device creation.
type prober struct{}

func (prober) PrepareDevice(ctx context.Context, addr, clusterID, deviceID, path string, force bool) (int64, error) {
	if strings.Contains(path, "busy") {
		return 0, fmt.Errorf("%s holds data of cluster 0123456789abcdef: %w", path, model.ErrInUse)
	}
	return 64 << 30, nil
}

// harness: a real etcd and a TLS gateway in this process, and cairnctl
// runs against it with their own config file.
type harness struct {
	t       *testing.T
	url     string
	state   string // gateway state dir: cert.pem, admin-password
	cfgPath string
	etcd    *clientv3.Client
}

func newHarness(t *testing.T, ttl time.Duration, mods ...func(*gateway.Config)) *harness {
	t.Helper()
	return newHarnessOn(t, nil, ttl, mods...)
}

// newHarnessOn serves the gateway on wrap(listener) when wrap is not nil: a
// listener whose connections misbehave.
func newHarnessOn(t *testing.T, wrap func(net.Listener) net.Listener, ttl time.Duration, mods ...func(*gateway.Config)) *harness {
	t.Helper()
	etcd := etcdtest.Start(t)
	h := &harness{t: t, state: t.TempDir(), cfgPath: filepath.Join(t.TempDir(), "conf", "cairnctl.json"), etcd: etcd}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h.url = "https://" + ln.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	cfg := gateway.Config{Etcd: etcd, StateDir: h.state, TLS: true, Devices: prober{},
		TokenTTL: ttl, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	for _, m := range mods {
		m(&cfg)
	}
	served := ln
	if wrap != nil {
		served = wrap(ln)
	}
	go func() { done <- gateway.Serve(ctx, cfg, served) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("gateway: %v", err)
		}
	})
	// Ready once the TLS port answers with the generated certificate.
	deadline := time.Now().Add(20 * time.Second)
	for {
		conn, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{InsecureSkipVerify: true})
		if err == nil {
			conn.Close()
			if _, err := os.Stat(filepath.Join(h.state, gateway.AdminPasswordFile)); err == nil {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("gateway did not come up: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return h
}

// run runs cairnctl with stdin and returns its exit code and output.
func (h *harness) run(stdin string, args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	env := Env{Stdin: strings.NewReader(stdin), Stdout: &out, Stderr: &errb, Getenv: func(k string) string {
		if k == "CAIRNCTL_CONFIG" {
			return h.cfgPath
		}
		return ""
	}}
	done := make(chan int, 1)
	go func() { done <- Main(context.Background(), args, env) }()
	select {
	case code := <-done:
		return code, out.String(), errb.String()
	case <-time.After(60 * time.Second):
		h.t.Fatalf("cairnctl %v did not finish: it blocks", args)
		return 0, "", ""
	}
}

func (h *harness) ok(args ...string) string {
	h.t.Helper()
	code, out, errs := h.run("", args...)
	if code != 0 {
		h.t.Fatalf("cairnctl %s: exit %d: %s%s", strings.Join(args, " "), code, out, errs)
	}
	return out
}

func (h *harness) fails(code int, want string, args ...string) {
	h.t.Helper()
	got, out, errs := h.run("", args...)
	if got != code || !strings.Contains(errs, want) {
		h.t.Errorf("cairnctl %s: exit %d, stderr %q (stdout %q); want exit %d and %q", strings.Join(args, " "), got, errs, out, code, want)
	}
}

func (h *harness) config() Config {
	h.t.Helper()
	c, err := loadConfig(h.cfgPath)
	if err != nil {
		h.t.Fatal(err)
	}
	return *c
}

func (h *harness) login() {
	h.t.Helper()
	h.ok("login", "--url", h.url, "--ca-file", filepath.Join(h.state, "cert.pem"),
		"--user", "admin", "--password-file", filepath.Join(h.state, gateway.AdminPasswordFile))
}

func TestLoginAndConfig(t *testing.T) {
	h := newHarness(t, 0)
	// Without the gateway's certificate the error says what to pass.
	h.fails(1, "pass --ca-file", "login", "--url", h.url, "--password-file", filepath.Join(h.state, gateway.AdminPasswordFile))
	// No password source and stdin is not a terminal: fail at once.
	h.fails(1, "standard input is not a terminal: use --password-file FILE or --password-stdin",
		"login", "--url", h.url, "--ca-file", filepath.Join(h.state, "cert.pem"))
	if _, err := os.Stat(h.cfgPath); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("failed logins wrote a config: %v", err)
	}
	h.login()
	st, err := os.Stat(h.cfgPath)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("config %v %v", st, err)
	}
	c := h.config()
	if c.URL != h.url || c.Token == "" || c.Username != "admin" || !strings.HasSuffix(c.CAFile, "cert.pem") || c.PasswordFile == "" {
		t.Errorf("config %+v", c)
	}
	// The config is found without flags.
	if out := h.ok("user", "ls"); !strings.Contains(out, "admin") || !strings.Contains(out, "ROLE") {
		t.Errorf("user ls: %q", out)
	}
	// Re-login on 401 with the configured password file.
	c.Token = "expired-or-forged"
	if err := saveConfig(h.cfgPath, &c); err != nil {
		t.Fatal(err)
	}
	h.ok("pd", "ls")
	if tok := h.config().Token; tok == "expired-or-forged" || tok == "" {
		t.Errorf("token not renewed: %q", tok)
	}
	// Without a password file a bad token says to log in.
	c = h.config()
	c.Token, c.PasswordFile = "bad", ""
	saveConfig(h.cfgPath, &c)
	h.fails(1, "cairnctl login", "pd", "ls")
	// --password-stdin, and a second user.
	pw, _ := os.ReadFile(filepath.Join(h.state, gateway.AdminPasswordFile))
	if code, out, errs := h.run(string(pw), "login", "--user", "admin", "--password-stdin"); code != 0 {
		t.Fatalf("login --password-stdin: %d %s %s", code, out, errs)
	}
	if code, _, errs := h.run("monitor-pass\n", "user", "create", "mon", "--role", "monitor", "--password-stdin"); code != 0 {
		t.Fatalf("user create: %s", errs)
	}
	if code, _, errs := h.run("monitor-pass\n", "login", "--user", "mon", "--password-stdin"); code != 0 {
		t.Fatalf("login mon: %s", errs)
	}
	if h.config().PasswordFile != "" {
		t.Error("another user's password file kept in the config")
	}
	h.fails(1, "needs role operator or admin", "volume", "rm", "v1")
	h.ok("logout")
	h.fails(1, "not logged in: run `cairnctl login`", "pd", "ls")
	// Usage errors exit 2 and say what is missing.
	h.fails(2, "give a verb", "volume")
	h.fails(2, `unknown verb "frobnicate"`, "volume", "frobnicate")
	h.fails(2, "volume create: give --pool", "volume", "create", "v")
}

func TestVolumeWorkflow(t *testing.T) {
	h := newHarness(t, 0)
	h.login()
	h.ok("system", "bootstrap", "--name", "lab")
	h.ok("pd", "create", "pd1")
	h.ok("faultset", "create", "fs1", "--pd", "pd1")
	h.ok("faultset", "create", "fs2", "--pd", "pd1")
	h.ok("sds", "create", "sds1", "--pd", "pd1", "--fault-set", "fs1", "--address", "127.0.0.1:7201")
	h.ok("sds", "create", "sds2", "--pd", "pd1", "--fault-set", "fs2", "--address", "127.0.0.1:7202")
	h.ok("pool", "create", "p1", "--pd", "pd1")
	h.ok("device", "create", "--sds", "sds1", "--pool", "p1", "--path", "/var/lib/cairn/d1.img")
	h.fails(1, "only 1 fault domain; add devices on another SDS/fault set", "volume", "create", "v1", "--pool", "p1", "--size", "8GiB")
	h.fails(1, "/dev/sdX names change across reboots", "device", "create", "--sds", "sds2", "--pool", "p1", "--path", "/dev/sdc")
	h.fails(1, "holds data of cluster", "device", "create", "--sds", "sds2", "--pool", "p1", "--path", "/dev/disk/by-id/busy")
	h.ok("device", "create", "d2", "--sds", "sds2", "--pool", "p1", "--path", "/dev/sdc", "--force")
	h.fails(1, "not a positive multiple of the allocation unit", "volume", "create", "v1", "--pool", "p1", "--size", "1.5G")
	out := h.ok("volume", "create", "v1", "--pool", "p1", "--size", "8GiB")
	if !strings.Contains(out, "8 GiB") || !strings.Contains(out, "wwn:") {
		t.Errorf("volume create output:\n%s", out)
	}
	h.ok("volume", "create", "v1", "--pool", "p1", "--size", "8G") // a repeat: the same volume
	h.fails(1, `volume "v1" already exists`, "volume", "create", "v1", "--pool", "p1", "--size", "16G")
	h.fails(1, `host "esx1" not found`, "volume", "map", "v1", "--host", "esx1")
	h.ok("host", "create", "esx1", "--type", "iscsi", "--iqn", "iqn.1998-01.com.vmware:esx1-12345678")
	h.ok("volume", "map", "v1", "--host", "esx1")
	out = h.ok("volume", "ls")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "NAME") || !strings.Contains(lines[1], "v1") ||
		!strings.Contains(lines[1], "8 GiB") || !strings.Contains(lines[1], "esx1") || !strings.Contains(lines[1], "thin") {
		t.Errorf("volume ls:\n%s", out)
	}
	var vols []map[string]any
	if err := json.Unmarshal([]byte(h.ok("volume", "ls", "--json")), &vols); err != nil || len(vols) != 1 || vols[0]["name"] != "v1" {
		t.Errorf("volume ls --json: %v %v", vols, err)
	}
	h.ok("volume", "resize", "v1", "--size", "16G")
	out = h.ok("volume", "info", "v1")
	if !strings.Contains(out, "size:") || !strings.Contains(out, "16 GiB (17179869184 bytes)") || !strings.Contains(out, "esx1 (rw)") {
		t.Errorf("volume info:\n%s", out)
	}
	h.fails(1, "unmap it first", "volume", "rm", "v1")
	h.ok("volume", "unmap", "v1", "--host", "esx1")
	h.ok("volume", "rm", "v1")
	h.fails(1, `volume "v1" not found`, "volume", "info", "v1")
	out = h.ok("pool", "ls")
	if !strings.Contains(out, "128 GiB") || !strings.Contains(out, "p1") {
		t.Errorf("pool ls:\n%s", out)
	}
	out = h.ok("system", "info")
	if !strings.Contains(out, "lab (id ") || !strings.Contains(out, "0 of 2 up") || !strings.Contains(out, "health:    down") {
		t.Errorf("system info:\n%s", out)
	}
	for _, o := range []string{"pd", "faultset", "sds", "device", "pool", "host", "user"} {
		if code, _, errs := h.run("", o, "ls"); code != 0 {
			t.Errorf("%s ls: %s", o, errs)
		}
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"8GiB": 8 << 30, "8G": 8 << 30, "8g": 8 << 30, "8GB": 8 << 30, "1.5T": 3 << 39, "512MiB": 512 << 20, "1073741824": 1 << 30, "2 TiB": 2 << 40} {
		got, err := parseSize(in)
		if err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "G", "-1G", "8X", "eight", "1e30T"} {
		if _, err := parseSize(in); err == nil {
			t.Errorf("parseSize(%q) accepted", in)
		}
	}
}
