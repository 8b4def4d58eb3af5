package gateway

// The gateway's upgrade delivery (docs/api.md, "Upgrade"): what the
// plugin's rolling upgrade calls. For each unit of the roll (a host or a
// fault set): enter SDS maintenance, OrderUpgrade each of its SVMs, poll
// ListUpgradeSVMs until each is done (or failed / rolled-back: stop the
// roll), exit maintenance, wait for the resync; then the next unit.

import (
	"context"
	"net/http"
)

// Upgrades is the part of API the rolling upgrade (deploy.Upgrade) uses.
type Upgrades interface {
	// ListBundles lists the stored bundles.
	ListBundles(ctx context.Context) ([]Bundle, error)
	// UploadBundle stores an update bundle (the bytes `cairn bundle`
	// wrote); the gateway checks it and answers 400 for one it refuses.
	UploadBundle(ctx context.Context, data []byte) (*Bundle, error)
	// OrderUpgrade orders SVM svm to run a stored version; the answer is
	// the updater's state when ordered. The gateway refuses (409) while
	// the SVM is downloading or installing an earlier order.
	OrderUpgrade(ctx context.Context, svm, version string) (*UpgradeSVM, error)
	// ListUpgradeSVMs lists every SVM's updater that has reported.
	ListUpgradeSVMs(ctx context.Context) ([]UpgradeSVM, error)
}

// MaxBundleSize is the gateway's bound on an update bundle (the
// appliance's update.MaxBundleSize).
const MaxBundleSize = 256 << 20

// Bundle is a stored update bundle (GET/POST /api/v1/upgrade/bundles).
type Bundle struct {
	Version  string `json:"version"`
	SHA256   string `json:"sha256"`
	Size     int64  `json:"size"`
	Uploaded string `json:"uploaded"`
}

// Updater states of an SVM (UpgradeSVM.State).
const (
	UpgradeIdle        = "idle"
	UpgradeDownloading = "downloading"
	UpgradeInstalling  = "installing"
	UpgradeDone        = "done"
	UpgradeFailed      = "failed"
	UpgradeRolledBack  = "rolled-back"
)

// UpgradeSVM is one SVM's updater (GET /api/v1/upgrade/svms). Updated
// changes with every state it writes: an order is carried out when the state
// is final and Updated differs from what OrderUpgrade answered.
type UpgradeSVM struct {
	Name    string `json:"name"`
	Running string `json:"running"`
	Ordered string `json:"ordered"`
	State   string `json:"state"`
	Message string `json:"message"`
	Updated string `json:"updated"`
}

// Final says whether the SVM's updater is at rest after its order.
func (s UpgradeSVM) Final() bool {
	return s.State == UpgradeDone || s.State == UpgradeFailed || s.State == UpgradeRolledBack
}

// UploadBundle stores an update bundle (the bytes `cairn bundle` wrote).
func (c *HTTPClient) UploadBundle(ctx context.Context, data []byte) (*Bundle, error) {
	var b Bundle
	if err := c.do(ctx, http.MethodPost, "/api/v1/upgrade/bundles", rawBody{"application/gzip", data}, &b); err != nil {
		return nil, err
	}
	return &b, nil
}

// ListBundles lists the stored bundles.
func (c *HTTPClient) ListBundles(ctx context.Context) ([]Bundle, error) {
	var out []Bundle
	return out, c.do(ctx, http.MethodGet, "/api/v1/upgrade/bundles", nil, &out)
}

// OrderUpgrade orders the SVM svm to run a stored version; the answer is its
// state when ordered.
func (c *HTTPClient) OrderUpgrade(ctx context.Context, svm, version string) (*UpgradeSVM, error) {
	var s UpgradeSVM
	if err := c.do(ctx, http.MethodPost, "/api/v1/upgrade/svms/"+esc(svm), map[string]string{"version": version}, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// ListUpgradeSVMs lists each SVM's updater.
func (c *HTTPClient) ListUpgradeSVMs(ctx context.Context) ([]UpgradeSVM, error) {
	var out []UpgradeSVM
	return out, c.do(ctx, http.MethodGet, "/api/v1/upgrade/svms", nil, &out)
}
