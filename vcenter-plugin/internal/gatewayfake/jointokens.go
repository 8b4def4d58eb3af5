package gatewayfake

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/cairn-storage/cairn/vcenter-plugin/internal/gateway"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/vcsimkit"
)

// Join tokens as the gateway and the MDM's join service keep them: created
// for 1 to 7 distinct certificate roles (gateway.CertRoles) and a lifetime
// of a minute to a week (default an hour), refused with 409 when the system
// runs without certificates (WithoutPKI); spent by the first boot of the
// SVM whose vApp property carries one. An SVM whose token the join service
// refuses (unknown, spent by another SVM, expired) does not come up, as its
// first boot stops without certificates.

// JoinTokenRecord is what the fake keeps of a token, for tests: never the
// secret, as etcd.
type JoinTokenRecord struct {
	ID      string
	Roles   []string
	Expires time.Time
	// SpentBy is the SVM host name (cairn.hostname) that spent the token.
	SpentBy string
	hash    string
	created time.Time
}

// caFingerprint stands for the cluster CA's SHA-256, the token's last part.
var caFingerprint = strings.Repeat("ca", 32)

func (a *Array) CreateJoinToken(ctx context.Context, roles []string, ttl time.Duration) (*gateway.JoinToken, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := a.call("CreateJoinToken", strings.Join(roles, ",")); err != nil {
		return nil, err
	}
	const path = "/api/v1/system/join-tokens"
	if a.WithoutPKI {
		return nil, &gateway.StatusError{Method: "POST", Path: path, Status: http.StatusConflict,
			Message: "this system runs without certificates (its daemons have no --pki): there is no CA to join; issue certificates by hand with `cairn pki issue`"}
	}
	if len(roles) == 0 || len(roles) > len(gateway.CertRoles) {
		return nil, &gateway.StatusError{Method: "POST", Path: path, Status: http.StatusBadRequest,
			Message: fmt.Sprintf("join token roles: give 1-%d of %s", len(gateway.CertRoles), strings.Join(gateway.CertRoles, ", "))}
	}
	for i, r := range roles {
		if !slices.Contains(gateway.CertRoles, r) || slices.Contains(roles[:i], r) {
			return nil, &gateway.StatusError{Method: "POST", Path: path, Status: http.StatusBadRequest,
				Message: fmt.Sprintf("join token role %q: give each of %s at most once", r, strings.Join(gateway.CertRoles, ", "))}
		}
	}
	if ttl == 0 {
		ttl = time.Hour
	}
	if ttl < time.Minute || ttl > 7*24*time.Hour {
		return nil, &gateway.StatusError{Method: "POST", Path: path, Status: http.StatusBadRequest,
			Message: fmt.Sprintf("join token lifetime %s: give 1m0s to 168h0m0s", ttl)}
	}
	var id [8]byte
	var secret [32]byte
	_, _ = rand.Read(id[:])
	_, _ = rand.Read(secret[:])
	now := a.now()
	rec := &JoinTokenRecord{ID: hex.EncodeToString(id[:]), Roles: slices.Clone(roles), Expires: now.Add(ttl).UTC(), created: now.UTC()}
	sec := base64.RawURLEncoding.EncodeToString(secret[:])
	rec.hash = hashOf(sec)
	if a.joinTokens == nil {
		a.joinTokens = map[string]*JoinTokenRecord{}
	}
	a.joinTokens[rec.ID] = rec
	return &gateway.JoinToken{ID: rec.ID, Token: gateway.JoinTokenPrefix + rec.ID + "." + sec + "." + caFingerprint,
		Roles: slices.Clone(roles), Expires: rec.Expires}, nil
}

// ListJoinTokens lists the tokens not yet spent or revoked, oldest first,
// as the gateway does: expired ones too (by the array's clock), never a
// secret. The fake spends a token whole (the real join service one role at
// a time), so a listed token is never partly spent.
func (a *Array) ListJoinTokens(ctx context.Context) ([]gateway.JoinTokenInfo, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := a.call("ListJoinTokens", ""); err != nil {
		return nil, err
	}
	now := a.now()
	out := []gateway.JoinTokenInfo{}
	for _, r := range a.joinTokens {
		if r.SpentBy == "" {
			out = append(out, gateway.JoinTokenInfo{ID: r.ID, Roles: slices.Clone(r.Roles), Expires: r.Expires,
				Expired: !now.Before(r.Expires), CreatedBy: "admin", Created: r.created})
		}
	}
	slices.SortFunc(out, func(x, y gateway.JoinTokenInfo) int { return x.Created.Compare(y.Created) })
	return out, nil
}

// RevokeJoinToken deletes a token not yet spent, as the gateway deletes its
// record: it is gone from JoinTokens too. One spent or unknown is a 404.
func (a *Array) RevokeJoinToken(ctx context.Context, id string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := a.call("RevokeJoinToken", id); err != nil {
		return err
	}
	if r, ok := a.joinTokens[id]; !ok || r.SpentBy != "" {
		return &gateway.StatusError{Method: "DELETE", Path: "/api/v1/system/join-tokens/" + id, Status: http.StatusNotFound,
			Message: fmt.Sprintf("join token %s not found: spent, revoked, or pruned after it expired", id)}
	}
	delete(a.joinTokens, id)
	return nil
}

// JoinTokens returns the tokens created, spent or not (revoked ones are
// gone), by id.
func (a *Array) JoinTokens() map[string]JoinTokenRecord {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := map[string]JoinTokenRecord{}
	for id, r := range a.joinTokens {
		out[id] = *r
	}
	return out
}

func hashOf(secret string) string {
	s := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(s[:])
}

// join is the first boot of svm at the join service: an SVM whose
// join_token property is a join token spends it, once; a later boot of the
// same SVM has its certificates and sends nothing.
func (a *Array) join(svm vcsimkit.SVM) error {
	tok := svm.Properties["cairn.cluster.join_token"]
	if !strings.HasPrefix(tok, gateway.JoinTokenPrefix) {
		return nil // the deployment's bootstrap token, or none
	}
	name := svm.Properties["cairn.hostname"]
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.joined[svm.MoRef] {
		return nil
	}
	p := strings.Split(tok, ".")
	var rec *JoinTokenRecord
	if len(p) == 4 {
		rec = a.joinTokens[p[1]]
	}
	switch {
	case rec == nil || rec.hash != hashOf(p[2]) || p[3] != caFingerprint:
		return fmt.Errorf("%s: join token refused: unknown, already used or revoked", name)
	case rec.SpentBy != "":
		return fmt.Errorf("%s: join token %s was spent by %s", name, rec.ID, rec.SpentBy)
	case !a.now().Before(rec.Expires):
		return fmt.Errorf("%s: join token %s expired at %s", name, rec.ID, rec.Expires.Format(time.RFC3339))
	}
	rec.SpentBy = name
	if a.joined == nil {
		a.joined = map[string]bool{}
	}
	a.joined[svm.MoRef] = true
	return nil
}

func (s *Session) CreateJoinToken(ctx context.Context, roles []string, ttl time.Duration) (*gateway.JoinToken, error) {
	if err := s.allow(gateway.RoleAdmin, "POST", "/api/v1/system/join-tokens", "CreateJoinToken "+strings.Join(roles, ","), true); err != nil {
		return nil, err
	}
	return s.Array.CreateJoinToken(ctx, roles, ttl)
}

func (s *Session) ListJoinTokens(ctx context.Context) ([]gateway.JoinTokenInfo, error) {
	if err := s.allow(gateway.RoleAdmin, "GET", "/api/v1/system/join-tokens", "", false); err != nil {
		return nil, err
	}
	return s.Array.ListJoinTokens(ctx)
}

func (s *Session) RevokeJoinToken(ctx context.Context, id string) error {
	if err := s.allow(gateway.RoleAdmin, "DELETE", "/api/v1/system/join-tokens/"+id, "RevokeJoinToken "+id, true); err != nil {
		return err
	}
	return s.Array.RevokeJoinToken(ctx, id)
}
