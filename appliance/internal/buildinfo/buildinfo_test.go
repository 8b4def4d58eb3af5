package buildinfo

import (
	"regexp"
	"testing"
)

// The embedded VERSION is a release number (MAJOR.MINOR.PATCH): what the
// gateway compares when it says a system runs mixed versions.
func TestVersionIsARelease(t *testing.T) {
	if v := Version(); !regexp.MustCompile(`^[0-9]+\.[0-9]+\.[0-9]+$`).MatchString(v) {
		t.Fatalf("Version() = %q; want MAJOR.MINOR.PATCH (internal/buildinfo/VERSION)", v)
	}
	saved := override
	t.Cleanup(func() { override = saved })
	override = " 9.9.9\n"
	if v := Version(); v != "9.9.9" {
		t.Fatalf("with the link-time override: %q", v)
	}
}
