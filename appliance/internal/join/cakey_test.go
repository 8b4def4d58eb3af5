package join_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cairn-storage/cairn/appliance/internal/join"
	"github.com/cairn-storage/cairn/appliance/internal/join/jointest"
	"github.com/cairn-storage/cairn/appliance/internal/pki"
	"github.com/cairn-storage/cairn/appliance/internal/pki/pkitest"
	"github.com/cairn-storage/cairn/appliance/internal/porttest"
	"github.com/cairn-storage/cairn/appliance/internal/refusals"
	"github.com/cairn-storage/cairn/appliance/internal/testlog"
)

// caServer is the join service of kit's CA as the MDM mdm1, its log and its
// refusals kept for the test.
func caServer(t *testing.T, kit *pkitest.Kit) (string, *refusals.Reporter, *testlog.Buffer) {
	t.Helper()
	logs := &testlog.Buffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	rep := refusals.New(pki.RoleMDM, "mdm1", log)
	url := jointest.Serve(t, &join.Server{CA: kit.CA, Identity: kit.Identity(pki.RoleMDM, "mdm1"),
		Log: log, Pause: time.Millisecond, Refusals: rep})
	return url, rep, logs
}

// TestFetchCA: an MDM member holding an mdm certificate of the cluster gets
// the CA, certificate and key, into a 0700 directory with the key 0600; the
// copy signs certificates the cluster trusts; fetching again changes
// nothing; the key is not in the service's log.
func TestFetchCA(t *testing.T) {
	kit := pkitest.New(t)
	url, rep, logs := caServer(t, kit)
	member := kit.Dir(pki.RoleMDM, "mdm2")
	caDir := filepath.Join(t.TempDir(), "ca")
	ctx := context.Background()

	// The first service is down: the next one hands the CA.
	dead := deadURL(t)
	ca, fetched, err := join.FetchCA(ctx, []string{dead, url}, member, caDir)
	if err != nil || !fetched {
		t.Fatalf("fetch the CA as mdm/mdm2: fetched %v, %v", fetched, err)
	}
	if !ca.Cert.Equal(kit.CA.Cert) {
		t.Fatal("fetched another CA")
	}
	loaded, err := pki.LoadCA(caDir)
	if err != nil || !loaded.Cert.Equal(kit.CA.Cert) {
		t.Fatalf("the CA directory written: %v", err)
	}
	want, _ := os.ReadFile(filepath.Join(kit.CADir(), pki.CAKeyFile))
	got, _ := os.ReadFile(filepath.Join(caDir, pki.CAKeyFile))
	if !bytes.Equal(got, want) {
		t.Fatal("the fetched ca.key is not the CA's key")
	}
	for f, mode := range map[string]os.FileMode{caDir: 0o700, filepath.Join(caDir, pki.CAKeyFile): 0o600} {
		if st, err := os.Stat(f); err != nil || st.Mode().Perm() != mode {
			t.Fatalf("%s: mode %v (%v), want %o", f, st.Mode().Perm(), err, mode)
		}
	}
	// The copy signs: a certificate it issues is one of the cluster's.
	issued := filepath.Join(t.TempDir(), "sds")
	if err := loaded.IssueTo(issued, pki.Request{Role: pki.RoleSDS, Name: "svm-5"}); err != nil {
		t.Fatal(err)
	}
	sds, err := pki.LoadIdentity(issued)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kit.Identity(pki.RoleMDM, "mdm3").Verify([]*x509.Certificate{sds.Leaf()}); err != nil {
		t.Fatalf("a certificate the copy issued is not trusted by the cluster: %v", err)
	}

	// Idempotent: a directory holding this CA is kept as it is.
	before, _ := os.Stat(filepath.Join(caDir, pki.CAKeyFile))
	_, fetched, err = join.FetchCA(ctx, []string{url}, member, caDir)
	after, _ := os.Stat(filepath.Join(caDir, pki.CAKeyFile))
	if err != nil || fetched || !after.ModTime().Equal(before.ModTime()) {
		t.Fatalf("second fetch: fetched %v, %v", fetched, err)
	}
	if p := refusals.Pending(rep); len(p) != 0 {
		t.Fatalf("refusals for an MDM member: %+v", p)
	}
	keyBody := strings.Split(strings.TrimSpace(string(want)), "\n")[1]
	if l := logs.String(); !strings.Contains(l, "CA handed to an MDM member") || strings.Contains(l, keyBody) || strings.Contains(l, "PRIVATE KEY") {
		t.Fatalf("the service's log lacks the hand-over or holds the key:\n%s", l)
	}
}

// TestFetchCARefused: every caller without a valid mdm certificate of this
// CA gets 403 with what to do, reported as a refusal, and no key: the other
// roles, another cluster's MDM, an expired mdm certificate, no certificate.
func TestFetchCARefused(t *testing.T) {
	kit := pkitest.New(t)
	keyPEM, _ := os.ReadFile(filepath.Join(kit.CADir(), pki.CAKeyFile))
	keyBody := strings.Split(strings.TrimSpace(string(keyPEM)), "\n")[1]
	other := pkitest.New(t)
	expired := filepath.Join(t.TempDir(), "expired")
	if err := kit.CA.IssueTo(expired, pki.Request{Role: pki.RoleMDM, Name: "old", Validity: time.Second}); err != nil {
		t.Fatal(err)
	}
	expiredPair := pairOf(t, expired)
	time.Sleep(time.Until(expiredPair.Leaf.NotAfter) + 1100*time.Millisecond)

	cases := []struct {
		name, peer string
		cert       *tls.Certificate
		why        string
	}{
		{"sds", "sds/svm-2", pairOf(t, kit.Dir(pki.RoleSDS, "svm-2")), `has role "sds"`},
		{"gateway", "gateway/svm-1", pairOf(t, kit.Dir(pki.RoleGateway, "svm-1")), `has role "gateway"`},
		{"target", "target/svm-3", pairOf(t, kit.Dir(pki.RoleTarget, "svm-3")), `has role "target"`},
		{"nbd", "nbd/kvm1", pairOf(t, kit.Dir(pki.RoleNBD, "kvm1")), `has role "nbd"`},
		{"another cluster's MDM", "mdm/mdm1", pairOf(t, other.Dir(pki.RoleMDM, "mdm1")), "not issued by this cluster's CA"},
		{"an expired mdm certificate", "mdm/old", expiredPair, "expired"},
		{"no certificate", "", nil, "presenting its mdm certificate"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			url, rep, logs := caServer(t, kit)
			cfg := &tls.Config{InsecureSkipVerify: true} // the caller here is the attacker: it trusts anything
			if c.cert != nil {
				cfg.Certificates = []tls.Certificate{*c.cert}
			}
			hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}
			defer hc.CloseIdleConnections()
			resp, err := hc.Post(url+join.CAPath, "application/json", strings.NewReader("{}"))
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), c.why) ||
				!strings.Contains(string(body), "join token") && !strings.Contains(string(body), "mdm certificate") {
				t.Fatalf("%s: %s %s", c.name, resp.Status, body)
			}
			if strings.Contains(string(body), keyBody) || strings.Contains(string(body), "PRIVATE KEY") {
				t.Fatal("a refusal carries the key")
			}
			p := refusals.Pending(rep)
			if len(p) != 1 || p[0].Service != "join service" || p[0].Peer != c.peer || !strings.Contains(p[0].Reason, c.why) {
				t.Fatalf("refusal reported: %+v", p)
			}
			if strings.Contains(logs.String(), keyBody) {
				t.Fatal("the log holds the key")
			}
		})
	}

	// The product's client refuses first, before sending anything, where it
	// can: a PKI directory of another role, or of another cluster (the
	// service does not hold its CA).
	url, _, _ := caServer(t, kit)
	caDir := filepath.Join(t.TempDir(), "ca")
	_, _, err := join.FetchCA(context.Background(), []string{url}, kit.Dir(pki.RoleGateway, "svm-1"), caDir)
	wantErr(t, err, "only an MDM member keeps the CA")
	_, _, err = join.FetchCA(context.Background(), []string{url}, other.Dir(pki.RoleMDM, "mdm9"), caDir)
	if err == nil || !join.Final(err) {
		t.Fatalf("fetch from another cluster's service: %v", err)
	}
	if _, err := os.Stat(caDir); !os.IsNotExist(err) {
		t.Fatalf("a refused fetch wrote %s (%v)", caDir, err)
	}
}

// TestFetchCAKeepsAnotherCA: a CA directory holding another CA is neither
// replaced nor used: the error says to move it away.
func TestFetchCAKeepsAnotherCA(t *testing.T) {
	kit := pkitest.New(t)
	url, _, _ := caServer(t, kit)
	other := pkitest.New(t)
	before, _ := os.ReadFile(filepath.Join(other.CADir(), pki.CAKeyFile))
	_, _, err := join.FetchCA(context.Background(), []string{url}, kit.Dir(pki.RoleMDM, "mdm2"), other.CADir())
	wantErr(t, err, "holds another CA")
	if after, _ := os.ReadFile(filepath.Join(other.CADir(), pki.CAKeyFile)); !bytes.Equal(after, before) {
		t.Fatal("the other CA was replaced")
	}
}

func pairOf(t *testing.T, dir string) *tls.Certificate {
	t.Helper()
	pair, err := tls.LoadX509KeyPair(filepath.Join(dir, pki.NodeCertFile), filepath.Join(dir, pki.NodeKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	return &pair
}

// deadURL is a loopback address where nothing listens.
func deadURL(t *testing.T) string {
	t.Helper()
	return "https://" + porttest.Addr(t)
}
