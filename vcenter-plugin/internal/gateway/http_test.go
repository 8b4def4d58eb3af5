package gateway_test

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairn-storage/cairn/vcenter-plugin/internal/gateway"
)

// fakeServer speaks the gateway's wire format (OpenAPI 1.0.0) for the
// calls under test; tokens expire when the test says so.
func fakeServer(t *testing.T) (*httptest.Server, *atomic.Int32, *atomic.Bool) {
	logins := &atomic.Int32{}
	expired := &atomic.Bool{}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/v1/login", func(w http.ResponseWriter, r *http.Request) {
		var req map[string]string
		_ = json.NewDecoder(r.Body).Decode(&req)
		if req["username"] != "admin" || req["password"] != "s3cret-pass" {
			w.WriteHeader(401)
			_, _ = w.Write([]byte(`{"code":"invalid","field":"","message":"wrong user name or password"}`))
			return
		}
		logins.Add(1)
		expired.Store(false)
		_, _ = w.Write([]byte(`{"token":"tok","expires":"2030-01-01T00:00:00Z","user":"admin","role":"admin"}`))
	})
	auth := func(h http.HandlerFunc) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") != "Bearer tok" || expired.Load() {
				w.WriteHeader(401)
				_, _ = w.Write([]byte(`{"code":"invalid","field":"","message":"token expired: log in again"}`))
				return
			}
			h(w, r)
		}
	}
	mux.HandleFunc("GET /api/v1/system", auth(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"bootstrapped":true,"system":{"id":"abc","name":"c1","created":"2026-01-01T00:00:00Z"},"health":{"status":"degraded","sds_count":3,"sds_up_count":2,"sds_down_names":["sds-b"],"device_error_names":[],"pool_not_redundant_names":[],"messages":["SDS sds-b is down"]},"capacity":{"raw":10,"usable":4,"allocated":1,"thick_reserved":0},"counts":{"sds":3}}`))
	}))
	mux.HandleFunc("GET /api/v1/volumes/{ref}", auth(func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("ref") != "vol 1" {
			w.WriteHeader(404)
			_, _ = w.Write([]byte(`{"code":"invalid","field":"","message":"volume \"` + r.PathValue("ref") + `\" not found"}`))
			return
		}
		_, _ = w.Write([]byte(`{"id":"00000000000000a1","name":"vol 1","pool_id":"p","size":1073741824,"thin":true,"wwn":"6c0ffee0000000000000000000000001","mappings":[{"host_id":"h1","host_name":"esx-01"}]}`))
	}))
	mux.HandleFunc("POST /api/v1/volumes", auth(func(w http.ResponseWriter, r *http.Request) {
		dec := json.NewDecoder(r.Body)
		dec.DisallowUnknownFields() // as the gateway does
		var spec gateway.VolumeSpec
		if err := dec.Decode(&spec); err != nil {
			w.WriteHeader(400)
			_, _ = w.Write([]byte(`{"code":"invalid","field":"","message":"` + err.Error() + `"}`))
			return
		}
		w.WriteHeader(409)
		_, _ = w.Write([]byte(`{"code":"invalid","field":"","message":"volume name taken: pick another name"}`))
	}))
	for _, action := range []string{"map", "unmap"} {
		mux.HandleFunc("POST /api/v1/volumes/{ref}/"+action, auth(func(w http.ResponseWriter, r *http.Request) {
			var m map[string]any
			_ = json.NewDecoder(r.Body).Decode(&m)
			_, roBool := m["read_only"].(bool)
			if m["host"] != "esx-02" || r.PathValue("ref") != "00000000000000a1" || (m["read_only"] != nil && (!roBool || action == "unmap")) {
				w.WriteHeader(400)
				return
			}
			w.WriteHeader(200)
			_, _ = w.Write([]byte(`{}`))
		}))
	}
	mux.HandleFunc("DELETE /api/v1/volumes/{ref}", auth(func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("ref") == "mapped" {
			w.WriteHeader(409)
			_, _ = w.Write([]byte(`{"code":"in_use","message":"volume \"mapped\" is mapped to 1 hosts: unmap it first"}`))
			return
		}
		w.WriteHeader(204)
	}))
	// Devices are added by a device-add job: the one for a "busy" path
	// fails as the SDS refuses it, the other succeeds on its second read.
	jobReads := &atomic.Int32{}
	mux.HandleFunc("POST /api/v1/devices", auth(func(w http.ResponseWriter, r *http.Request) {
		var spec gateway.DeviceSpec
		_ = json.NewDecoder(r.Body).Decode(&spec)
		id := "j-ok"
		if strings.Contains(spec.Path, "busy") {
			id = "j-busy"
		}
		w.Header().Set("Location", "/api/v1/jobs/"+id)
		w.WriteHeader(202)
		_, _ = w.Write([]byte(`{"id":"` + id + `","kind":"device-add","object":{"kind":"device","id":"d1","name":"sds-a-ok"},"state":"running","percent":0}`))
	}))
	mux.HandleFunc("GET /api/v1/jobs/{id}", auth(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.PathValue("id") == "j-busy":
			_, _ = w.Write([]byte(`{"id":"j-busy","kind":"device-add","object":{"kind":"device","id":"d2","name":"x"},"state":"failed","message":"refused","error":{"code":"in_use","message":"SDS \"a\" refused device /dev/disk/by-id/busy: in use by ext4","field":""}}`))
		case jobReads.Add(1) == 1:
			_, _ = w.Write([]byte(`{"id":"j-ok","kind":"device-add","object":{"kind":"device","id":"d1","name":"sds-a-ok"},"state":"running","percent":0}`))
		default:
			_, _ = w.Write([]byte(`{"id":"j-ok","kind":"device-add","object":{"kind":"device","id":"d1","name":"sds-a-ok"},"state":"succeeded","percent":100}`))
		}
	}))
	mux.HandleFunc("GET /api/v1/devices/{ref}", auth(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"id":"` + r.PathValue("ref") + `","name":"sds-a-ok","sds_id":"s1","path":"/dev/disk/by-id/ok","state":"normal","capacity":107374182400}`))
	}))
	ts := httptest.NewTLSServer(mux)
	t.Cleanup(ts.Close)
	return ts, logins, expired
}

// TestHTTPClientAddDevice: AddDevice follows the device-add job to the
// device, and a failed job is the status its error code stands for.
func TestHTTPClientAddDevice(t *testing.T) {
	ctx := context.Background()
	ts, _, _ := fakeServer(t)
	*gateway.JobPoll = 10 * time.Millisecond
	c, err := gateway.NewHTTPClient(gateway.Config{URL: ts.URL, Username: "admin", Password: "s3cret-pass", Thumbprint: gateway.Thumbprint(ts.Certificate().Raw)})
	if err != nil {
		t.Fatal(err)
	}
	d, err := c.AddDevice(ctx, gateway.DeviceSpec{SDS: "s1", Pool: "p", Path: "/dev/disk/by-id/ok"})
	if err != nil || d.ID != "d1" || d.Path != "/dev/disk/by-id/ok" {
		t.Fatalf("AddDevice: %+v %v", d, err)
	}
	_, err = c.AddDevice(ctx, gateway.DeviceSpec{SDS: "s1", Pool: "p", Path: "/dev/disk/by-id/busy"})
	var se *gateway.StatusError
	if !errors.As(err, &se) || se.Status != 409 || !strings.Contains(se.Message, "in use by ext4") {
		t.Fatalf("refused device: %v", err)
	}
}

func TestHTTPClient(t *testing.T) {
	ctx := context.Background()
	ts, logins, expired := fakeServer(t)
	tp := gateway.Thumbprint(ts.Certificate().Raw)
	c, err := gateway.NewHTTPClient(gateway.Config{URL: ts.URL, Username: "admin", Password: "s3cret-pass", Thumbprint: strings.ToUpper(tp[:2]) + ":" + tp[2:]})
	if err != nil {
		t.Fatal(err)
	}
	sys, err := c.System(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if sys.Health.Status != "degraded" || sys.Health.SDSsDown[0] != "sds-b" || sys.System.Name != "c1" || sys.Capacity.Usable != 4 {
		t.Fatalf("system %+v", sys)
	}
	v, err := c.GetVolume(ctx, "vol 1")
	if err != nil || v.WWN != "6c0ffee0000000000000000000000001" || v.Mappings[0].HostID != "h1" {
		t.Fatalf("volume %+v %v", v, err)
	}
	_, err = c.GetVolume(ctx, "nope")
	if !errors.Is(err, gateway.ErrNotFound) || !strings.Contains(err.Error(), `volume "nope" not found`) {
		t.Fatalf("404: %v", err)
	}
	_, err = c.CreateVolume(ctx, gateway.VolumeSpec{Name: "x", Pool: "p", Size: 1 << 30, Thin: true})
	var se *gateway.StatusError
	if !errors.As(err, &se) || se.Status != 409 || se.Message != "volume name taken: pick another name" || errors.Is(err, gateway.ErrNotFound) {
		t.Fatalf("409: %v", err)
	}
	if err := c.MapVolume(ctx, "00000000000000a1", "esx-02"); err != nil {
		t.Fatal(err)
	}
	if err := c.MapVolumeAs(ctx, "00000000000000a1", "esx-02", true); err != nil {
		t.Fatal(err)
	}
	if err := c.UnmapVolume(ctx, "00000000000000a1", "esx-02"); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteVolume(ctx, "00000000000000a1"); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteVolume(ctx, "mapped"); !errors.As(err, &se) || se.Status != 409 || !strings.Contains(se.Message, "unmap it first") {
		t.Fatalf("delete of a mapped volume: %v", err)
	}
	// An expired token costs one re-login, transparently.
	expired.Store(true)
	if _, err := c.System(ctx); err != nil {
		t.Fatal(err)
	}
	if n := logins.Load(); n != 2 {
		t.Fatalf("%d logins", n)
	}

	// Wrong password: the gateway's message comes through.
	bad, _ := gateway.NewHTTPClient(gateway.Config{URL: ts.URL, Username: "admin", Password: "wrong", Thumbprint: tp})
	if _, err := bad.System(ctx); err == nil || !strings.Contains(err.Error(), "wrong user name or password") {
		t.Fatalf("bad login: %v", err)
	}
	// A different certificate is refused before any credential is sent.
	other, _ := gateway.NewHTTPClient(gateway.Config{URL: ts.URL, Username: "admin", Password: "s3cret-pass", Thumbprint: strings.Repeat("00", 32)})
	before := logins.Load()
	if _, err := other.System(ctx); err == nil || !strings.Contains(err.Error(), "does not match the pinned") {
		t.Fatalf("pin mismatch: %v", err)
	}
	if logins.Load() != before {
		t.Fatal("credentials sent to an unpinned server")
	}
	// CA file pinning works too.
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ts.Certificate().Raw})
	byCA, err := gateway.NewHTTPClient(gateway.Config{URL: ts.URL, Username: "admin", Password: "s3cret-pass", CAPEM: ca})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := byCA.System(ctx); err != nil {
		t.Fatalf("CA pin: %v", err)
	}
	for _, cfg := range []gateway.Config{{URL: "http://x:1", Thumbprint: "a"}, {URL: ts.URL}, {URL: ts.URL, Thumbprint: "a", CAPEM: ca}} {
		if _, err := gateway.NewHTTPClient(cfg); err == nil {
			t.Fatalf("config %+v accepted", cfg)
		}
	}
}

// FuzzDecode: whatever a gateway answers, decoding into the client's types
// neither panics nor hangs.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"health":{"status":"ok","sds_down_names":["a"]},"system":null}`))
	f.Add([]byte(`{"code":"invalid","field":"","message":"x"}`))
	f.Add([]byte(`[{"id":"1","mappings":[{"host_id":"h"}]}]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var s gateway.System
		_ = json.Unmarshal(data, &s)
		var v []gateway.Volume
		_ = json.Unmarshal(data, &v)
		_ = gateway.ErrorMessage(data)
	})
}

// With several gateways, the client moves on when the one in use is down (its host
// being patched) and stays with the one that answers; a gateway that answers with the
// wrong certificate is an error, never a reason to try another.
func TestHTTPClientFailover(t *testing.T) {
	ctx := context.Background()
	a, aLogins, _ := fakeServer(t)
	b, bLogins, _ := fakeServer(t)
	tp := func(ts *httptest.Server) string { return gateway.Thumbprint(ts.Certificate().Raw) }
	c, err := gateway.NewHTTPClient(gateway.Config{URL: a.URL, Thumbprint: tp(a), Username: "admin", Password: "s3cret-pass",
		Failover: []gateway.Endpoint{{URL: b.URL, Thumbprint: tp(b)}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.System(ctx); err != nil || aLogins.Load() != 1 || bLogins.Load() != 0 {
		t.Fatalf("first gateway not used: %v, logins %d/%d", err, aLogins.Load(), bLogins.Load())
	}
	a.Close()
	for i := range 3 {
		if _, err := c.System(ctx); err != nil {
			t.Fatalf("call %d with the first gateway down: %v", i, err)
		}
	}
	if bLogins.Load() != 0 {
		t.Fatalf("second gateway logins %d: sessions are shared (etcd), the token works there", bLogins.Load())
	}
	b.Close()
	if _, err := c.System(ctx); err == nil || !strings.Contains(err.Error(), "no gateway of the system answers (2 tried)") {
		t.Fatalf("all down: %v", err)
	}

	// A pinning failure is not failed over.
	d, _, _ := fakeServer(t)
	e, eLogins, _ := fakeServer(t)
	bad, _ := gateway.NewHTTPClient(gateway.Config{URL: d.URL, Thumbprint: strings.Repeat("00", 32), Username: "admin", Password: "s3cret-pass",
		Failover: []gateway.Endpoint{{URL: e.URL, Thumbprint: tp(e)}}})
	if _, err := bad.System(ctx); err == nil || !strings.Contains(err.Error(), "does not match the pinned") || eLogins.Load() != 0 {
		t.Fatalf("wrong certificate: %v (second gateway logins %d)", err, eLogins.Load())
	}
}

// TestHTTPClientRepeatsLostAnswers: a request whose connection is closed after it
// arrived, before any answer, is sent once more when the API makes a repeat
// harmless (map), and only once: a join-token create is not sent twice.
func TestHTTPClientRepeatsLostAnswers(t *testing.T) {
	var maps, tokens atomic.Int32
	drop := func(w http.ResponseWriter) {
		conn, _, err := w.(http.Hijacker).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		conn.Close()
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/v1/login", func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"token":"tok","expires":"2030-01-01T00:00:00Z","user":"admin","role":"admin"}`))
	})
	mux.HandleFunc("POST /api/v1/volumes/{ref}/map", func(w http.ResponseWriter, r *http.Request) {
		if maps.Add(1)%2 == 1 {
			drop(w)
			return
		}
		_, _ = w.Write([]byte(`{}`))
	})
	mux.HandleFunc("POST /api/v1/system/join-tokens", func(w http.ResponseWriter, r *http.Request) {
		tokens.Add(1)
		drop(w)
	})
	ts := httptest.NewTLSServer(mux)
	defer ts.Close()
	c, err := gateway.NewHTTPClient(gateway.Config{URL: ts.URL, Thumbprint: gateway.Thumbprint(ts.Certificate().Raw), Username: "admin", Password: "s3cret-pass"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := c.MapVolume(ctx, "v1", "esx-01"); err != nil || maps.Load() != 2 {
		t.Fatalf("map whose first answer was lost: %v after %d requests, want success after 2", err, maps.Load())
	}
	if _, err := c.CreateJoinToken(ctx, []string{"sds"}, time.Hour); err == nil || tokens.Load() != 1 {
		t.Fatalf("join-token create whose answer was lost: %v after %d requests, want an error after 1", err, tokens.Load())
	}
}
