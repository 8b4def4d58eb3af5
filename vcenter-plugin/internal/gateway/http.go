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
	"time"

	"github.com/cairn-storage/cairn/appliance/contract"
)

// Config says how to reach and trust the gateways of a system.
type Config struct {
	// URL is the gateway base, e.g. https://10.0.0.11:8443 (no /api/v1).
	URL      string
	Username string
	Password string
	// OnBehalfOf names the person the requests are made for (the signed-in
	// vSphere user), sent in OnBehalfOfHeader; the gateway records it in
	// its audit events and accepts it only from a delegate user.
	OnBehalfOf string
	// Exactly one of CAPEM and Thumbprint pins the gateway's self-signed
	// certificate. Thumbprint is the SHA-256 of the leaf certificate (DER),
	// hex, colons allowed; the SVM publishes it as guestinfo.cairn.tls.thumbprint.
	CAPEM      []byte
	Thumbprint string
	// Failover lists further gateways of the same system, each with its own
	// pinned certificate. When the gateway in use cannot be reached the client
	// moves to the next one (sessions live in etcd: a token works on all).
	Failover []Endpoint
}

// Endpoint is one more gateway: its URL and certificate thumbprint.
type Endpoint struct {
	URL        string
	Thumbprint string
}

// HTTPClient implements API over HTTPS. It logs in lazily and once again
// when a request answers 401 (token expired).
type HTTPClient struct {
	cfg       Config
	endpoints []endpoint

	mu      sync.Mutex
	token   string
	current int // index into endpoints of the gateway in use
}

type endpoint struct {
	base *url.URL
	http *http.Client
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
	c := &HTTPClient{cfg: cfg}
	if err := c.addEndpoint(cfg.URL, cfg.CAPEM, cfg.Thumbprint); err != nil {
		return nil, err
	}
	for _, f := range cfg.Failover {
		if err := c.addEndpoint(f.URL, nil, f.Thumbprint); err != nil {
			return nil, err
		}
	}
	return c, nil
}

func (c *HTTPClient) addEndpoint(rawURL string, caPEM []byte, thumbprint string) error {
	u, err := url.Parse(rawURL)
	if err != nil || u.Host == "" {
		return fmt.Errorf("gateway url %q: give https://host:port", rawURL)
	}
	if u.Scheme != "https" {
		return fmt.Errorf("gateway url %q: the gateway only speaks https", rawURL)
	}
	tlsCfg := &tls.Config{MinVersion: tls.VersionTLS12}
	switch {
	case len(caPEM) > 0 && thumbprint != "":
		return errors.New("gateway: give either a CA file or a thumbprint, not both")
	case len(caPEM) > 0:
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(caPEM) {
			return errors.New("gateway: the CA file holds no PEM certificate")
		}
		tlsCfg.RootCAs = pool
	case thumbprint != "":
		want := NormalizeThumbprint(thumbprint)
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
		return fmt.Errorf("gateway %s: pin its certificate with a CA file or a SHA-256 thumbprint", rawURL)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = tlsCfg
	c.endpoints = append(c.endpoints, endpoint{base: u, http: &http.Client{Transport: tr, Timeout: DefaultTimeout}})
	return nil
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

// exchange sends one request to the gateway in use; when it cannot be reached, to the
// next ones in turn (each tried once per request), and stays with the one that answered.
func (c *HTTPClient) exchange(ctx context.Context, token, method, path string, in, out any) error {
	var payload []byte
	contentType := ""
	switch r := in.(type) {
	case nil:
	case rawBody:
		payload, contentType = r.data, r.contentType
	default:
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		payload, contentType = b, "application/json"
	}
	c.mu.Lock()
	start := c.current
	c.mu.Unlock()
	var errs []error
	for i := range c.endpoints {
		n := (start + i) % len(c.endpoints)
		err := c.exchangeWith(ctx, c.endpoints[n], token, method, path, payload, contentType, out)
		if err != nil && contract.AnswerLost(err) && contract.RepeatableRequest(method, path) && ctx.Err() == nil {
			// The request went out and its answer was lost (a reset, a cut or
			// corrupted TLS record): one the API makes safe to repeat is sent once
			// more to the same gateway, on a new connection, before it counts.
			err = c.exchangeWith(ctx, c.endpoints[n], token, method, path, payload, contentType, out)
		}
		if err == nil || !contract.Unreachable(err, method) || ctx.Err() != nil {
			if err == nil && n != start {
				c.mu.Lock()
				c.current = n
				c.mu.Unlock()
			}
			return err
		}
		errs = append(errs, err)
	}
	if len(errs) == 1 {
		return errs[0]
	}
	return fmt.Errorf("no gateway of the system answers (%d tried): %w", len(errs), errors.Join(errs...))
}

// rawBody is a request body sent as is (an update bundle), not as JSON.
type rawBody struct {
	contentType string
	data        []byte
}

// exchangeWith sends payload as contentType ("": no body) to ep.
func (c *HTTPClient) exchangeWith(ctx context.Context, ep endpoint, token, method, path string, payload []byte, contentType string, out any) error {
	var body io.Reader
	if contentType != "" {
		body = bytes.NewReader(payload)
	}
	// path has its segments escaped (esc): keep that form on the wire.
	u := *ep.base
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
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("Accept", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
		if c.cfg.OnBehalfOf != "" {
			req.Header.Set(OnBehalfOfHeader, c.cfg.OnBehalfOf)
		}
	}
	resp, err := ep.http.Do(req)
	if err != nil {
		return fmt.Errorf("gateway %s %s %s: %w", ep.base.Host, method, path, err)
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

// RedeemBootstrapToken sets the admin password of a new system with the one-time
// bootstrap token the deployer gave the gateway SVMs (POST
// /api/v1/bootstrap/admin-password; no login). A token that is unknown, expired or
// used answers a *StatusError with status 401.
func (c *HTTPClient) RedeemBootstrapToken(ctx context.Context, token, password string) error {
	return c.exchange(ctx, "", http.MethodPost, "/api/v1/bootstrap/admin-password",
		map[string]string{"token": token, "password": password}, nil)
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

// AddDevice adds a device and waits until its SDS prepared it: the gateway
// answers 202 with a device-add job (200 with the device on a repeat), and
// a job that fails is returned as the *StatusError its code stands for.
func (c *HTTPClient) AddDevice(ctx context.Context, spec DeviceSpec) (*Device, error) {
	var raw json.RawMessage
	if err := c.do(ctx, http.MethodPost, "/api/v1/devices", spec, &raw); err != nil {
		return nil, err
	}
	var j job
	if json.Unmarshal(raw, &j) != nil || j.Kind != "device-add" || j.ID == "" {
		var d Device
		if err := json.Unmarshal(raw, &d); err != nil {
			return nil, fmt.Errorf("gateway POST /api/v1/devices: decode answer: %w", err)
		}
		return &d, nil
	}
	if err := c.waitJob(ctx, &j, "/api/v1/devices"); err != nil {
		return nil, err
	}
	return getOne[Device](ctx, c, "devices", j.Object.ID)
}

// job is what the client reads of a gateway job.
type job = Job

// jobPoll is how often waitJob reads a running job at most; it starts at
// a twentieth of that and doubles (a small device is ready at once).
var jobPoll = time.Second

// statusOfCode is the HTTP status the API answers each error code with.
var statusOfCode = map[string]int{"invalid": 400, "no_change": 400, "unauthorized": 401, "forbidden": 403, "not_found": 404,
	"already_exists": 409, "in_use": 409, "conflict": 409, "unavailable": 503}

// waitJob polls j until it ends; a failed job is a *StatusError of the
// request (path) that started it.
func (c *HTTPClient) waitJob(ctx context.Context, j *job, path string) error {
	poll := jobPoll / 20
	for j.State == "running" || j.State == "queued" {
		select {
		case <-ctx.Done():
			return fmt.Errorf("job %s (%s) still %s: %w", j.ID, j.Kind, j.State, ctx.Err())
		case <-time.After(poll):
		}
		poll = min(2*poll, jobPoll)
		if err := c.do(ctx, http.MethodGet, "/api/v1/jobs/"+esc(j.ID), nil, j); err != nil {
			return err
		}
	}
	if j.State == "succeeded" {
		return nil
	}
	msg, status := j.Message, http.StatusInternalServerError
	if j.Error != nil {
		msg = j.Error.Message
		if st, ok := statusOfCode[j.Error.Code]; ok {
			status = st
		}
	}
	return &StatusError{Method: http.MethodPost, Path: path, Status: status, Message: fmt.Sprintf("job %s: %s", j.ID, msg)}
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
func (c *HTTPClient) UpdateVolume(ctx context.Context, id string, up VolumeUpdate) (*Volume, error) {
	var out Volume
	if err := c.do(ctx, http.MethodPatch, "/api/v1/volumes/"+esc(id), up, &out); err != nil {
		return nil, err
	}
	return &out, nil
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

func (c *HTTPClient) RemoveSDS(ctx context.Context, sds string) (*Job, error) {
	var j Job
	if err := c.do(ctx, http.MethodPost, "/api/v1/sds/"+esc(sds)+"/remove", nil, &j); err != nil {
		return nil, err
	}
	if j.ID == "" {
		return nil, fmt.Errorf("gateway POST /api/v1/sds/%s/remove answered without a job", sds)
	}
	return &j, nil
}
func (c *HTTPClient) GetJob(ctx context.Context, id string) (*Job, error) {
	return getOne[Job](ctx, c, "jobs", id)
}
func (c *HTTPClient) PutSVM(ctx context.Context, rec SVMRecord) error {
	return c.do(ctx, http.MethodPut, "/api/v1/svms/"+esc(rec.Name), rec, nil)
}
func (c *HTTPClient) DeleteSVM(ctx context.Context, name string) error {
	return c.do(ctx, http.MethodDelete, "/api/v1/svms/"+esc(name), nil, nil)
}
func (c *HTTPClient) DeleteHost(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodDelete, "/api/v1/hosts/"+esc(id), nil, nil)
}

func (c *HTTPClient) MapVolumeAs(ctx context.Context, volume, host string, readOnly bool) error {
	return c.do(ctx, http.MethodPost, "/api/v1/volumes/"+esc(volume)+"/map", map[string]any{"host": host, "read_only": readOnly}, nil)
}
func (c *HTTPClient) UnmapVolume(ctx context.Context, volume, host string) error {
	return c.do(ctx, http.MethodPost, "/api/v1/volumes/"+esc(volume)+"/unmap", map[string]string{"host": host}, nil)
}
func (c *HTTPClient) DeleteVolume(ctx context.Context, volume string) error {
	return c.do(ctx, http.MethodDelete, "/api/v1/volumes/"+esc(volume), nil, nil)
}

// RemoveDevice starts the drain of a device: 202 with the device-remove
// job (also on a repeat while it runs).
func (c *HTTPClient) RemoveDevice(ctx context.Context, id string) (*Job, error) {
	var j Job
	if err := c.do(ctx, http.MethodPost, "/api/v1/devices/"+esc(id)+"/remove", map[string]string{}, &j); err != nil {
		return nil, err
	}
	if j.ID == "" {
		return nil, fmt.Errorf("gateway POST /api/v1/devices/%s/remove answered no job: is the gateway older than this plugin?", id)
	}
	return &j, nil
}

var _ API = (*HTTPClient)(nil)
