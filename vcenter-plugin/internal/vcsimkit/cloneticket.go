package vcsimkit

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/vmware/govmomi/session"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/soap"
)

// CloneTicketPath is the vSphere Client's session-token exchange (what a
// remote plugin's server calls with the token the UI got from
// htmlClientSdk.app.getSessionInfo()).
const CloneTicketPath = "/api/ui/vcenter/session/clone-ticket"

// sessionCookie is the SOAP session cookie of govmomi's simulator. In the
// kit a vSphere Client session token is a live SOAP session key: that is
// what the real client's token stands for (a logged-in user's session).
const sessionCookie = "vmware_soap_session"

// cloneTicket serves CloneTicketPath as strictly as vCenter: POST only,
// the token in vmware-api-session-id, and a ticket only for a session
// that is logged in (a forged, logged-out or missing token gets 401).
// The answer is the ticket as a JSON string.
func (k *Kit) cloneTicket(w http.ResponseWriter, r *http.Request) {
	fail := func(status int, kind, msg string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(map[string]any{"error_type": kind, "messages": []map[string]string{{"default_message": msg}}})
	}
	if r.Method != http.MethodPost {
		fail(http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED", "use POST")
		return
	}
	token := r.Header.Get("vmware-api-session-id")
	if token == "" {
		fail(http.StatusUnauthorized, "UNAUTHENTICATED", "no vmware-api-session-id header")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	ticket, err := k.acquireCloneTicket(ctx, token)
	if err != nil {
		k.log.Info("vcsimkit: clone ticket refused", "err", err)
		fail(http.StatusUnauthorized, "UNAUTHENTICATED", "session token is not valid")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(ticket)
}

// acquireCloneTicket calls AcquireCloneTicket as the session token's user;
// the simulator faults (NotAuthenticated) when no such session is live.
func (k *Kit) acquireCloneTicket(ctx context.Context, token string) (string, error) {
	sc := soap.NewClient(k.URL, false)
	sc.SetThumbprint(k.URL.Host, k.Thumbprint)
	sc.Jar.SetCookies(k.URL, []*http.Cookie{{Name: sessionCookie, Value: token}})
	c, err := vim25.NewClient(ctx, sc)
	if err != nil {
		return "", err
	}
	return session.NewManager(c).AcquireCloneTicket(ctx)
}

// SessionToken logs in with the kit's credentials and returns the new
// session's token, as the vSphere Client hands it to a remote plugin's UI
// (getSessionInfo().sessionToken). The session stays live until the kit
// closes.
func (k *Kit) SessionToken(ctx context.Context) (string, error) {
	return k.SessionTokenFor(ctx, k.Username, k.Password)
}

// SessionTokenFor is SessionToken for another user (AddUser).
func (k *Kit) SessionTokenFor(ctx context.Context, user, password string) (string, error) {
	sc := soap.NewClient(k.URL, false)
	sc.SetThumbprint(k.URL.Host, k.Thumbprint)
	c, err := vim25.NewClient(ctx, sc)
	if err != nil {
		return "", err
	}
	if err := session.NewManager(c).Login(ctx, url.UserPassword(user, password)); err != nil {
		return "", fmt.Errorf("vcsimkit: log in: %w", err)
	}
	for _, ck := range sc.Jar.Cookies(k.URL) {
		if ck.Name == sessionCookie {
			return ck.Value, nil
		}
	}
	return "", fmt.Errorf("vcsimkit: no %s cookie after login", sessionCookie)
}
