package gateway

// Upgrade delivery (docs/api.md, "Upgrade"; internal/update): the gateway
// is the one channel to every SVM. An admin uploads an update bundle (POST
// /upgrade/bundles, verified with the SVMs' own reader before it is stored
// in etcd), then orders one SVM at a time to run a stored version (POST
// /upgrade/svms/{name}); that SVM's updater carries the order out and
// reports its state, which GET /upgrade/svms lists. Which SVMs to order
// when (one fault set at a time, under maintenance) is the caller's: the
// plugin's rolling upgrade.

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/cairn-storage/cairn/appliance/internal/model"
	"github.com/cairn-storage/cairn/appliance/internal/update"
)

// bodyLimits are the request bodies allowed to be larger than maxBody.
var bodyLimits = map[string]int64{
	"POST " + APIPrefix + "/upgrade/bundles": update.MaxBundleSize,
}

// bundleContentType is the media type of an uploaded bundle.
const bundleContentType = "application/gzip"

// upgradeOrderRequest is POST /upgrade/svms/{name}.
type upgradeOrderRequest struct {
	Version string `json:"version"`
}

// bundleView is a stored bundle in responses.
type bundleView struct {
	Version  string `json:"version"`
	SHA256   string `json:"sha256"`
	Size     int64  `json:"size"`
	Uploaded string `json:"uploaded"`
}

// upgradeSVMView is one SVM in GET /upgrade/svms.
type upgradeSVMView struct {
	Name    string `json:"name"`
	Running string `json:"running"`
	Ordered string `json:"ordered"`
	State   string `json:"state"`
	Message string `json:"message"`
	Updated string `json:"updated"`
}

func viewOfBundle(i update.BundleInfo) bundleView {
	return bundleView{Version: i.Version, SHA256: i.SHA256, Size: i.Size, Uploaded: i.Uploaded.UTC().Format("2006-01-02T15:04:05Z")}
}

func (s *Server) upgradeStore() update.Store { return update.Store{Etcd: s.cfg.Etcd} }

// uploadBundle: POST /upgrade/bundles, the body the bundle's bytes.
func (s *Server) uploadBundle(c *call) (int, any, error) {
	if ct, _, _ := strings.Cut(c.r.Header.Get("Content-Type"), ";"); strings.TrimSpace(ct) != bundleContentType {
		return 0, nil, errorf(http.StatusBadRequest, "an update bundle is sent as Content-Type %s, not %q (cairnctl upgrade upload FILE)", bundleContentType, ct)
	}
	// The server's 60 s read timeout is for JSON requests; a bundle of up to
	// 256 MiB gets 10 minutes.
	rc := http.NewResponseController(c.w)
	rc.SetReadDeadline(time.Now().Add(10 * time.Minute))
	rc.SetWriteDeadline(time.Now().Add(11 * time.Minute))
	raw, err := io.ReadAll(io.LimitReader(c.r.Body, update.MaxBundleSize+1))
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe) || len(raw) > update.MaxBundleSize:
		return 0, nil, errorf(http.StatusBadRequest, "the bundle is larger than %d MiB", update.MaxBundleSize>>20)
	case err != nil:
		return 0, nil, errorf(http.StatusBadRequest, "read the bundle: %v", err)
	}
	b, err := update.Parse(raw)
	if err != nil {
		return 0, nil, errorf(http.StatusBadRequest, "%v: build it with `cairn bundle --bin DIR --out FILE`", err)
	}
	info, err := s.upgradeStore().PutBundle(c.ctx, b, raw)
	if err != nil {
		return 0, nil, fmt.Errorf("%v: %w", err, model.ErrUnavailable)
	}
	c.object = &objectRef{Kind: "bundle", ID: info.Version, Name: info.Version}
	return http.StatusCreated, viewOfBundle(info), nil
}

// listBundles: GET /upgrade/bundles.
func (s *Server) listBundles(c *call) (int, any, error) {
	all, err := s.upgradeStore().Bundles(c.ctx)
	if err != nil {
		return 0, nil, fmt.Errorf("%v: %w", err, model.ErrUnavailable)
	}
	out := make([]bundleView, 0, len(all))
	for _, i := range all {
		out = append(out, viewOfBundle(i))
	}
	return http.StatusOK, out, nil
}

// orderUpgrade: POST /upgrade/svms/{name}.
func (s *Server) orderUpgrade(c *call) (int, any, error) {
	var req upgradeOrderRequest
	if err := c.decode(&req); err != nil {
		return 0, nil, err
	}
	name := c.r.PathValue("name")
	st := s.upgradeStore()
	if !update.ValidVersion(req.Version) {
		return 0, nil, model.WithField(errorf(http.StatusBadRequest, "version %q is not a release number MAJOR.MINOR.PATCH", req.Version), "version")
	}
	if _, err := st.BundleInfo(c.ctx, req.Version); errors.Is(err, update.ErrNotFound) {
		return 0, nil, model.WithField(errorf(http.StatusNotFound, "no bundle of version %s is stored; upload it first (cairnctl upgrade upload FILE; cairnctl upgrade ls lists the stored ones)", req.Version), "version")
	} else if err != nil {
		return 0, nil, fmt.Errorf("%v: %w", err, model.ErrUnavailable)
	}
	cur, err := st.State(c.ctx, name)
	if errors.Is(err, update.ErrNotFound) {
		return 0, nil, errorf(http.StatusNotFound, "no updater has reported from SVM %q: check the name (cairnctl upgrade ls) and that cairn-updater.service runs there", name)
	} else if err != nil {
		return 0, nil, fmt.Errorf("%v: %w", err, model.ErrUnavailable)
	}
	if cur.State == update.StateDownloading || cur.State == update.StateInstalling {
		return 0, nil, errorf(http.StatusConflict, "SVM %s is %s %s; wait until it is done (cairnctl upgrade ls)", name, cur.State, cur.Ordered)
	}
	if _, err := st.PutOrder(c.ctx, name, req.Version); err != nil {
		return 0, nil, fmt.Errorf("%v: %w", err, model.ErrUnavailable)
	}
	c.object = &objectRef{Kind: "svm", ID: name, Name: name}
	cur.Ordered = req.Version
	return http.StatusAccepted, viewOfState(cur), nil
}

func viewOfState(st update.State) upgradeSVMView {
	v := upgradeSVMView{Name: st.Name, Running: st.Running, Ordered: st.Ordered, State: st.State, Message: st.Message}
	if !st.Updated.IsZero() {
		v.Updated = st.Updated.UTC().Format(time.RFC3339Nano)
	}
	return v
}

// listUpgradeSVMs: GET /upgrade/svms.
func (s *Server) listUpgradeSVMs(c *call) (int, any, error) {
	all, err := s.upgradeStore().States(c.ctx)
	if err != nil {
		return 0, nil, fmt.Errorf("%v: %w", err, model.ErrUnavailable)
	}
	out := make([]upgradeSVMView, 0, len(all))
	for _, st := range all {
		out = append(out, viewOfState(st))
	}
	return http.StatusOK, out, nil
}
