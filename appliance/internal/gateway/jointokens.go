package gateway

import (
	"net/http"
	"regexp"
	"time"

	"github.com/cairn-storage/cairn/appliance/internal/join"
	"github.com/cairn-storage/cairn/appliance/internal/model"
	"github.com/cairn-storage/cairn/appliance/internal/pki"
)

// Join tokens (internal/join): an admin creates one for the roles a new node
// will run; the node spends it at an MDM's join service for its certificate.
// The token is shown once, in the creation's answer; etcd keeps its hash.

type joinTokenRequest struct {
	Roles      []string `json:"roles"`
	TTLSeconds int64    `json:"ttl_seconds,omitempty"`
}

// joinTokenView is a token's record; Token only in the creation's answer.
type joinTokenView struct {
	ID        string    `json:"id"`
	Token     string    `json:"token,omitempty"`
	Roles     []string  `json:"roles"`          // the roles not yet spent
	Name      string    `json:"name,omitempty"` // the node that spent its first role
	Expires   time.Time `json:"expires"`
	Expired   bool      `json:"expired"`
	CreatedBy string    `json:"created_by"`
	Created   time.Time `json:"created"`
}

func viewOfJoinToken(r join.Record, now time.Time) joinTokenView {
	return joinTokenView{ID: r.ID, Roles: r.Roles, Name: r.Name, Expires: r.Expires, Expired: !now.Before(r.Expires),
		CreatedBy: r.CreatedBy, Created: r.Created}
}

var joinTokenIDRE = regexp.MustCompile(`^[0-9a-f]{16}$`)

func (s *Server) createJoinToken(c *call) (int, any, error) {
	var req joinTokenRequest
	if err := c.decode(&req); err != nil {
		return 0, nil, err
	}
	var ca string
	if s.cfg.ClusterCA != nil {
		if cert := s.cfg.ClusterCA(); cert != nil {
			ca = pki.InfoOf(cert).Fingerprint
		}
	}
	if ca == "" {
		return 0, nil, errorf(http.StatusConflict, "this system runs without certificates (its daemons have no --pki): there is no CA to join; issue certificates by hand with `cairn pki issue`")
	}
	ttl := join.DefaultTTL
	if req.TTLSeconds != 0 {
		ttl = time.Duration(req.TTLSeconds) * time.Second
	}
	now := time.Now()
	tok, rec, err := join.New(ca, req.Roles, ttl, c.user.Name, now)
	if err != nil {
		field := "roles"
		if req.TTLSeconds != 0 && (ttl < join.MinTTL || ttl > join.MaxTTL) {
			field = "ttl_seconds"
		}
		return 0, nil, model.WithField(errorf(http.StatusBadRequest, "%v", err), field)
	}
	st := join.Store{Etcd: s.cfg.Etcd}
	// Expired records go when a new one comes: no other sweeper is needed.
	if err := st.Prune(c.ctx, now); err != nil {
		return 0, nil, etcdErr("prune the expired join tokens", err)
	}
	if err := st.Create(c.ctx, rec); err != nil {
		return 0, nil, etcdErr("store the join token", err)
	}
	c.object = &objectRef{Kind: "join-token", ID: rec.ID, Name: rec.ID}
	v := viewOfJoinToken(rec, now)
	v.Token = tok.String()
	return http.StatusCreated, v, nil
}

func (s *Server) listJoinTokens(c *call) (int, any, error) {
	l, err := join.Store{Etcd: s.cfg.Etcd}.List(c.ctx)
	if err != nil {
		return 0, nil, etcdErr("read the join tokens", err)
	}
	now := time.Now()
	out := make([]joinTokenView, 0, len(l))
	for _, r := range l {
		out = append(out, viewOfJoinToken(r, now))
	}
	return http.StatusOK, out, nil
}

func (s *Server) revokeJoinToken(c *call) (int, any, error) {
	id := c.r.PathValue("id")
	if !joinTokenIDRE.MatchString(id) {
		return 0, nil, model.WithField(errorf(http.StatusBadRequest, "join token id %q: 16 hex digits, as GET /system/join-tokens lists them", id), "id")
	}
	ok, err := join.Store{Etcd: s.cfg.Etcd}.Revoke(c.ctx, id)
	if err != nil {
		return 0, nil, etcdErr("revoke the join token", err)
	}
	if !ok {
		return 0, nil, model.WithField(errorf(http.StatusNotFound, "join token %s not found: spent, revoked, or pruned after it expired", id), "id")
	}
	c.object = &objectRef{Kind: "join-token", ID: id, Name: id}
	return http.StatusNoContent, nil, nil
}
