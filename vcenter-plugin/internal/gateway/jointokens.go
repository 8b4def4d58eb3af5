package gateway

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Join tokens (the gateway's POST /system/join-tokens, admin only): a new
// SVM of a running system spends one at its first boot at the cluster's
// join service for its certificates, one per role the token names. The
// secret is in the creation's answer only; it is good once and expires.

// JoinTokenTTL is the lifetime the engines ask for: an SVM that has not
// booted within it gets a new token from a resumed run.
const JoinTokenTTL = time.Hour

// JoinTokenPrefix starts every join token: cj1.<id>.<secret>.<ca-sha256>.
const JoinTokenPrefix = "cj1."

// CertRoles are the certificate roles a join token may name: the
// appliance's pki.Roles (appliance/internal/pki/pki.go; a test reads that
// file so the two cannot drift apart).
var CertRoles = []string{"mdm", "gateway", "sds", "target", "nbd", "client", "host"}

// JoinToken is the creation's answer. Token is a secret: log ID, never Token.
type JoinToken struct {
	ID      string    `json:"id"` // 16 hex digits, as GET /system/join-tokens lists it
	Token   string    `json:"token"`
	Roles   []string  `json:"roles"`
	Expires time.Time `json:"expires"`
}

// JoinTokenInfo is a token's record as GET /system/join-tokens lists it:
// never its secret.
type JoinTokenInfo struct {
	ID    string   `json:"id"`
	Roles []string `json:"roles"` // the roles not yet spent
	// Name is the node that spent the token's first role ("" while none
	// is spent): a token partly spent was used by a node that booted.
	Name    string    `json:"name,omitempty"`
	Expires time.Time `json:"expires"`
	// Expired is the gateway's own verdict, by its clock.
	Expired   bool      `json:"expired"`
	CreatedBy string    `json:"created_by"`
	Created   time.Time `json:"created"`
}

// JoinTokens creates, lists and revokes join tokens (all admin only). A
// system that runs without certificates answers 409 (*StatusError) to a
// creation: it has no CA a node could join.
type JoinTokens interface {
	// CreateJoinToken creates a one-time token for the pki roles (mdm,
	// gateway, sds, target, ...) a new node will run, good for ttl.
	CreateJoinToken(ctx context.Context, roles []string, ttl time.Duration) (*JoinToken, error)
	// ListJoinTokens lists the tokens not yet spent or revoked, oldest
	// first; expired ones until the gateway prunes them (at the next
	// creation).
	ListJoinTokens(ctx context.Context) ([]JoinTokenInfo, error)
	// RevokeJoinToken revokes a token by its id; one that is not listed
	// (spent, revoked, pruned) is ErrNotFound.
	RevokeJoinToken(ctx context.Context, id string) error
}

func (c *HTTPClient) CreateJoinToken(ctx context.Context, roles []string, ttl time.Duration) (*JoinToken, error) {
	body := struct {
		Roles      []string `json:"roles"`
		TTLSeconds int64    `json:"ttl_seconds,omitempty"`
	}{roles, int64(ttl / time.Second)}
	var out JoinToken
	if err := c.do(ctx, http.MethodPost, "/api/v1/system/join-tokens", body, &out); err != nil {
		return nil, err
	}
	if !strings.HasPrefix(out.Token, JoinTokenPrefix) || out.ID == "" {
		return nil, fmt.Errorf("gateway POST /api/v1/system/join-tokens answered no join token: is the gateway older than this plugin?")
	}
	return &out, nil
}

func (c *HTTPClient) ListJoinTokens(ctx context.Context) ([]JoinTokenInfo, error) {
	var out []JoinTokenInfo
	if err := c.do(ctx, http.MethodGet, "/api/v1/system/join-tokens", nil, &out); err != nil {
		return nil, err
	}
	return out, nil
}

func (c *HTTPClient) RevokeJoinToken(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodDelete, "/api/v1/system/join-tokens/"+esc(id), nil, nil)
}

var _ JoinTokens = (*HTTPClient)(nil)
