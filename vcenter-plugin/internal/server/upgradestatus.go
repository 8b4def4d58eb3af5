package server

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/cairn-storage/cairn/vcenter-plugin/internal/gateway"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/plan"
)

// The upgrade page's read side: what the system's gateway stores and what
// each SVM's updater reports, read with the signed-in user's rights
// (Cairn.Monitor), as the dashboards read statistics. Starting and
// stopping a roll are change.go's (Cairn.Administer).

// UpgradeBundles is GET /api/v1/systems/{system}/upgrade/bundles.
type UpgradeBundles struct {
	System  string           `json:"system"`
	Bundles []gateway.Bundle `json:"bundles"`
}

// UploadedBundle is POST /api/v1/systems/{system}/upgrade/bundles.
type UploadedBundle struct {
	System string         `json:"system"`
	Bundle gateway.Bundle `json:"bundle"`
}

// UpgradeSVMs is GET /api/v1/systems/{system}/upgrade/svms: one entry per
// SVM whose updater has reported, by name.
type UpgradeSVMs struct {
	System string       `json:"system"`
	SVMs   []UpgradeSVM `json:"svms"`
}

// UpgradeSVM is an SVM's updater as the gateway reports it, with the ESXi
// host of the plan it runs on: the name an upgrade request's "hosts" take
// (the UI chooses SVMs by it). Host is absent for an SVM the plan does not
// know (its updater reports to the gateway, but no upgrade can order it).
type UpgradeSVM struct {
	gateway.UpgradeSVM
	Host string `json:"host,omitempty"`
}

func (s *Server) upgradeBundles(w http.ResponseWriter, r *http.Request, us *userSession) {
	api, _, err := s.systemGateway(w, r, us, "read the upgrade bundles of system")
	if err != nil {
		return
	}
	bs, err := api.ListBundles(r.Context())
	if err != nil {
		writeGatewayError(w, err)
		return
	}
	if bs == nil {
		bs = []gateway.Bundle{} // [] rather than null: none stored
	}
	writeJSON(w, http.StatusOK, UpgradeBundles{System: r.PathValue("system"), Bundles: bs})
}

func (s *Server) upgradeSVMs(w http.ResponseWriter, r *http.Request, us *userSession) {
	api, p, err := s.systemGateway(w, r, us, "read the SVM updaters of system")
	if err != nil {
		return
	}
	svms, err := api.ListUpgradeSVMs(r.Context())
	if err != nil {
		writeGatewayError(w, err)
		return
	}
	hostOf := map[string]string{}
	for _, h := range p.Hosts {
		if h.HasSVM() {
			hostOf[plan.SVMHostname(h.Name)] = h.Name
		}
	}
	out := []UpgradeSVM{} // [] rather than null: none reported
	for _, u := range svms {
		out = append(out, UpgradeSVM{UpgradeSVM: u, Host: hostOf[u.Name]})
	}
	writeJSON(w, http.StatusOK, UpgradeSVMs{System: r.PathValue("system"), SVMs: out})
}

// uploadBundle stores an update bundle on the system's gateway: the body is
// the bundle's bytes (application/gzip). Storing what every SVM may be
// ordered to install takes Cairn.Administer, as the upgrade itself does.
// The gateway checks the bundle; its refusal comes back as a 400 saying
// what is wrong. One upload per system at a time: the bundle is held in
// memory (up to 256 MiB) until the gateway has it.
func (s *Server) uploadBundle(w http.ResponseWriter, r *http.Request, us *userSession) {
	system := r.PathValue("system")
	api, _, err := s.systemGatewayAs(w, r, us, PrivAdminister, "store an update bundle on system")
	if err != nil {
		return
	}
	if ct, _, _ := strings.Cut(r.Header.Get("Content-Type"), ";"); strings.TrimSpace(ct) != "application/gzip" {
		writeError(w, http.StatusUnsupportedMediaType, "an update bundle is sent as Content-Type application/gzip (the file `cairn bundle --bin DIR --out FILE` wrote), not %q", ct)
		return
	}
	if r.ContentLength > gateway.MaxBundleSize {
		writeError(w, http.StatusRequestEntityTooLarge, "the bundle is %d MiB, larger than the gateway's %d MiB: is it a Cairn update bundle?", r.ContentLength>>20, gateway.MaxBundleSize>>20)
		return
	}
	s.mu.Lock()
	busy := s.uploading[system]
	if !busy {
		s.uploading[system] = true
	}
	s.mu.Unlock()
	if busy {
		writeError(w, http.StatusConflict, "a bundle is being uploaded to system %s: wait until that upload ends, then send this one again", system)
		return
	}
	defer func() {
		s.mu.Lock()
		delete(s.uploading, system)
		s.mu.Unlock()
	}()
	// A bundle of 256 MiB over a slow link: ten minutes.
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(10 * time.Minute))
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, gateway.MaxBundleSize))
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		writeError(w, http.StatusRequestEntityTooLarge, "the bundle is larger than the gateway's %d MiB: is it a Cairn update bundle?", gateway.MaxBundleSize>>20)
		return
	case err != nil:
		writeError(w, http.StatusBadRequest, "read the bundle: %v (send it again)", err)
		return
	case len(data) == 0:
		writeError(w, http.StatusBadRequest, "no bundle: send the file `cairn bundle --bin DIR --out FILE` wrote as the body")
		return
	}
	b, err := api.UploadBundle(r.Context(), data)
	if err != nil {
		writeGatewayError(w, err)
		return
	}
	s.cfg.Logger.Info("update bundle stored", "system", system, "version", b.Version, "bytes", b.Size, "sha256", b.SHA256, "user", us.user)
	writeJSON(w, http.StatusCreated, UploadedBundle{System: system, Bundle: *b})
}
