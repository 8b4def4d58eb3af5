// Package buildinfo owns the Cairn version a binary was built as: the
// release number in the VERSION file next to this source (embedded, so every
// build of the module carries it, however it is built), or the value set at
// link time for a test build of another version:
//
//	go build -ldflags "-X github.com/cairn-storage/cairn/appliance/internal/buildinfo.override=0.1.1" ./cmd/...
//
// Daemons publish it with their certificate (pki.Info.Version), so that the
// gateway can list which version each daemon runs and say when a system runs
// more than one (GET /system/versions): the state of a rolling upgrade.
package buildinfo

import (
	_ "embed"
	"strings"
)

//go:embed VERSION
var file string

// override replaces the file's version when set at link time.
var override string

// Version is this binary's Cairn version, e.g. "0.1.0".
func Version() string {
	if v := strings.TrimSpace(override); v != "" {
		return v
	}
	return strings.TrimSpace(file)
}
