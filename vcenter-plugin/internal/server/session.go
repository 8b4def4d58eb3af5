// Sign-in and sessions: a standalone login (user name and password, a
// cookie), or the vSphere Client's session token cloned into a vCenter
// session; the origin check on state-changing calls; authed, which every
// API handler but the public ones goes through.

package server

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/vmware/govmomi/session"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/soap"
)

type userSession struct {
	client *vim25.Client
	user   string
	key    string // vCenter's UserSession.key: privileges are checked for it
	seen   time.Time
}

const cookieName = "cairn_session"

func newID() string {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}

// vcClient connects to vCenter (not logged in).
func (s *Server) vcClient(ctx context.Context) (*vim25.Client, error) {
	sc := soap.NewClient(s.cfg.VCenter, false)
	if s.cfg.VCenterThumbprint != "" {
		sc.SetThumbprint(s.cfg.VCenter.Host, s.cfg.VCenterThumbprint)
	}
	return vim25.NewClient(ctx, sc)
}

func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Username string `json:"username,omitempty"`
		Password string `json:"password,omitempty"`
	}
	if !decode(w, r, &req) {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	c, err := s.vcClient(ctx)
	if err != nil {
		writeError(w, http.StatusBadGateway, "cannot reach vCenter %s: %v", s.cfg.VCenter.Host, err)
		return
	}
	if req.Username == "" {
		writeError(w, http.StatusBadRequest, "give username and password (inside the vSphere Client the UI signs in with the client's session token instead)")
		return
	}
	sm := session.NewManager(c)
	if err := sm.Login(ctx, url.UserPassword(req.Username, req.Password)); err != nil {
		writeError(w, http.StatusUnauthorized, "vCenter refused the user name or password: check them and try again")
		return
	}
	us, err := sm.UserSession(ctx)
	if err != nil || us == nil {
		writeError(w, http.StatusUnauthorized, "vCenter session is not valid: sign in again")
		return
	}
	id := newID()
	s.keep(id, &userSession{client: c, user: us.UserName, key: us.Key, seen: time.Now()})
	// SameSite=None: the vSphere Client shows the UI in an iframe, a
	// third-party context for our origin; Secure and HttpOnly always, and
	// state-changing calls are checked against Origin (authed).
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: id, Path: "/", HttpOnly: true, Secure: true, SameSite: http.SameSiteNoneMode})
	writeJSON(w, http.StatusOK, map[string]string{"user": us.UserName})
}

func (s *Server) logout(w http.ResponseWriter, r *http.Request) {
	if ck, err := r.Cookie(cookieName); err == nil {
		s.mu.Lock()
		us := s.sessions[ck.Value]
		delete(s.sessions, ck.Value)
		s.mu.Unlock()
		if us != nil {
			_ = session.NewManager(us.client).Logout(r.Context())
		}
	}
	w.WriteHeader(http.StatusNoContent)
}

// keep stores a session under id, forgetting expired ones.
func (s *Server) keep(id string, us *userSession) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, old := range s.sessions {
		if time.Since(old.seen) > s.cfg.SessionTTL {
			delete(s.sessions, k)
		}
	}
	s.sessions[id] = us
}

// lookup returns the live session under id and marks it used.
func (s *Server) lookup(id string) *userSession {
	s.mu.Lock()
	defer s.mu.Unlock()
	us := s.sessions[id]
	if us != nil && time.Since(us.seen) > s.cfg.SessionTTL {
		delete(s.sessions, id)
		us = nil
	}
	if us != nil {
		us.seen = time.Now()
	}
	return us
}

// TokenHeader carries the vSphere Client's session token
// (htmlClientSdk.app.getSessionInfo().sessionToken) on every UI call made
// inside the client. A custom header, so no other site can make a browser
// send it (no CORS is served).
const TokenHeader = "X-Cairn-Session-Token"

// RequestHeader must be set on state-changing calls that come through a
// vCenter's reverse proxy (Origin is the vCenter's, shared with the
// client's other plugins): a cross-site form cannot set it.
const RequestHeader = "X-Cairn-Request"

// tokenSession returns the vCenter session cloned from the vSphere
// Client's session token, exchanging the token on first use. Sessions are
// keyed by the token's SHA-256 so the token itself is never stored.
func (s *Server) tokenSession(ctx context.Context, token string) (*userSession, error) {
	sum := sha256.Sum256([]byte(token))
	id := "token:" + hex.EncodeToString(sum[:])
	if us := s.lookup(id); us != nil {
		return us, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	c, err := s.vcClient(ctx)
	if err != nil {
		return nil, fmt.Errorf("cannot reach vCenter %s: %w", s.cfg.VCenter.Host, err)
	}
	ticket, err := CloneTicket(ctx, c, s.cfg.VCenter, token)
	if err != nil {
		return nil, err
	}
	sm := session.NewManager(c)
	if err := sm.CloneSession(ctx, ticket); err != nil {
		return nil, fmt.Errorf("vCenter refused the clone ticket: %w", err)
	}
	u, err := sm.UserSession(ctx)
	if err != nil || u == nil {
		return nil, fmt.Errorf("cloned vCenter session is not valid (%v)", err)
	}
	us := &userSession{client: c, user: u.UserName, key: u.Key, seen: time.Now()}
	s.keep(id, us)
	return us, nil
}

// originAllowed says whether a state-changing call from origin may go on:
// our own origin; a vCenter's (the proxied UI) with RequestHeader set; or
// none (not a browser: the CLI, installer and tests).
func (s *Server) originAllowed(r *http.Request) bool {
	o := r.Header.Get("Origin")
	if o == "" || o == s.cfg.PublicURL {
		return true
	}
	if r.Header.Get(RequestHeader) == "" {
		return false
	}
	vc := s.cfg.VCenter.Scheme + "://" + s.cfg.VCenter.Host
	for _, a := range append([]string{vc}, s.cfg.VCenterOrigins...) {
		if strings.EqualFold(o, strings.TrimSuffix(a, "/")) {
			return true
		}
	}
	return false
}

func (s *Server) authed(h func(http.ResponseWriter, *http.Request, *userSession)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && !s.originAllowed(r) {
			writeError(w, http.StatusForbidden, "cross-origin request from %s refused: open Cairn from the vSphere Client or from %s", r.Header.Get("Origin"), s.cfg.PublicURL)
			return
		}
		var us *userSession
		if token := r.Header.Get(TokenHeader); token != "" {
			var err error
			if us, err = s.tokenSession(r.Context(), token); err != nil {
				s.cfg.Logger.Warn("vSphere Client session token refused", "err", err)
				writeError(w, http.StatusUnauthorized, "vCenter did not accept the vSphere Client's session (%v): reload the vSphere Client, sign in again and reopen Cairn", err)
				return
			}
		} else {
			ck, err := r.Cookie(cookieName)
			if err != nil {
				writeError(w, http.StatusUnauthorized, "no session: sign in (POST /api/v1/session) first")
				return
			}
			if us = s.lookup(ck.Value); us == nil {
				writeError(w, http.StatusUnauthorized, "session expired: sign in again")
				return
			}
		}
		h(w, r, us)
	}
}
