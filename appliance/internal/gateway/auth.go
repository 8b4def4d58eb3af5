package gateway

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/cairn-storage/cairn/appliance/internal/model"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Sessions. A login returns a random 32-byte token (base64url, 43
// characters). Only its SHA-256 is stored, so a read of etcd yields no
// usable token:
//
//	key   /cairn/v1/session/<hex sha256(token)>        (layout v1)
//	value {"user": "<name>", "created": RFC3339, "expires": RFC3339}
//
// under an etcd lease of the token's lifetime, so expired sessions vanish
// from etcd on their own and every gateway of the cluster accepts every
// token. The role is read from the user on each request: changing a role or
// deleting a user takes effect at once.
type session struct {
	User    string    `json:"user"`
	Created time.Time `json:"created"`
	Expires time.Time `json:"expires"`
}

var roleRank = map[string]int{model.RoleMonitor: 1, model.RoleOperator: 2, model.RoleAdmin: 3}

// authenticate resolves the bearer token of r to its user and lease.
func (s *Server) authenticate(ctx context.Context, r *http.Request) (model.User, clientv3.LeaseID, string, error) {
	h := r.Header.Get("Authorization")
	if h == "" {
		return model.User{}, 0, "", errorf(http.StatusUnauthorized, "missing bearer token: log in with POST /api/v1/login (cairnctl login) and send \"Authorization: Bearer <token>\"")
	}
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
		return model.User{}, 0, "", errorf(http.StatusUnauthorized, "the Authorization header must be \"Bearer <token>\"; get a token with POST /api/v1/login (cairnctl login)")
	}
	key := model.SessionKey(strings.TrimSpace(token))
	resp, err := s.cfg.Etcd.Get(ctx, key)
	if err != nil {
		return model.User{}, 0, "", errorf(http.StatusServiceUnavailable, "cannot check the token: etcd unavailable (%v); retry", err)
	}
	var sess session
	if len(resp.Kvs) == 0 || json.Unmarshal(resp.Kvs[0].Value, &sess) != nil || time.Now().After(sess.Expires) {
		return model.User{}, 0, "", errorf(http.StatusUnauthorized, "token invalid or expired (tokens last %s): log in again with POST /api/v1/login (cairnctl login)", s.cfg.TokenTTL)
	}
	u, err := s.store.GetUser(ctx, sess.User)
	if errors.Is(err, model.ErrNotFound) {
		return model.User{}, 0, "", errorf(http.StatusUnauthorized, "user %q of this token no longer exists; log in as another user", sess.User)
	}
	if err != nil {
		return model.User{}, 0, "", err
	}
	return u, clientv3.LeaseID(resp.Kvs[0].Lease), key, nil
}

type loginRequest struct {
	Username string `json:"username"`
	Password string `json:"password"`
}

type loginResponse struct {
	Token   string    `json:"token"`
	Expires time.Time `json:"expires"`
	User    string    `json:"user"`
	Role    string    `json:"role"`
}

func (s *Server) login(c *call) (int, any, error) {
	var req loginRequest
	if err := c.decode(&req); err != nil {
		return 0, nil, err
	}
	c.auditUser = req.Username
	if req.Username == "" || req.Password == "" {
		return 0, nil, errorf(http.StatusBadRequest, "give username and password")
	}
	gate, err := s.admitLogin(c, req.Username)
	if err != nil {
		return 0, nil, err
	}
	u, err := s.store.Authenticate(c.ctx, req.Username, req.Password)
	gate.done(c.ctx, outcomeOf(err))
	if errors.Is(err, model.ErrBadCredentials) {
		return 0, nil, errorf(http.StatusUnauthorized, "wrong user name or password")
	}
	if err != nil {
		return 0, nil, err
	}
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return 0, nil, err
	}
	token := base64.RawURLEncoding.EncodeToString(b[:])
	now := time.Now().UTC()
	sess := session{User: u.Name, Created: now, Expires: now.Add(s.cfg.TokenTTL)}
	// The lease may outlive Expires by up to a second (whole seconds, and
	// etcd's minimum TTL); Expires is what authenticate enforces.
	ttl := int64((s.cfg.TokenTTL + time.Second - 1) / time.Second)
	lease, err := s.cfg.Etcd.Grant(c.ctx, ttl)
	if err != nil {
		return 0, nil, errorf(http.StatusServiceUnavailable, "cannot create a session: etcd unavailable (%v); retry", err)
	}
	val, _ := json.Marshal(sess)
	if _, err := s.cfg.Etcd.Put(c.ctx, model.SessionKey(token), string(val), clientv3.WithLease(lease.ID)); err != nil {
		return 0, nil, errorf(http.StatusServiceUnavailable, "cannot store the session: etcd unavailable (%v); retry", err)
	}
	return http.StatusOK, loginResponse{Token: token, Expires: sess.Expires, User: u.Name, Role: u.Role}, nil
}

// logout ends the caller's session everywhere.
func (s *Server) logout(c *call) (int, any, error) {
	if c.lease != 0 {
		if _, err := s.cfg.Etcd.Revoke(c.ctx, c.lease); err != nil {
			return 0, nil, errorf(http.StatusServiceUnavailable, "logout: etcd unavailable (%v); retry", err)
		}
	} else if _, err := s.cfg.Etcd.Delete(c.ctx, c.sessionKey); err != nil {
		return 0, nil, errorf(http.StatusServiceUnavailable, "logout: etcd unavailable (%v); retry", err)
	}
	return http.StatusNoContent, nil, nil
}
