package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/vmware/govmomi/vim25"
)

// CloneTicketPath is the vSphere Client endpoint that exchanges the
// client's session token (header vmware-api-session-id) for a one-time
// clone ticket of the same user's vCenter session.
const CloneTicketPath = "/api/ui/vcenter/session/clone-ticket"

// maxTicket bounds the clone-ticket answer (a ticket is ~100 bytes).
const maxTicket = 16 << 10

// CloneTicket asks the vSphere Client at vc's host for a clone ticket of
// the session behind token, over c's connection (so vCenter's pinned
// certificate is checked as for the SDK). The answer is the ticket as a
// JSON string; {"value": "..."} (the older REST envelope) is accepted too.
func CloneTicket(ctx context.Context, c *vim25.Client, vc *url.URL, token string) (string, error) {
	u := url.URL{Scheme: vc.Scheme, Host: vc.Host, Path: CloneTicketPath}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("vmware-api-session-id", token)
	req.Header.Set("Accept", "application/json")
	resp, err := c.Client.Client.Do(req)
	if err != nil {
		return "", fmt.Errorf("clone ticket from %s: %w", u.Host, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxTicket+1))
	if err != nil {
		return "", fmt.Errorf("clone ticket from %s: %w", u.Host, err)
	}
	if len(body) > maxTicket {
		return "", fmt.Errorf("clone ticket from %s: answer larger than %d bytes", u.Host, maxTicket)
	}
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusCreated {
		return "", fmt.Errorf("clone ticket from %s: %s", u.Host, resp.Status)
	}
	ticket, err := parseTicket(body)
	if err != nil {
		return "", fmt.Errorf("clone ticket from %s: %w", u.Host, err)
	}
	return ticket, nil
}

// parseTicket reads the clone-ticket answer: a JSON string, or the older
// REST envelope {"value": "..."}; an empty ticket is an error.
func parseTicket(body []byte) (string, error) {
	var ticket string
	if err := json.Unmarshal(body, &ticket); err != nil {
		var env struct {
			Value string `json:"value"`
		}
		if json.Unmarshal(body, &env) != nil {
			return "", fmt.Errorf("unexpected answer %.80q", body)
		}
		ticket = env.Value
	}
	if ticket = strings.TrimSpace(ticket); ticket == "" {
		return "", errors.New("empty ticket")
	}
	return ticket, nil
}
