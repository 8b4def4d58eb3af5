// The gateway's upgrade delivery as the fake keeps it: stored bundles and
// one updater per SVM that has powered on. An order advances one state per
// ListUpgradeSVMs (downloading, installing, then done on the new version,
// or rolled-back on the old one for a version marked broken), as the SVM's
// updater would between the gateway's reads.

package gatewayfake

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"sort"
	"time"

	"github.com/cairn-storage/cairn/appliance/contract"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/gateway"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/vcsimkit"
)

// FirstVersion is the version every SVM's updater reports at its first
// start (what the template runs).
const FirstVersion = "0.1.0"

// StoreBundle stores a bundle of version; broken makes every updater
// ordered to it roll back (its daemons would not start).
func (a *Array) StoreBundle(version string, broken bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.bundles == nil {
		a.bundles = map[string]bool{}
	}
	a.bundles[version] = broken
}

// reportUpdater records the updater of an SVM that started (its
// cairn.hostname), on FirstVersion unless it reported before.
func (a *Array) reportUpdater(svm vcsimkit.SVM) {
	name := svm.Properties[contract.KeyHostname]
	if name == "" {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.updaters == nil {
		a.updaters = map[string]*gateway.UpgradeSVM{}
	}
	if a.updaters[name] == nil {
		a.updaters[name] = &gateway.UpgradeSVM{Name: name, Running: FirstVersion, State: gateway.UpgradeIdle, Updated: a.stamp()}
	}
}

// stamp is a new Updated value (the gateway's RFC 3339 time with
// nanoseconds; a sequence keeps two stamps of one instant apart).
func (a *Array) stamp() string {
	a.seq++
	return fmt.Sprintf("%s#%d", time.Now().UTC().Format(time.RFC3339Nano), a.seq)
}

func (a *Array) ListBundles(ctx context.Context) ([]gateway.Bundle, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := []gateway.Bundle{}
	for v := range a.bundles {
		if b, ok := a.uploaded[v]; ok {
			out = append(out, b)
			continue
		}
		// A bundle stored by StoreBundle has no bytes: its size is a real
		// bundle's order of magnitude, its digest the version's.
		sum := sha256.Sum256([]byte("cairn bundle " + v))
		out = append(out, gateway.Bundle{Version: v, Size: 46 << 20, SHA256: hex.EncodeToString(sum[:])})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	return out, nil
}

// releaseNumber is the gateway's MAJOR.MINOR.PATCH (update.ValidVersion).
var releaseNumber = regexp.MustCompile(`^[0-9]{1,6}\.[0-9]{1,6}\.[0-9]{1,6}$`)

// UploadBundle stores a bundle as the gateway does, with the checks of its
// outside: gzip, then tar, regular files only, a manifest.json naming a
// release number, the gateway's size bound; a refusal is a 400 that says
// what is wrong. What the real gateway checks further (the manifest's
// format and file digests, the binaries) is the appliance's update.Parse,
// exercised through the same client call by tests/e2e.
func (a *Array) UploadBundle(ctx context.Context, data []byte) (*gateway.Bundle, error) {
	refuse := func(format string, args ...any) error {
		return &gateway.StatusError{Method: "POST", Path: "/api/v1/upgrade/bundles", Status: http.StatusBadRequest,
			Message: "invalid update bundle: " + fmt.Sprintf(format, args...) + ": build it with `cairn bundle --bin DIR --out FILE`"}
	}
	if len(data) > gateway.MaxBundleSize {
		return nil, refuse("larger than %d MiB", gateway.MaxBundleSize>>20)
	}
	version, err := bundleVersion(data)
	if err != nil {
		return nil, refuse("%v", err)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := a.call("UploadBundle", version); err != nil {
		return nil, err
	}
	sum := sha256.Sum256(data)
	b := gateway.Bundle{Version: version, SHA256: hex.EncodeToString(sum[:]), Size: int64(len(data)), Uploaded: a.now().UTC().Format("2006-01-02T15:04:05Z")}
	if a.bundles == nil {
		a.bundles = map[string]bool{}
	}
	if a.uploaded == nil {
		a.uploaded = map[string]gateway.Bundle{}
	}
	a.bundles[version], a.uploaded[version] = false, b
	return &b, nil
}

// bundleVersion reads the version of a bundle's manifest.json.
func bundleVersion(data []byte) (string, error) {
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return "", fmt.Errorf("not gzip: %v", err)
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return "", errors.New("no manifest.json")
		}
		if err != nil {
			return "", fmt.Errorf("tar: %v", err)
		}
		if h.Typeflag != tar.TypeReg {
			return "", fmt.Errorf("%q is not a regular file", h.Name)
		}
		if h.Name != "manifest.json" {
			continue
		}
		var m struct {
			Version string `json:"version"`
		}
		if err := json.NewDecoder(io.LimitReader(tr, 64<<10)).Decode(&m); err != nil {
			return "", fmt.Errorf("manifest.json: %v", err)
		}
		if !releaseNumber.MatchString(m.Version) {
			return "", fmt.Errorf("version %q is not a release number MAJOR.MINOR.PATCH", m.Version)
		}
		return m.Version, nil
	}
}

// OrderUpgrade is the gateway's order: 404 for a bundle not stored or an
// SVM whose updater never reported, 409 while an order is carried out.
func (a *Array) OrderUpgrade(ctx context.Context, svm, version string) (*gateway.UpgradeSVM, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	path := "/api/v1/upgrade/svms/" + svm
	if _, ok := a.bundles[version]; !ok {
		return nil, &gateway.StatusError{Method: "POST", Path: path, Status: http.StatusNotFound, Message: "no bundle of version " + version + " is stored; upload it first"}
	}
	u := a.updaters[svm]
	if u == nil {
		return nil, &gateway.StatusError{Method: "POST", Path: path, Status: http.StatusNotFound, Message: "no updater has reported from SVM " + svm}
	}
	if u.State == gateway.UpgradeDownloading || u.State == gateway.UpgradeInstalling {
		return nil, &gateway.StatusError{Method: "POST", Path: path, Status: http.StatusConflict, Message: fmt.Sprintf("SVM %s is %s %s; wait until it is done", svm, u.State, u.Ordered)}
	}
	if err := a.call("OrderUpgrade", svm+":"+version); err != nil {
		return nil, err
	}
	answer := *u
	answer.Ordered = version
	u.Ordered, u.State, u.Message, u.Updated = version, gateway.UpgradeDownloading, "", a.stamp()
	return &answer, nil
}

// ListUpgradeSVMs lists the updaters, each order one state further.
func (a *Array) ListUpgradeSVMs(ctx context.Context) ([]gateway.UpgradeSVM, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := []gateway.UpgradeSVM{}
	for _, u := range a.updaters {
		switch u.State {
		case gateway.UpgradeDownloading:
			u.State, u.Updated = gateway.UpgradeInstalling, a.stamp()
		case gateway.UpgradeInstalling:
			if a.bundles[u.Ordered] {
				u.State, u.Message = gateway.UpgradeRolledBack, fmt.Sprintf("rolled back to %s: cairn-sds.service did not run version %s", u.Running, u.Ordered)
			} else {
				u.State, u.Running, u.Message = gateway.UpgradeDone, u.Ordered, "the updater restarts on "+u.Ordered
			}
			u.Updated = a.stamp()
		}
		out = append(out, *u)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Running is the version each SVM's updater runs, by SVM name.
func (a *Array) Running() map[string]string {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := map[string]string{}
	for n, u := range a.updaters {
		out[n] = u.Running
	}
	return out
}

func (s *Session) ListBundles(ctx context.Context) ([]gateway.Bundle, error) {
	if err := s.read("/api/v1/upgrade/bundles"); err != nil {
		return nil, err
	}
	return s.Array.ListBundles(ctx)
}

func (s *Session) UploadBundle(ctx context.Context, data []byte) (*gateway.Bundle, error) {
	if err := s.allow(gateway.RoleAdmin, "POST", "/api/v1/upgrade/bundles", "UploadBundle", true); err != nil {
		return nil, err
	}
	return s.Array.UploadBundle(ctx, data)
}

func (s *Session) OrderUpgrade(ctx context.Context, svm, version string) (*gateway.UpgradeSVM, error) {
	if err := s.allow(gateway.RoleAdmin, "POST", "/api/v1/upgrade/svms/"+svm, "OrderUpgrade "+svm, true); err != nil {
		return nil, err
	}
	return s.Array.OrderUpgrade(ctx, svm, version)
}

func (s *Session) ListUpgradeSVMs(ctx context.Context) ([]gateway.UpgradeSVM, error) {
	if err := s.read("/api/v1/upgrade/svms"); err != nil {
		return nil, err
	}
	return s.Array.ListUpgradeSVMs(ctx)
}
