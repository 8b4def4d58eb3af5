package server

import (
	"net/http"

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
