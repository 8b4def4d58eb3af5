package gateway

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
)

// Config says how to reach and trust one gateway.
type Config struct {
	// URL is the gateway base, e.g. https://10.0.0.11:8443 (no /api/v1).
	URL      string
	Username string
	Password string
	// Exactly one of CAPEM and Thumbprint pins the gateway's self-signed
	// certificate. Thumbprint is the SHA-256 of the leaf certificate (DER),
	// hex, colons allowed; the SVM publishes it as guestinfo.cairn.tls.thumbprint.
	CAPEM      []byte
	Thumbprint string
}

// HTTPClient implements API over HTTPS. It logs in lazily and once again
// when a request answers 401 (token expired).
type HTTPClient struct {
	base *url.URL
	cfg  Config
	http *http.Client

	mu    sync.Mutex
	token string
}

// NormalizeThumbprint turns "AB:cd:..." into "abcd...".
func NormalizeThumbprint(s string) string {
	return strings.ToLower(strings.ReplaceAll(strings.TrimSpace(s), ":", ""))
}

// Thumbprint returns the SHA-256 thumbprint of a DER certificate, as
// Config.Thumbprint expects it.
func Thumbprint(der []byte) string {
	sum := sha256.Sum256(der)
	return hex.EncodeToString(sum[:])
}

// NewHTTPClient checks cfg and returns a client; it does not connect.
func NewHTTPClient(cfg Config) (*HTTPClient, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("gateway url %q: give https://host:port", cfg.URL)
	}
	if u.Scheme != "https" {
		return nil, fmt.Errorf("gateway url %q: the gateway only speaks https", cfg.URL)
	}
	tlsCfg := &tls.Config{MinVersion: tls.VersionTLS12}
	switch {
	case len(cfg.CAPEM) > 0 && cfg.Thumbprint != "":
		return nil, errors.New("gateway: give either a CA file or a thumbprint, not both")
	case len(cfg.CAPEM) > 0:
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(cfg.CAPEM) {
			return nil, errors.New("gateway: the CA file holds no PEM certificate")
		}
		tlsCfg.RootCAs = pool
	case cfg.Thumbprint != "":
		want := NormalizeThumbprint(cfg.Thumbprint)
		// The chain is self-signed, so name verification is replaced by an
		// exact match of the leaf certificate: stronger than a CA for one host.
		tlsCfg.InsecureSkipVerify = true
		tlsCfg.VerifyPeerCertificate = func(raw [][]byte, _ [][]*x509.Certificate) error {
			if len(raw) == 0 {
				return errors.New("gateway presented no certificate")
			}
			if got := Thumbprint(raw[0]); got != want {
				return fmt.Errorf("gateway certificate thumbprint %s does not match the pinned %s: check you reach the right SVM, or re-pin after a certificate change", got, want)
			}
			return nil
		}
	default:
		return nil, errors.New("gateway: pin its certificate with a CA file or a SHA-256 thumbprint")
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = tlsCfg
	return &HTTPClient{base: u, cfg: cfg, http: &http.Client{Transport: tr, Timeout: DefaultTimeout}}, nil
}

// StatusError is a non-2xx answer; Message is the gateway's error message.
type StatusError struct {
	Method, Path string
	Status       int
	Message      string
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("gateway %s %s: %d: %s", e.Method, e.Path, e.Status, e.Message)
}

// Is makes errors.Is(err, ErrNotFound) true for 404 answers.
func (e *StatusError) Is(target error) bool {
	return target == ErrNotFound && e.Status == http.StatusNotFound
}

func (c *HTTPClient) login(ctx context.Context) (string, error) {
	var out struct {
		Token string `json:"token"`
	}
	if err := c.exchange(ctx, "", http.MethodPost, "/api/v1/login", map[string]string{"username": c.cfg.Username, "password": c.cfg.Password}, &out); err != nil {
		return "", fmt.Errorf("log in to the gateway as %s: %w", c.cfg.Username, err)
	}
	if out.Token == "" {
		return "", errors.New("gateway login answered without a token")
	}
	return out.Token, nil
}

func (c *HTTPClient) do(ctx context.Context, method, path string, in, out any) error {
	for attempt := 0; ; attempt++ {
		c.mu.Lock()
		token := c.token
		c.mu.Unlock()
		if token == "" {
			t, err := c.login(ctx)
			if err != nil {
				return err
			}
			c.mu.Lock()
			c.token, token = t, t
			c.mu.Unlock()
		}
		err := c.exchange(ctx, token, method, path, in, out)
		var se *StatusError
		if attempt == 0 && errors.As(err, &se) && se.Status == http.StatusUnauthorized {
			c.mu.Lock()
			c.token = ""
			c.mu.Unlock()
			continue
		}
		return err
	}
}

// maxBody bounds what we read from the gateway (lists of a large system fit).
const maxBody = 16 << 20

func (c *HTTPClient) exchange(ctx context.Context, token, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	// path has its segments escaped (esc): keep that form on the wire.
	u := *c.base
	u.RawPath = strings.TrimSuffix(u.EscapedPath(), "/") + path
	p, err := url.PathUnescape(u.RawPath)
	if err != nil {
		return err
	}
	u.Path = p
	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("gateway %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return fmt.Errorf("gateway %s %s: read answer: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		return &StatusError{Method: method, Path: path, Status: resp.StatusCode, Message: ErrorMessage(data)}
	}
	if out == nil || len(bytes.TrimSpace(data)) == 0 {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("gateway %s %s: decode answer: %w", method, path, err)
	}
	return nil
}

// ErrorMessage extracts the message of {"code", "message", "field"}; falls
// back to the raw (bounded) text.
func ErrorMessage(data []byte) string {
	var e struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(data, &e) == nil && e.Message != "" {
		return e.Message
	}
	s := strings.TrimSpace(string(data))
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}

func esc(s string) string { return url.PathEscape(s) }

func getOne[T any](ctx context.Context, c *HTTPClient, kind, idOrName string) (*T, error) {
	var out T
	if err := c.do(ctx, http.MethodGet, "/api/v1/"+kind+"/"+esc(idOrName), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

func create[T any](ctx context.Context, c *HTTPClient, kind string, in any) (*T, error) {
	var out T
	if err := c.do(ctx, http.MethodPost, "/api/v1/"+kind, in, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

func list[T any](ctx context.Context, c *HTTPClient, kind string) ([]T, error) {
	var out []T
	if err := c.do(ctx, http.MethodGet, "/api/v1/"+kind, nil, &out); err != nil {
		return nil, err
	}
	return out, nil
}

func (c *HTTPClient) System(ctx context.Context) (*System, error) {
	var s System
	return &s, c.do(ctx, http.MethodGet, "/api/v1/system", nil, &s)
}
func (c *HTTPClient) Bootstrap(ctx context.Context, name string) error {
	return c.do(ctx, http.MethodPost, "/api/v1/system/bootstrap", map[string]string{"name": name}, nil)
}
func (c *HTTPClient) ListVolumes(ctx context.Context) ([]Volume, error) {
	return list[Volume](ctx, c, "volumes")
}
func (c *HTTPClient) ListHosts(ctx context.Context) ([]Host, error) {
	return list[Host](ctx, c, "hosts")
}
func (c *HTTPClient) GetPD(ctx context.Context, id string) (*ProtectionDomain, error) {
	return getOne[ProtectionDomain](ctx, c, "protection-domains", id)
}
func (c *HTTPClient) CreatePD(ctx context.Context, name string) (*ProtectionDomain, error) {
	return create[ProtectionDomain](ctx, c, "protection-domains", map[string]string{"name": name})
}
func (c *HTTPClient) GetFaultSet(ctx context.Context, id string) (*FaultSet, error) {
	return getOne[FaultSet](ctx, c, "fault-sets", id)
}
func (c *HTTPClient) CreateFaultSet(ctx context.Context, name, pd string) (*FaultSet, error) {
	return create[FaultSet](ctx, c, "fault-sets", map[string]string{"name": name, "protection_domain": pd})
}
func (c *HTTPClient) GetSDS(ctx context.Context, id string) (*SDS, error) {
	return getOne[SDS](ctx, c, "sds", id)
}
func (c *HTTPClient) ListSDS(ctx context.Context) ([]SDS, error) { return list[SDS](ctx, c, "sds") }
func (c *HTTPClient) CreateSDS(ctx context.Context, spec SDSSpec) (*SDS, error) {
	return create[SDS](ctx, c, "sds", spec)
}
func (c *HTTPClient) ListDevices(ctx context.Context) ([]Device, error) {
	return list[Device](ctx, c, "devices")
}
func (c *HTTPClient) AddDevice(ctx context.Context, spec DeviceSpec) (*Device, error) {
	return create[Device](ctx, c, "devices", spec)
}
func (c *HTTPClient) GetPool(ctx context.Context, id string) (*Pool, error) {
	return getOne[Pool](ctx, c, "pools", id)
}
func (c *HTTPClient) CreatePool(ctx context.Context, spec PoolSpec) (*Pool, error) {
	return create[Pool](ctx, c, "pools", spec)
}
func (c *HTTPClient) GetVolume(ctx context.Context, id string) (*Volume, error) {
	return getOne[Volume](ctx, c, "volumes", id)
}
func (c *HTTPClient) CreateVolume(ctx context.Context, spec VolumeSpec) (*Volume, error) {
	return create[Volume](ctx, c, "volumes", spec)
}
func (c *HTTPClient) MapVolume(ctx context.Context, volume, host string) error {
	return c.do(ctx, http.MethodPost, "/api/v1/volumes/"+esc(volume)+"/map", map[string]string{"host": host}, nil)
}
func (c *HTTPClient) GetHost(ctx context.Context, id string) (*Host, error) {
	return getOne[Host](ctx, c, "hosts", id)
}
func (c *HTTPClient) CreateHost(ctx context.Context, spec HostSpec) (*Host, error) {
	return create[Host](ctx, c, "hosts", spec)
}
func (c *HTTPClient) EnterSDSMaintenance(ctx context.Context, sds, mode string) error {
	return c.do(ctx, http.MethodPost, "/api/v1/sds/"+esc(sds)+"/maintenance", map[string]string{"mode": mode}, nil)
}
func (c *HTTPClient) ExitSDSMaintenance(ctx context.Context, sds string) error {
	return c.do(ctx, http.MethodDelete, "/api/v1/sds/"+esc(sds)+"/maintenance", nil, nil)
}

var _ API = (*HTTPClient)(nil)
