package gateway

// The certificates of the cluster (docs/api.md section 8): every daemon
// started with --pki publishes its certificate's pki.Info under
// model.CertPrefix; each gateway serving HTTPS publishes its HTTPS
// certificate there too (role "https", name "<host>:<port>"), because that
// is the certificate clients meet first. GET /system/certificates lists
// them with their expiry, and observe raises an alert per certificate that
// expires within certExpiringWithin (or has expired) — from the published
// list, so that every gateway derives the same alerts.

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"net/http"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/cairn-storage/cairn/appliance/internal/buildinfo"
	"github.com/cairn-storage/cairn/appliance/internal/model"
	"github.com/cairn-storage/cairn/appliance/internal/pki"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// certExpiringWithin: a certificate this close to its end is "expiring"
// and raises an alert (a renewal needs an admin; a month leaves time).
const certExpiringWithin = 30 * 24 * time.Hour

// Certificate statuses.
const (
	CertOK       = "ok"
	CertExpiring = "expiring"
	CertExpired  = "expired"
)

// Alert kinds of certificates.
const (
	AlertCertificateExpiring = "certificate-expiring"
	AlertCertificateExpired  = "certificate-expired"
)

// httpsCertRole is the role the gateway's HTTPS certificate is listed
// under (not a pki role: the certificate is the gateway's own or an
// admin's, not the cluster CA's).
const httpsCertRole = "https"

// certificateView is one certificate in GET /system/certificates.
type certificateView struct {
	pki.Info
	DaysLeft int    `json:"days_left"` // whole days until not_after; negative once expired
	Status   string `json:"status"`    // ok, expiring (< 30 days) or expired
}

func viewOfCert(i pki.Info, now time.Time) certificateView {
	left := i.NotAfter.Sub(now)
	v := certificateView{Info: i, DaysLeft: int(left.Hours() / 24), Status: CertOK}
	switch {
	case left <= 0:
		v.Status = CertExpired
		if v.DaysLeft == 0 {
			v.DaysLeft = -1 // expired today reads as expired, not "0 days left"
		}
	case left < certExpiringWithin:
		v.Status = CertExpiring
	}
	return v
}

// publishedCerts reads every published certificate. A value that does not
// decode is skipped: a listing must not fail on one bad entry.
func (s *Server) publishedCerts(ctx context.Context) ([]pki.Info, error) {
	r, err := s.cfg.Etcd.Get(ctx, model.CertPrefix, clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("read certificates: %v: %w", err, model.ErrUnavailable)
	}
	out := make([]pki.Info, 0, len(r.Kvs))
	for _, kv := range r.Kvs {
		var i pki.Info
		if json.Unmarshal(kv.Value, &i) != nil || i.Role == "" || i.Name == "" {
			continue
		}
		out = append(out, i)
	}
	return out, nil
}

// httpsCertName names this gateway's HTTPS certificate: its host name and
// port (several gateways may share a host, e.g. in tests).
func (s *Server) httpsCertName() string {
	host, _ := os.Hostname()
	if host == "" {
		host = "gateway"
	}
	_, port, err := net.SplitHostPort(s.cfg.Listen)
	if err != nil || port == "" {
		return host
	}
	return host + ":" + port
}

// httpsCertInfo describes the HTTPS certificate served now (the zero Info
// without TLS or when the files cannot be read).
func (s *Server) httpsCertInfo() pki.Info {
	if s.certs == nil {
		return pki.Info{}
	}
	kp, err := s.certs.load()
	if err != nil || kp.Leaf == nil {
		return pki.Info{}
	}
	i := pki.InfoOf(kp.Leaf)
	i.Role, i.Name = httpsCertRole, s.httpsCertName()
	i.Version = buildinfo.Version()
	return i
}

// publishHTTPSCert keeps this gateway's HTTPS certificate listed until ctx
// ends (nothing without TLS).
func (s *Server) publishHTTPSCert(ctx context.Context) {
	if s.certs == nil {
		return
	}
	pki.PublishInfo(ctx, s.cfg.Etcd, s.httpsCertInfo, s.log)
}

// listCertificates: GET /system/certificates.
func (s *Server) listCertificates(c *call) (int, any, error) {
	infos, err := s.publishedCerts(c.ctx)
	if err != nil {
		return 0, nil, err
	}
	// This gateway's own HTTPS certificate is listed even before its first
	// publication.
	if own := s.httpsCertInfo(); own.Role != "" {
		found := false
		for _, i := range infos {
			found = found || (i.Role == own.Role && i.Name == own.Name)
		}
		if !found {
			infos = append(infos, own)
		}
	}
	now := time.Now()
	out := make([]certificateView, 0, len(infos))
	for _, i := range infos {
		out = append(out, viewOfCert(i, now))
	}
	sort.Slice(out, func(a, b int) bool {
		if out[a].Role != out[b].Role {
			return out[a].Role < out[b].Role
		}
		return out[a].Name < out[b].Name
	})
	return http.StatusOK, out, nil
}

// publishedConditions are the alerts what the daemons publish calls for:
// their certificates' expiry and the versions they run.
func (s *Server) publishedConditions(ctx context.Context, now time.Time) (map[string]condition, error) {
	infos, err := s.publishedCerts(ctx)
	if err != nil {
		return nil, err
	}
	out := certificateConditions(infos, now)
	maps.Copy(out, versionConditions(infos))
	return out, nil
}

// certificateConditions are the alerts the published certificates call for.
func certificateConditions(infos []pki.Info, now time.Time) map[string]condition {
	out := map[string]condition{}
	for _, i := range infos {
		v := viewOfCert(i, now)
		if v.Status == CertOK {
			continue
		}
		obj := &objectRef{Kind: "certificate", ID: i.Role + "/" + i.Name, Name: i.Name}
		a := Alert{Severity: SeverityWarning, Kind: AlertCertificateExpiring, Object: obj,
			Message: fmt.Sprintf("the %s certificate of %s (serial %s) expires in %d days (%s): %s", i.Role, i.Name, i.Serial, v.DaysLeft,
				i.NotAfter.UTC().Format(time.RFC3339), renewalHint(i))}
		if v.Status == CertExpired {
			a.Severity, a.Kind = SeverityError, AlertCertificateExpired
			a.Message = fmt.Sprintf("the %s certificate of %s (serial %s) expired on %s; its peers refuse it: %s", i.Role, i.Name, i.Serial,
				i.NotAfter.UTC().Format(time.RFC3339), renewalHint(i))
		}
		k := a.Kind + "/" + obj.ID
		out[k] = condition{a, k}
	}
	return out
}

// renewalHint says how to renew a certificate of role i.Role.
func renewalHint(i pki.Info) string {
	switch i.Role {
	case httpsCertRole:
		return "replace cert.pem and key.pem in that gateway's state directory (reloaded on change)"
	case "ca":
		return "create a new cluster CA and re-issue every node certificate"
	}
	return fmt.Sprintf("issue a new one on an MDM with `cairn pki issue --ca DIR --out DIR --role %s --name %s` into the daemon's --pki directory (reloaded on change)",
		i.Role, strings.ReplaceAll(i.Name, " ", "_"))
}
