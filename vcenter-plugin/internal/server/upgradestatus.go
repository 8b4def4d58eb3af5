package server

import (
	"net/http"

	"github.com/cairn-storage/cairn/vcenter-plugin/internal/gateway"
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
	System string               `json:"system"`
	SVMs   []gateway.UpgradeSVM `json:"svms"`
}

func (s *Server) upgradeBundles(w http.ResponseWriter, r *http.Request, us *userSession) {
	api, err := s.systemGateway(w, r, us, "read the upgrade bundles of system")
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
	api, err := s.systemGateway(w, r, us, "read the SVM updaters of system")
	if err != nil {
		return
	}
	svms, err := api.ListUpgradeSVMs(r.Context())
	if err != nil {
		writeGatewayError(w, err)
		return
	}
	if svms == nil {
		svms = []gateway.UpgradeSVM{}
	}
	writeJSON(w, http.StatusOK, UpgradeSVMs{System: r.PathValue("system"), SVMs: svms})
}
