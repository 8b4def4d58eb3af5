package join

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/sha256"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/cairn-storage/cairn/appliance/contract"
	"github.com/cairn-storage/cairn/appliance/internal/model"
	"github.com/cairn-storage/cairn/appliance/internal/pki"
	"github.com/cairn-storage/cairn/appliance/internal/refusals"
)

// Path is the join service's one route.
const Path = "/v1/join"

// maxRequest bounds a request body: a token or a proof, a name, 16 host
// names and a P-256 CSR take under 4 KiB.
const maxRequest = 16 << 10

// maxHosts bounds the addresses and names a certificate is issued for.
const maxHosts = 16

// Request is what a joining node sends: a join token, or at a new system's
// first boot the proof that it holds the bootstrap token (bootstrap.go).
type Request struct {
	Token string   `json:"token,omitempty"`
	Proof string   `json:"proof,omitempty"` // 64 hex digits
	Role  string   `json:"role"`
	Name  string   `json:"name"`
	Hosts []string `json:"hosts,omitempty"`
	CSR   string   `json:"csr"` // PEM "CERTIFICATE REQUEST", ECDSA P-256
}

// Answer is the service's reply: the node's certificate and the CA's (PEM);
// to a bootstrap request, the proof that the service holds the bootstrap
// token too, over both.
type Answer struct {
	Cert  string `json:"cert"`
	CA    string `json:"ca"`
	Proof string `json:"proof,omitempty"`
}

// parsed is a request that passed every check that needs no etcd: it has
// either a token (token.ID set) or a proof of the right form (bootstrap).
type parsed struct {
	req       Request
	token     Token
	bootstrap bool
	csr       *x509.CertificateRequest
}

// decode checks a request body without trusting any of it. Its errors never
// echo the token.
func decode(b []byte) (parsed, error) {
	var p parsed
	if len(b) > maxRequest {
		return p, fmt.Errorf("request larger than %d bytes", maxRequest)
	}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p.req); err != nil {
		return p, errors.New("request: malformed JSON; send {token or proof, role, name, hosts, csr}")
	}
	if dec.More() {
		return p, errors.New("request: one JSON object only")
	}
	var err error
	switch {
	case p.req.Token != "" && p.req.Proof != "":
		return p, errors.New("request: give a token (join token) or a proof (bootstrap join), not both")
	case p.req.Proof != "":
		if len(p.req.Proof) != 2*sha256.Size || !isHexString(p.req.Proof) {
			return p, errors.New("request: the proof must be 64 hex digits (HMAC-SHA256)")
		}
		p.bootstrap = true
	case p.req.Token != "":
		if p.token, err = Parse(p.req.Token); err != nil {
			return p, err
		}
	default:
		return p, errors.New("request: give a token (join token) or a proof (bootstrap join)")
	}
	if !pki.ValidRole(p.req.Role) {
		return p, fmt.Errorf("role %q: give one of %s", contract.Clip(p.req.Role), strings.Join(pki.Roles, ", "))
	}
	if len(p.req.Hosts) > maxHosts {
		return p, fmt.Errorf("give at most %d hosts", maxHosts)
	}
	for _, h := range p.req.Hosts {
		if net.ParseIP(h) == nil && !validDNSName(h) {
			return p, fmt.Errorf("host %q is neither an IP address nor a DNS name", contract.Clip(h))
		}
	}
	p.csr, err = parseCSR(p.req.CSR)
	return p, err
}

// parseCSR accepts one PEM certificate request whose signature verifies,
// for an ECDSA P-256 key.
func parseCSR(s string) (*x509.CertificateRequest, error) {
	blk, rest := pem.Decode([]byte(s))
	if blk == nil || blk.Type != "CERTIFICATE REQUEST" || strings.TrimSpace(string(rest)) != "" {
		return nil, errors.New("csr: give one PEM \"CERTIFICATE REQUEST\"")
	}
	csr, err := x509.ParseCertificateRequest(blk.Bytes)
	if err != nil {
		return nil, fmt.Errorf("csr: %v", err)
	}
	if err := csr.CheckSignature(); err != nil {
		return nil, fmt.Errorf("csr: its signature does not verify: %v", err)
	}
	if k, ok := csr.PublicKey.(*ecdsa.PublicKey); !ok || k.Curve != elliptic.P256() {
		return nil, errors.New("csr: the key must be ECDSA P-256, as every Cairn node's")
	}
	return csr, nil
}

// validDNSName accepts a host name of RFC 1123 labels, in any case (the
// certificate carries it in lower case: pki.CA.Sign).
func validDNSName(h string) bool {
	if h == "" || len(h) > 253 {
		return false
	}
	for _, label := range strings.Split(h, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return true
}

// Server is the join service. It runs where the CA's key is: on every MDM
// member (cakey.go).
type Server struct {
	CA       *pki.CA
	Identity *pki.Identity // the MDM's: presented, with the CA, to joining nodes
	Store    Store
	Log      *slog.Logger
	// Refusals hands each refusal to the gateways as a security event
	// (nil: only logged).
	Refusals *refusals.Reporter
	// Bootstrap, when set, also accepts bootstrap joins (bootstrap.go) until
	// its window ends; they never touch Store (etcd may not exist yet).
	Bootstrap *Bootstrap
	Now       func() time.Time // time.Now when nil
	// Pause follows every refusal, one refusal at a time (default 1 s):
	// guessing a 256-bit secret is hopeless anyway, and a flood of bad
	// requests costs the MDM one goroutine's sleep, not its CPU.
	Pause time.Duration

	refusing sync.Mutex
}

func (s *Server) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// ServeHTTP answers POST Path, RenewPath and CAPath.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == RenewPath && r.Method == http.MethodPost {
		s.renew(w, r)
		return
	}
	if r.URL.Path == CAPath && r.Method == http.MethodPost {
		s.handToMDM(w, r)
		return
	}
	if r.URL.Path != Path {
		http.Error(w, "not found: the join service answers POST "+Path+", "+RenewPath+" and "+CAPath, http.StatusNotFound)
		return
	}
	if r.Method != http.MethodPost {
		http.Error(w, "use POST", http.StatusMethodNotAllowed)
		return
	}
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRequest))
	if err != nil {
		s.refuse(w, r, http.StatusRequestEntityTooLarge, "", fmt.Errorf("request larger than %d bytes", maxRequest))
		return
	}
	p, err := decode(b)
	if err != nil {
		s.refuse(w, r, http.StatusBadRequest, p.token.ID, err)
		return
	}
	tokenID, createdBy := "bootstrap", "the deployer"
	if p.bootstrap {
		if err := s.checkProof(r.Context(), p); err != nil {
			s.refuse(w, r, http.StatusForbidden, tokenID, err)
			return
		}
	} else {
		rec, err := s.Store.Spend(r.Context(), p.token, p.req.Role, p.req.Name, s.now())
		if err != nil {
			code := http.StatusForbidden
			if !Refused(err) {
				code = http.StatusServiceUnavailable
			}
			s.refuse(w, r, code, p.token.ID, err)
			return
		}
		tokenID, createdBy = rec.ID, rec.CreatedBy
	}
	certPEM, err := s.CA.Sign(pki.Request{Role: p.req.Role, Name: p.req.Name, Hosts: p.req.Hosts}, p.csr.PublicKey)
	if err != nil {
		if !p.bootstrap {
			// The token is spent: a name the CA refuses needs a new one,
			// as the error says.
			err = fmt.Errorf("%v (the token is spent: create a new one)", err)
		}
		s.refuse(w, r, http.StatusBadRequest, tokenID, err)
		return
	}
	a := Answer{Cert: string(certPEM), CA: string(s.CA.CertPEM())}
	if p.bootstrap {
		blk, _ := pem.Decode(certPEM)
		a.Proof = answerProof(s.Bootstrap.Token, s.CA.Cert.Raw, blk.Bytes)
	}
	s.Log.Info("join: certificate issued", "peer", p.req.Role+"/"+p.req.Name, "token", tokenID,
		"created_by", createdBy, "from", r.RemoteAddr)
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(a)
}

// checkProof accepts a bootstrap request only inside the window and only if
// its proof is the bootstrap token's. Any role and name are allowed: the
// token is the deployer's own.
func (s *Server) checkProof(ctx context.Context, p parsed) error {
	const next = "create a join token (`cairnctl join-token create`) and give it to this node"
	b := s.Bootstrap
	if b == nil {
		return errors.New("bootstrap join: this join service has no bootstrap window (only the first MDM of a new system opens one): " + next)
	}
	if !s.now().Before(b.Until) {
		return fmt.Errorf("bootstrap join: the window closed at %s: %s", b.Until.UTC().Format(time.RFC3339), next)
	}
	if !proofOK(p.req.Proof, requestProof(b.Token, p.req.Role, p.req.Name, p.req.Hosts, p.csr.Raw)) {
		return errors.New("bootstrap proof does not verify: this node was given another system's bootstrap token; give it this system's, or a join token")
	}
	// One-time: once the deployer redeemed the token at the gateway (it set
	// the admin password: the deployment is done), the window is closed
	// whatever its clock says. Before etcd answers (the MDMs forming their
	// quorum, which needs these very certificates) only the clock closes it.
	if s.Store.Etcd != nil {
		cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		done, err := model.BootstrapRedeemed(cctx, s.Store.Etcd, b.Token)
		cancel()
		if err == nil && done {
			return errors.New("bootstrap join: the deployer redeemed the bootstrap token (the system is deployed): " + next)
		}
	}
	return nil
}

func (s *Server) refuse(w http.ResponseWriter, r *http.Request, code int, tokenID string, err error) {
	s.refusePeer(w, r, code, tokenID, "", err)
}

// refusePeer is refuse for a caller whose certificate claims to be peer
// (role/name, not verified: shown to the administrators as claimed).
func (s *Server) refusePeer(w http.ResponseWriter, r *http.Request, code int, tokenID, peer string, err error) {
	s.Log.Warn("join: refused", "from", r.RemoteAddr, "token", tokenID, "peer", peer, "err", err)
	s.Refusals.Refused("join service", r.RemoteAddr, peer, err.Error())
	s.refusing.Lock()
	pause := s.Pause
	if pause == 0 {
		pause = time.Second
	}
	time.Sleep(pause)
	s.refusing.Unlock()
	http.Error(w, err.Error(), code)
}

// Serve runs the service on ln until ctx ends.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	hs := &http.Server{Handler: s, TLSConfig: s.Identity.OpenServerTLS(),
		ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second, WriteTimeout: 30 * time.Second,
		MaxHeaderBytes: 8 << 10, ErrorLog: slog.NewLogLogger(s.Log.Handler(), slog.LevelDebug)}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		hs.Shutdown(sctx)
	}()
	err := hs.ServeTLS(ln, "", "")
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}
