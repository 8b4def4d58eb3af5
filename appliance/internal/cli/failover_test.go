package cli

import (
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cairn-storage/cairn/appliance/internal/etcdtest"
	"github.com/cairn-storage/cairn/appliance/internal/gateway"
)

// startGateway serves a real gateway on etcd until stop is called; it returns its URL
// and state directory.
func startGateway(t *testing.T, etcd *clientv3.Client) (url, state string, stop func()) {
	t.Helper()
	state = t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- gateway.Serve(ctx, gateway.Config{Etcd: etcd, StateDir: state, TLS: true, Devices: prober{},
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, ln)
	}()
	stopped := false
	stop = func() {
		if !stopped {
			stopped = true
			cancel()
			if err := <-done; err != nil {
				t.Errorf("gateway: %v", err)
			}
		}
	}
	t.Cleanup(stop)
	deadline := time.Now().Add(20 * time.Second)
	for {
		conn, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{InsecureSkipVerify: true})
		if err == nil {
			conn.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("gateway did not come up: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return "https://" + ln.Addr().String(), state, stop
}

// Two gateways of one system: cairnctl logs in with both, and keeps working when the
// one it uses stops (its host being patched), and when it comes back the other way.
func TestGatewayFailover(t *testing.T) {
	etcd := etcdtest.Start(t)
	urlA, stateA, stopA := startGateway(t, etcd)
	urlB, stateB, stopB := startGateway(t, etcd)
	var pwFile string
	for _, st := range []string{stateA, stateB} {
		if p := filepath.Join(st, gateway.AdminPasswordFile); fileExists(p) {
			pwFile = p // the first gateway to start created admin
		}
	}
	bundle := filepath.Join(t.TempDir(), "gateways.pem")
	a, _ := os.ReadFile(filepath.Join(stateA, "cert.pem"))
	b, _ := os.ReadFile(filepath.Join(stateB, "cert.pem"))
	if err := os.WriteFile(bundle, append(a, b...), 0o600); err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, cfgPath: filepath.Join(t.TempDir(), "cairnctl.json")}
	h.ok("login", "--url", urlA+","+urlB, "--ca-file", bundle, "--user", "admin", "--password-file", pwFile)
	if c := h.config(); c.URL != urlA+","+urlB {
		t.Fatalf("config url %q, want both gateways", c.URL)
	}
	h.ok("pd", "create", "pd1")
	stopA()
	out := h.ok("pd", "ls")
	if !strings.Contains(out, "pd1") {
		t.Fatalf("pd ls through the second gateway: %s", out)
	}
	h.ok("pd", "create", "pd2") // a change, too: the connection to A is refused, so it never arrived there
	stopB()
	h.fails(1, "cannot reach the gateway", "pd", "ls")
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }
