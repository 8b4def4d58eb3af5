package cli

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/cairn-storage/cairn/appliance/contract"
)

// client talks to the gateway's /api/v1. With a username and password file
// in the config it logs in again by itself when the token has expired.
type client struct {
	bases   []string // scheme://host:port of every gateway given, in order
	current int      // the one in use: the first that answered
	hc      *http.Client
	s       *session
}

// base is the gateway in use, for messages and the config file.
func (c *client) base() string { return c.bases[c.current] }

// urlList is what the config's url holds: every gateway, comma separated.
func (c *client) urlList() string { return strings.Join(c.bases, ",") }

// APIError is an error answer of the gateway.
type APIError struct {
	Status  int
	Code    string // invalid, not_found, already_exists, in_use, conflict, ...
	Message string
	Field   string // the request field at fault, if one
}

func (e *APIError) Error() string { return fmt.Sprintf("%s (HTTP %d)", e.Message, e.Status) }

// newClient accepts one gateway URL or several, comma separated: the gateways of one
// system (sessions are shared through etcd, so a token works on all). When the one in
// use cannot be reached, the next one is asked.
func newClient(rawURL, caFile string, s *session) (*client, error) {
	var bases []string
	for _, one := range strings.Split(rawURL, ",") {
		u, err := url.Parse(strings.TrimSpace(one))
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return nil, fmt.Errorf("gateway URL %q: use https://HOST:PORT, e.g. %s (several gateways: comma separated)", one, DefaultURL)
		}
		bases = append(bases, u.Scheme+"://"+u.Host)
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("read CA file: %w (it is the gateway's cert.pem; pass its path with --ca-file)", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("CA file %s holds no PEM certificate; give the gateway's cert.pem", caFile)
		}
		tc.RootCAs = pool
	}
	tr := &http.Transport{TLSClientConfig: tc, Proxy: http.ProxyFromEnvironment, TLSHandshakeTimeout: 10 * time.Second}
	return &client{bases: bases, hc: &http.Client{Transport: tr, Timeout: 2 * time.Minute}, s: s}, nil
}

func (c *client) canRelogin() bool {
	return c.s.cfg.Username != "" && c.s.cfg.PasswordFile != ""
}

// call sends in (if not nil) as JSON and decodes the answer into out (if
// not nil; a *json.RawMessage receives the body as is).
func (c *client) call(ctx context.Context, method, path string, in, out any) error {
	if c.s.cfg.Token == "" {
		if !c.canRelogin() {
			return fmt.Errorf("not logged in: run `cairnctl login` (no token in %s)", c.s.cfgPath)
		}
		if err := c.relogin(ctx); err != nil {
			return err
		}
	}
	status, body, err := c.do(ctx, method, path, c.s.cfg.Token, in)
	if err == nil && status == http.StatusUnauthorized && c.canRelogin() {
		if err := c.relogin(ctx); err != nil {
			return err
		}
		status, body, err = c.do(ctx, method, path, c.s.cfg.Token, in)
	}
	if err != nil {
		return err
	}
	return decodeAnswer(status, body, out)
}

func decodeAnswer(status int, body []byte, out any) error {
	if status >= 400 {
		var e struct {
			Code    string `json:"code"`
			Message string `json:"message"`
			Field   string `json:"field"`
		}
		if json.Unmarshal(body, &e) != nil || e.Message == "" {
			e.Message = strings.TrimSpace(string(body))
		}
		ae := &APIError{Status: status, Code: e.Code, Message: e.Message, Field: e.Field}
		if status == http.StatusUnauthorized && !strings.Contains(e.Message, "cairnctl login") {
			ae.Message += "; run `cairnctl login`"
		}
		return ae
	}
	switch o := out.(type) {
	case nil:
		return nil
	case *json.RawMessage:
		*o = append((*o)[:0], body...)
		return nil
	}
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("gateway answer is not the expected JSON (%v); is --url pointing at a Cairn gateway?", err)
	}
	return nil
}

func (c *client) do(ctx context.Context, method, path, token string, in any) (int, []byte, error) {
	var payload []byte
	contentType := ""
	switch r := in.(type) {
	case nil:
	case rawRequest:
		payload, contentType = r.data, r.contentType
	default:
		b, err := json.Marshal(in)
		if err != nil {
			return 0, nil, err
		}
		payload, contentType = b, "application/json"
	}
	var firstErr error
	for i := range c.bases {
		n := (c.current + i) % len(c.bases)
		status, body, err := c.doOne(ctx, c.bases[n], method, path, token, payload, contentType)
		if err != nil && contract.AnswerLost(err) && contract.RepeatableRequest(method, path) && ctx.Err() == nil {
			// The request went out and its answer was lost (a reset, a cut or
			// corrupted TLS record): one that is safe to repeat is sent once more,
			// on a new connection, before it counts as failed.
			status, body, err = c.doOne(ctx, c.bases[n], method, path, token, payload, contentType)
		}
		if err == nil {
			c.current = n
			return status, body, nil
		}
		if firstErr == nil {
			firstErr = err
		}
		if !contract.Unreachable(err, method) || ctx.Err() != nil {
			break
		}
	}
	// Explain the error of the gateway we were using.
	return 0, nil, c.explain(firstErr)
}

// rawRequest is a request body sent as is (an update bundle), not as JSON.
type rawRequest struct {
	contentType string
	data        []byte
}

// doOne sends payload as contentType ("": no body).
func (c *client) doOne(ctx context.Context, base, method, path, token string, payload []byte, contentType string) (int, []byte, error) {
	var rd io.Reader
	if contentType != "" {
		rd = bytes.NewReader(payload)
	}
	req, err := http.NewRequestWithContext(ctx, method, base+"/api/v1"+path, rd)
	if err != nil {
		return 0, nil, err
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return 0, nil, fmt.Errorf("read gateway answer: %w", err)
	}
	return resp.StatusCode, body, nil
}

// explain turns transport errors into what to do about them.
func (c *client) explain(err error) error {
	var ua x509.UnknownAuthorityError
	var he x509.HostnameError
	var cie x509.CertificateInvalidError
	where := c.s.cfgPath
	switch {
	case errors.As(err, &ua):
		return fmt.Errorf("the gateway's certificate at %s is not trusted: pass --ca-file with the gateway's cert.pem (in its state directory) or set ca_file in %s", c.base(), where)
	case errors.As(err, &he):
		return fmt.Errorf("the gateway's certificate is not valid for %s (%v): connect by a name or address it was issued for, or replace the gateway's cert.pem", c.base(), he)
	case errors.As(err, &cie):
		return fmt.Errorf("the gateway's certificate at %s is invalid (%v): replace the gateway's cert.pem", c.base(), cie)
	case errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Errorf("cannot reach the gateway at %s (connection refused): is `cairn gateway` running there? set the address with --url or url in %s", c.base(), where)
	case strings.Contains(err.Error(), "server gave HTTP response to HTTPS client"):
		return fmt.Errorf("the gateway at %s speaks plain HTTP: use an http:// URL", c.base())
	}
	return fmt.Errorf("cannot reach the gateway at %s: %w; check --url (or url in %s) and the network", c.base(), err, where)
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

func (c *client) login(ctx context.Context, user, password string) (loginResponse, error) {
	var r loginResponse
	status, body, err := c.do(ctx, http.MethodPost, "/login", "", loginRequest{Username: user, Password: password})
	if err != nil {
		return r, err
	}
	if err := decodeAnswer(status, body, &r); err != nil {
		return r, fmt.Errorf("log in as %q: %w", user, err)
	}
	return r, nil
}

// relogin logs in with the configured password file and saves the token.
func (c *client) relogin(ctx context.Context) error {
	pw, err := readPasswordFile(c.s.cfg.PasswordFile)
	if err != nil {
		return err
	}
	r, err := c.login(ctx, c.s.cfg.Username, pw)
	if err != nil {
		return fmt.Errorf("automatic login with password_file %s: %w", c.s.cfg.PasswordFile, err)
	}
	c.s.cfg.Token = r.Token
	return saveConfig(c.s.cfgPath, c.s.cfg)
}

// readPasswordFile reads a password: the first line of the file.
func readPasswordFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read password file: %w", err)
	}
	pw, _, _ := strings.Cut(string(b), "\n")
	pw = strings.TrimRight(pw, "\r")
	if pw == "" {
		return "", fmt.Errorf("password file %s is empty", path)
	}
	return pw, nil
}
