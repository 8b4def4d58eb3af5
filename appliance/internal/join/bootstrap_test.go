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
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairn-storage/cairn/appliance/contract"
	"github.com/cairn-storage/cairn/appliance/internal/join"
	"github.com/cairn-storage/cairn/appliance/internal/join/jointest"
	"github.com/cairn-storage/cairn/appliance/internal/model"
	"github.com/cairn-storage/cairn/appliance/internal/pki"
	"github.com/cairn-storage/cairn/appliance/internal/pki/pkitest"
	"github.com/cairn-storage/cairn/appliance/internal/refusals"
)

const bootToken = "deployer-bootstrap-token:4f9a/7c=+~x_y.z-0123"

// bootstrapServer serves the join service of kit's CA in its bootstrap
// window for token, with no etcd at all (a Store without a client: the
// bootstrap path must not touch it), on a clock the test moves.
func bootstrapServer(t *testing.T, kit *pkitest.Kit, token string) (url string, clock *atomic.Int64, rep *refusals.Reporter) {
	t.Helper()
	b, err := join.NewBootstrap(" "+token+"\n", kit.CA)
	if err != nil {
		t.Fatal(err)
	}
	clock = new(atomic.Int64)
	clock.Store(time.Now().UnixNano())
	rep = refusals.New(pki.RoleMDM, "mdm1", slog.New(slog.DiscardHandler))
	url = jointest.Serve(t, &join.Server{CA: kit.CA, Identity: kit.Identity(pki.RoleMDM, "mdm1"), Bootstrap: b,
		Log: slog.New(slog.DiscardHandler), Pause: time.Millisecond, Refusals: rep,
		Now: func() time.Time { return time.Unix(0, clock.Load()) }})
	return url, clock, rep
}

func emptyDir(t *testing.T, dir string) {
	t.Helper()
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("a failed join wrote %v", ents)
	}
}

// TestBootstrapJoin: at a new system's first boot, nodes holding the
// deployer's bootstrap token get certificates of any role from the first
// MDM, with no etcd and no pinned CA, during the window only; a node given
// another system's token is refused, and told.
func TestBootstrapJoin(t *testing.T) {
	kit := pkitest.New(t)
	url, clock, rep := bootstrapServer(t, kit, bootToken)
	ctx := context.Background()

	// The window: BootstrapTokenLifetime from the CA's creation (not from
	// its backdated NotBefore).
	b, _ := join.NewBootstrap(bootToken, kit.CA)
	if left := time.Until(b.Until); left < contract.BootstrapTokenLifetime-time.Minute || left > contract.BootstrapTokenLifetime+time.Second {
		t.Fatalf("the window ends in %s, want about %s", left, contract.BootstrapTokenLifetime)
	}

	for _, r := range []pki.Request{
		{Role: pki.RoleMDM, Name: "svm-2", Hosts: []string{"10.0.0.2", "svm-2.lab"}},
		{Role: pki.RoleSDS, Name: "svm-3"},
		{Role: pki.RoleMDM, Name: "svm-3"}, // the token is the deployer's: any role, any name, several times
	} {
		dir := filepath.Join(t.TempDir(), r.Role)
		cert, err := join.Join(ctx, []string{url}, bootToken+"\n", r, dir)
		if err != nil {
			t.Fatalf("bootstrap join of %s/%s: %v", r.Role, r.Name, err)
		}
		id, err := pki.LoadIdentity(dir)
		if err != nil {
			t.Fatalf("the written directory: %v", err)
		}
		roots := x509.NewCertPool()
		roots.AddCert(kit.CA.Cert)
		if _, err := id.Leaf().Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
			t.Fatalf("the certificate does not verify against the cluster CA: %v", err)
		}
		if !id.CA().Equal(kit.CA.Cert) || !id.Leaf().Equal(cert) || id.Peer() != (pki.Peer{Role: r.Role, Name: r.Name}) ||
			len(id.Leaf().IPAddresses)+len(id.Leaf().DNSNames) != len(r.Hosts) {
			t.Fatalf("joined as %v, CA %v", id.Peer(), pki.InfoOf(id.CA()).Fingerprint)
		}
	}

	// Another system's bootstrap token: refused (403), final, nothing written.
	empty := t.TempDir()
	_, err := join.Join(ctx, []string{url}, "another-systems-token-0123456789", pki.Request{Role: pki.RoleSDS, Name: "x"}, empty)
	wantErr(t, err, "403")
	wantErr(t, err, "bootstrap proof does not verify: this node was given another system's bootstrap token")
	if !join.Final(err) {
		t.Fatalf("a wrong bootstrap token is not final: %v", err)
	}
	emptyDir(t, empty)
	if p := refusals.Pending(rep); len(p) != 1 || p[0].Service != "join service" || strings.Contains(p[0].Reason, bootToken) {
		t.Fatalf("refusals reported: %+v", p)
	}

	// A mistyped join token is reported as one, not sent as a bootstrap proof.
	_, err = join.Join(ctx, []string{url}, "cj1.0123456789abcdef.mistyped", pki.Request{Role: pki.RoleSDS, Name: "x"}, empty)
	wantErr(t, err, "join token: malformed")

	// After the window: refused, with what to do instead.
	clock.Store(b.Until.UnixNano())
	_, err = join.Join(ctx, []string{url}, bootToken, pki.Request{Role: pki.RoleSDS, Name: "x"}, empty)
	wantErr(t, err, "bootstrap join: the window closed at "+b.Until.UTC().Format(time.RFC3339)+": create a join token")
	if !join.Final(err) {
		t.Fatalf("a closed window is not final: %v", err)
	}
	emptyDir(t, empty)

	// A join service started without the bootstrap token (an MDM of a
	// running system) has no window at all.
	f := start(t, kit)
	_, err = join.Join(ctx, []string{f.url}, bootToken, pki.Request{Role: pki.RoleSDS, Name: "x"}, empty)
	wantErr(t, err, "has no bootstrap window")
	emptyDir(t, empty)
}

// TestBootstrapImpostor: a bootstrap join cannot pin a CA, so an impostor
// (a server of another CA, which signs whatever it is sent) is given only a
// proof it cannot use, and its answer, which cannot prove it holds the
// token, is refused: final, nothing written.
func TestBootstrapImpostor(t *testing.T) {
	other := pkitest.New(t)
	var mu sync.Mutex
	var seen []byte
	impostor := func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		seen = b
		mu.Unlock()
		var req join.Request
		json.Unmarshal(b, &req)
		blk, _ := pem.Decode([]byte(req.CSR))
		csr, err := x509.ParseCertificateRequest(blk.Bytes)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		cert, err := other.CA.Sign(pki.Request{Role: req.Role, Name: req.Name, Hosts: req.Hosts}, csr.PublicKey)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		// It cannot compute the proof: it sends none, or a guess.
		proof := ""
		if req.Name == "guess" {
			proof = strings.Repeat("ab", 32)
		}
		json.NewEncoder(w).Encode(join.Answer{Cert: string(cert), CA: string(other.CA.CertPEM()), Proof: proof})
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: http.HandlerFunc(impostor), TLSConfig: other.Identity(pki.RoleMDM, "mdm1").OpenServerTLS()}
	go hs.ServeTLS(ln, "", "")
	t.Cleanup(func() { hs.Close() })

	for _, name := range []string{"svm-2", "guess"} {
		dir := filepath.Join(t.TempDir(), "pki")
		_, err = join.Join(context.Background(), []string{"https://" + ln.Addr().String()}, bootToken, pki.Request{Role: pki.RoleMDM, Name: name}, dir)
		wantErr(t, err, "does not prove it holds this system's bootstrap token")
		if !join.Final(err) {
			t.Fatalf("an impostor is not final: %v", err)
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Fatalf("a join answered by an impostor wrote %s (%v)", dir, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	var req join.Request
	if err := json.Unmarshal(seen, &req); err != nil || req.Proof == "" || req.Token != "" || bytes.Contains(seen, []byte(bootToken)) {
		t.Fatalf("the impostor was sent %s", seen)
	}
}

// TestBootstrapRequestForm: a request carries a join token or a bootstrap
// proof, exactly one (400 otherwise, before anything is checked).
func TestBootstrapRequestForm(t *testing.T) {
	kit := pkitest.New(t)
	url, _, _ := bootstrapServer(t, kit, bootToken)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	der, _ := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{}, key)
	csr := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}))
	tok, _, _ := join.New(pki.InfoOf(kit.CA.Cert).Fingerprint, []string{pki.RoleSDS}, time.Hour, "admin", time.Now())
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	defer hc.CloseIdleConnections()
	for _, c := range []struct {
		req  join.Request
		want string
	}{
		{join.Request{Token: tok.String(), Proof: strings.Repeat("ab", 32), Role: "sds", Name: "x", CSR: csr}, "not both"},
		{join.Request{Role: "sds", Name: "x", CSR: csr}, "give a token (join token) or a proof (bootstrap join)"},
		{join.Request{Proof: "xyz", Role: "sds", Name: "x", CSR: csr}, "64 hex digits"},
	} {
		b, _ := json.Marshal(c.req)
		resp, err := hc.Post(url+join.Path, "application/json", bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		msg, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(msg), c.want) {
			t.Fatalf("%s: %s %s, want 400 %q", b, resp.Status, msg, c.want)
		}
	}
}

// TestBootstrapClosesOnceRedeemed: the bootstrap token is one-time. Once the
// deployer redeemed it at the gateway (the system's admin exists and the
// token is gone from etcd), the join service refuses it although its clock
// window is still open: whoever reads it later from a VM's settings in
// vCenter gets no certificate.
func TestBootstrapClosesOnceRedeemed(t *testing.T) {
	kit := pkitest.New(t)
	f := start(t, kit) // etcd with access control; the join service as mdm1
	b, err := join.NewBootstrap(bootToken, kit.CA)
	if err != nil {
		t.Fatal(err)
	}
	url := jointest.Serve(t, &join.Server{CA: kit.CA, Identity: kit.Identity(pki.RoleMDM, "mdm1"), Bootstrap: b,
		Store: f.store, Log: slog.New(slog.DiscardHandler), Pause: time.Millisecond})
	ctx := context.Background()
	joinAs := func(name string) error {
		_, err := join.Join(ctx, []string{url}, bootToken, pki.Request{Role: pki.RoleSDS, Name: name}, filepath.Join(t.TempDir(), name))
		return err
	}
	if err := joinAs("before-the-gateway"); err != nil {
		t.Fatalf("no admin yet (the gateway has not started): %v", err)
	}
	// The first gateway stores the token, then creates admin; the deployment
	// goes on (other SVMs still booting) until the deployer redeems it.
	ms := model.NewStore(f.etcd)
	if err := ms.PutBootstrapToken(ctx, bootToken, "admin", time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := ms.CreateUser(ctx, model.UserSpec{Name: "admin", Role: model.RoleAdmin, Password: "first-password-0123456789"}); err != nil {
		t.Fatal(err)
	}
	if err := joinAs("while-deploying"); err != nil {
		t.Fatalf("token stored, not redeemed yet: %v", err)
	}
	if _, err := ms.RedeemBootstrapToken(ctx, bootToken, "the-deployers-password-0123"); err != nil {
		t.Fatal(err)
	}
	empty := t.TempDir()
	_, err = join.Join(ctx, []string{url}, bootToken, pki.Request{Role: pki.RoleMDM, Name: "attacker"}, empty)
	wantErr(t, err, "403")
	wantErr(t, err, "the deployer redeemed the bootstrap token")
	if !join.Final(err) {
		t.Fatalf("a redeemed bootstrap token is not final: %v", err)
	}
	emptyDir(t, empty)
}
