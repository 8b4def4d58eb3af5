package join

// Bootstrap joins: a new system's very first boot. The first MDM creates the
// CA; the other initial SVMs cannot pin it (no fingerprint exists before it)
// and no cj1 token can be stored or spent (etcd forms its quorum only once
// the MDMs have their certificates). What they share is the deployer's
// one-time bootstrap token (contract.KeyJoinToken), and the token never
// travels: each side proves it holds it with an HMAC-SHA256 keyed with it.
//
//	request proof = HMAC(token, "cairn-join-bootstrap-request" 0x00 ‖ F(role) ‖ F(name) ‖ F(hosts joined by ",") ‖ F(CSR DER))
//	answer proof  = HMAC(token, "cairn-join-bootstrap-answer" 0x00 ‖ F(CA DER) ‖ F(certificate DER))
//
// F(x) is x's length (8 bytes, big-endian) then x, so no two requests give
// one message. Both are sent as 64 hex digits. The request's proof binds
// the CSR, hence the node's public key: a service that is an impostor, or
// anyone who replays the request, gets at best a certificate for a key it
// does not hold. The answer's proof binds the CA the node then trusts: an
// impostor, which does not know the token, cannot make one.

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"strings"
	"time"

	"github.com/cairn-storage/cairn/appliance/contract"
	"github.com/cairn-storage/cairn/appliance/internal/pki"
)

// Bootstrap is the join service's bootstrap window: until Until it signs
// the CSR of any role and name whose request proves it holds Token.
type Bootstrap struct {
	Token string    // the deployer's bootstrap token: a secret, never logged
	Until time.Time // proofs are refused from then on
}

// NewBootstrap is the window of a new system's bootstrap token: from the
// creation of ca (read from its certificate, so a copied or restored CA
// directory does not reopen it) to contract.BootstrapTokenLifetime later.
func NewBootstrap(token string, ca *pki.CA) (*Bootstrap, error) {
	token = strings.TrimSpace(token)
	if !contract.ValidBootstrapToken(token) {
		return nil, errors.New("bootstrap token: malformed (16-512 characters from A-Z a-z 0-9 . _ ~ + / = : -)")
	}
	return &Bootstrap{Token: token, Until: ca.Created().Add(contract.BootstrapTokenLifetime)}, nil
}

// isBootstrapToken reports whether s (trimmed) is a bootstrap token rather
// than a join token. Anything that begins like a join token is one (a
// mistyped join token must be reported as such, not sent as a proof).
func isBootstrapToken(s string) bool {
	return !contract.IsJoinToken(s) && contract.ValidBootstrapToken(s)
}

const (
	requestDomain = "cairn-join-bootstrap-request"
	answerDomain  = "cairn-join-bootstrap-answer"
)

func requestProof(token, role, name string, hosts []string, csrDER []byte) string {
	return mac(token, requestDomain, []byte(role), []byte(name), []byte(strings.Join(hosts, ",")), csrDER)
}

func answerProof(token string, caDER, certDER []byte) string {
	return mac(token, answerDomain, caDER, certDER)
}

func mac(token, domain string, fields ...[]byte) string {
	m := hmac.New(sha256.New, []byte(token))
	m.Write([]byte(domain))
	m.Write([]byte{0})
	for _, f := range fields {
		m.Write(binary.BigEndian.AppendUint64(nil, uint64(len(f))))
		m.Write(f)
	}
	return hex.EncodeToString(m.Sum(nil))
}

// proofOK compares a proof received with the one expected, in constant time.
func proofOK(got, want string) bool {
	g, err := hex.DecodeString(got)
	w, _ := hex.DecodeString(want)
	return err == nil && hmac.Equal(g, w)
}
