package gateway

// The Cairn versions the system runs (docs/api.md, "Versions"): every daemon
// publishes the version it runs with its certificate (pki.Publish, under its
// lease, so a stopped daemon drops out), and GET /system/versions counts
// them. More than one version is the state of a rolling upgrade, under way
// or stopped part way; an alert (versions-mixed, warning) stays active while
// it lasts, so that a roll left half done is not forgotten.

import (
	"fmt"
	"net/http"
	"sort"
	"strings"

	"github.com/cairn-storage/cairn/appliance/internal/buildinfo"
	"github.com/cairn-storage/cairn/appliance/internal/pki"
)

// AlertVersionsMixed: the running daemons do not all run one version.
const AlertVersionsMixed = "versions-mixed"

// versionUnknown stands for a daemon that published no version (built
// before daemons published one).
const versionUnknown = "unknown"

// daemonVersion is one running daemon in GET /system/versions.
type daemonVersion struct {
	Role    string `json:"role"`
	Name    string `json:"name"`
	Version string `json:"version"`
}

// versionsView is GET /system/versions.
type versionsView struct {
	Gateway  string          `json:"gateway"`  // the version of the gateway answering
	Versions map[string]int  `json:"versions"` // version -> running daemons
	Mixed    bool            `json:"mixed"`    // more than one version runs
	Daemons  []daemonVersion `json:"daemons"`  // sorted by role, then name
}

// versionsOf counts the versions of the daemons in infos. HTTPS
// certificates are left out: each belongs to a gateway that is listed
// with its node certificate, or, without --pki, by the gateway field.
func versionsOf(infos []pki.Info) versionsView {
	v := versionsView{Gateway: buildinfo.Version(), Versions: map[string]int{}, Daemons: []daemonVersion{}}
	for _, i := range infos {
		if i.Role == httpsCertRole || i.Role == "ca" {
			continue
		}
		ver := i.Version
		if ver == "" {
			ver = versionUnknown
		}
		v.Versions[ver]++
		v.Daemons = append(v.Daemons, daemonVersion{Role: i.Role, Name: i.Name, Version: ver})
	}
	if len(v.Daemons) == 0 { // no daemon with --pki: this gateway is what is known
		v.Versions[v.Gateway] = 1
	}
	v.Mixed = len(v.Versions) > 1
	sort.Slice(v.Daemons, func(a, b int) bool {
		if v.Daemons[a].Role != v.Daemons[b].Role {
			return v.Daemons[a].Role < v.Daemons[b].Role
		}
		return v.Daemons[a].Name < v.Daemons[b].Name
	})
	return v
}

// listVersions: GET /system/versions.
func (s *Server) listVersions(c *call) (int, any, error) {
	infos, err := s.publishedCerts(c.ctx)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, versionsOf(infos), nil
}

// versionConditions is the versions-mixed alert while more than one version
// runs, naming how many daemons run each and which run the oldest.
func versionConditions(infos []pki.Info) map[string]condition {
	v := versionsOf(infos)
	if !v.Mixed {
		return nil
	}
	names := make([]string, 0, len(v.Versions))
	for ver := range v.Versions {
		names = append(names, ver)
	}
	sort.Slice(names, func(a, b int) bool { return versionLess(names[a], names[b]) })
	counts := make([]string, 0, len(names))
	for _, ver := range names {
		counts = append(counts, fmt.Sprintf("%s on %d", ver, v.Versions[ver]))
	}
	var oldest []string
	for _, d := range v.Daemons {
		if d.Version == names[0] {
			oldest = append(oldest, d.Role+" "+d.Name)
		}
	}
	const show = 5
	more := ""
	if len(oldest) > show {
		more = fmt.Sprintf(" and %d more", len(oldest)-show)
		oldest = oldest[:show]
	}
	obj := &objectRef{Kind: "system", ID: "versions", Name: "versions"}
	a := Alert{Severity: SeverityWarning, Kind: AlertVersionsMixed, Object: obj,
		Message: fmt.Sprintf("the system runs more than one Cairn version (%s): a rolling upgrade is under way or stopped part way; "+
			"finish it so that every daemon runs one version (%s still run %s; `cairnctl system versions` lists them all)",
			strings.Join(counts, ", "), strings.Join(oldest, ", ")+more, names[0])}
	k := a.Kind + "/" + obj.ID
	return map[string]condition{k: {a, k}}
}

// versionLess orders release numbers numerically (0.9.0 before 0.10.0);
// "unknown" (older than any) first, and anything unparsable by text after
// the releases.
func versionLess(a, b string) bool {
	if a == versionUnknown || b == versionUnknown {
		return a == versionUnknown && b != versionUnknown
	}
	pa, oka := releaseParts(a)
	pb, okb := releaseParts(b)
	switch {
	case oka && okb:
		for i := range pa {
			if pa[i] != pb[i] {
				return pa[i] < pb[i]
			}
		}
		return false
	case oka != okb:
		return oka
	}
	return a < b
}

func releaseParts(v string) ([3]int, bool) {
	var p [3]int
	fields := strings.Split(v, ".")
	if len(fields) != 3 {
		return p, false
	}
	for i, f := range fields {
		n := 0
		if f == "" || len(f) > 6 {
			return p, false
		}
		for _, ch := range f {
			if ch < '0' || ch > '9' {
				return p, false
			}
			n = n*10 + int(ch-'0')
		}
		p[i] = n
	}
	return p, true
}
