package join_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cairn-storage/cairn/appliance/internal/join"
	"github.com/cairn-storage/cairn/appliance/internal/join/jointest"
	"github.com/cairn-storage/cairn/appliance/internal/pki"
	"github.com/cairn-storage/cairn/appliance/internal/pki/pkitest"
)

func renewServer(t *testing.T, kit *pkitest.Kit) string {
	t.Helper()
	return jointest.Serve(t, &join.Server{CA: kit.CA, Identity: kit.Identity(pki.RoleMDM, "mdm1"),
		Log: slog.New(slog.DiscardHandler), Pause: time.Millisecond})
}

// TestRenew: a node with a valid certificate gets a new one for a new key,
// with exactly its role, name and hosts, from the join service, without a
// token; its daemon reloads the directory it was written to.
func TestRenew(t *testing.T) {
	kit := pkitest.New(t)
	url := renewServer(t, kit)
	dir := kit.Dir(pki.RoleSDS, "svm-2", "10.0.0.2", "svm-2.lab")
	running, err := pki.LoadIdentity(dir) // the daemon's
	if err != nil {
		t.Fatal(err)
	}
	old := running.Leaf()
	oldKey, _ := os.ReadFile(filepath.Join(dir, pki.NodeKeyFile))

	cert, err := join.Renew(context.Background(), []string{url}, dir)
	if err != nil {
		t.Fatalf("renew: %v", err)
	}
	id, err := pki.LoadIdentity(dir)
	if err != nil {
		t.Fatalf("the renewed directory: %v", err)
	}
	newKey, _ := os.ReadFile(filepath.Join(dir, pki.NodeKeyFile))
	if !id.Leaf().Equal(cert) || id.Leaf().SerialNumber.Cmp(old.SerialNumber) == 0 || string(newKey) == string(oldKey) {
		t.Fatal("the directory does not hold a new certificate for a new key")
	}
	if id.Peer() != (pki.Peer{Role: pki.RoleSDS, Name: "svm-2"}) || !slices.Equal(id.Leaf().DNSNames, old.DNSNames) ||
		len(id.Leaf().IPAddresses) != 1 || !id.Leaf().IPAddresses[0].Equal(old.IPAddresses[0]) {
		t.Fatalf("renewed as %v hosts %v %v, want sds/svm-2 with the old hosts", id.Peer(), id.Leaf().IPAddresses, id.Leaf().DNSNames)
	}
	if st, _ := os.Stat(filepath.Join(dir, pki.NodeKeyFile)); st.Mode().Perm() != 0o600 {
		t.Fatalf("node.key mode %o", st.Mode().Perm())
	}
	if err := running.Reload(); err != nil || !running.Leaf().Equal(cert) {
		t.Fatalf("the running daemon's reload: %v", err)
	}
}

// TestRenewRefused: only a valid certificate of this cluster renews; the
// node's directory stays as it was when refused, and an impostor service
// (another CA) is not sent anything it could use.
func TestRenewRefused(t *testing.T) {
	kit := pkitest.New(t)
	url := renewServer(t, kit)
	ctx := context.Background()

	// Another cluster's certificate.
	other := pkitest.New(t)
	foreign := other.Dir(pki.RoleSDS, "x")
	before, _ := os.ReadFile(filepath.Join(foreign, pki.NodeCertFile))
	_, err := join.Renew(ctx, []string{url}, foreign)
	// The client refuses first: the service does not hold the directory's CA.
	if err == nil || !join.Final(err) {
		t.Fatalf("renewal at another cluster's service: %v", err)
	}
	if after, _ := os.ReadFile(filepath.Join(foreign, pki.NodeCertFile)); string(after) != string(before) {
		t.Fatal("a refused renewal changed the directory")
	}

	// An expired certificate of this cluster: join again with a token.
	expired := filepath.Join(t.TempDir(), "expired")
	if err := kit.CA.IssueTo(expired, pki.Request{Role: pki.RoleSDS, Name: "old", Validity: time.Second}); err != nil {
		t.Fatal(err)
	}
	pair, err := tls.LoadX509KeyPair(filepath.Join(expired, pki.NodeCertFile), filepath.Join(expired, pki.NodeKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Until(pair.Leaf.NotAfter) + 1100*time.Millisecond)
	// The node's own tools refuse to use it...
	_, err = join.Renew(ctx, []string{url}, expired)
	wantErr(t, err, "expired")
	// ...and the service refuses it from anyone who presents it anyway.
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true, Certificates: []tls.Certificate{pair}}}}
	for _, c := range []*http.Client{hc, {Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}} {
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		der, _ := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{}, key)
		body, _ := json.Marshal(join.RenewRequest{CSR: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}))})
		resp, err := c.Post(url+join.RenewPath, "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		msg, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(msg), "join with a join token") && !strings.Contains(string(msg), "join again with a join token") {
			t.Fatalf("renewal with an expired or no certificate: %s %s", resp.Status, msg)
		}
	}
}

func TestRenewDue(t *testing.T) {
	now := time.Now()
	c := &x509.Certificate{NotBefore: now.Add(-200 * 24 * time.Hour), NotAfter: now.Add(165 * 24 * time.Hour)}
	if join.RenewDue(c, now) {
		t.Fatal("due with 165 of 365 days left")
	}
	if !join.RenewDue(c, now.Add(50*24*time.Hour)) {
		t.Fatal("not due with 115 of 365 days left")
	}
}

// TestKeep: the appliance's renewal loop renews each certificate of its
// PKI base that is due, and only those.
func TestKeep(t *testing.T) {
	kit := pkitest.New(t)
	url := renewServer(t, kit)
	base := t.TempDir()
	due, fresh := filepath.Join(base, "sds"), filepath.Join(base, "target")
	// Issued for two minutes (plus the five-minute backdate every certificate carries): in
	// the last third of its life at once.
	if err := kit.CA.IssueTo(due, pki.Request{Role: pki.RoleSDS, Name: "svm-3", Validity: 2 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	if err := kit.CA.IssueTo(fresh, pki.Request{Role: pki.RoleTarget, Name: "svm-3"}); err != nil {
		t.Fatal(err)
	}
	dueSerial, freshSerial := serialOf(t, due), serialOf(t, fresh)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		join.Keep(ctx, base, []string{url}, nil, time.Hour, slog.New(slog.DiscardHandler))
		close(done)
	}()
	defer func() { cancel(); <-done }()
	deadline := time.Now().Add(10 * time.Second)
	for serialOf(t, due) == dueSerial {
		if time.Now().After(deadline) {
			t.Fatal("the due certificate was not renewed")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if serialOf(t, fresh) != freshSerial {
		t.Fatal("a certificate not due was renewed")
	}
}

func serialOf(t *testing.T, dir string) string {
	t.Helper()
	id, err := pki.LoadIdentity(dir)
	if err != nil {
		t.Fatal(err)
	}
	return id.Leaf().SerialNumber.String()
}
