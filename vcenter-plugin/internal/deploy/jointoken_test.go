package deploy

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cairn-storage/cairn/vcenter-plugin/internal/gateway"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/plan"
)

// An SVM's join token names each certificate role its daemons present
// once: a tie-breaker is an MDM, an iSCSI client only SVM has none.
func TestCertRoles(t *testing.T) {
	for _, c := range []struct{ roles, want []string }{
		{[]string{"sds", "target"}, []string{"sds", "target"}},
		{[]string{"mdm", "sds", "target", "gateway"}, []string{"mdm", "sds", "target", "gateway"}},
		{[]string{"tiebreaker"}, []string{"mdm"}},
		{[]string{"mdm", "tiebreaker", "gateway"}, []string{"mdm", "gateway"}},
		{nil, nil},
	} {
		got := certRoles(&plan.Host{Roles: c.roles})
		if !slices.Equal(got, c.want) {
			t.Errorf("roles %v: certificate roles %v, want %v", c.roles, got, c.want)
		}
		for _, r := range got {
			if !slices.Contains(gateway.CertRoles, r) {
				t.Errorf("roles %v: %q is no certificate role", c.roles, r)
			}
		}
	}
}

// A join token serves an SVM's first boot when the SVM carries the one the
// state records (or the state predates recorded ids), the gateway lists it
// unspent, and it is good for the margin at least.
func TestStaleJoinToken(t *testing.T) {
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	margin := 15 * time.Minute
	good := gateway.JoinTokenInfo{ID: "0123456789abcdef", Roles: []string{"sds", "target"}, Expires: now.Add(40 * time.Minute)}
	with := func(f func(*gateway.JoinTokenInfo)) []gateway.JoinTokenInfo {
		c := good
		f(&c)
		return []gateway.JoinTokenInfo{{ID: "fedcba9876543210", Expires: now.Add(time.Hour)}, c}
	}
	for _, c := range []struct {
		name              string
		listed            []gateway.JoinTokenInfo
		carried, recorded string
		want              string // "" keep, else a part of the reason
	}{
		{"good", with(func(*gateway.JoinTokenInfo) {}), good.ID, good.ID, ""},
		{"state without ids", with(func(*gateway.JoinTokenInfo) {}), good.ID, "", ""},
		{"exactly the margin", with(func(i *gateway.JoinTokenInfo) { i.Expires = now.Add(margin) }), good.ID, good.ID, ""},
		{"no token", with(func(*gateway.JoinTokenInfo) {}), "", good.ID, "carries no join token"},
		{"another token than recorded", with(func(*gateway.JoinTokenInfo) {}), good.ID, "fedcba9876543210", "the state records fedcba9876543210"},
		{"not listed", nil, good.ID, good.ID, "no longer lists"},
		{"expired by the gateway", with(func(i *gateway.JoinTokenInfo) { i.Expired = true }), good.ID, good.ID, "expired at"},
		{"expired by our clock", with(func(i *gateway.JoinTokenInfo) { i.Expires = now.Add(-time.Second) }), good.ID, good.ID, "expired at"},
		{"partly spent", with(func(i *gateway.JoinTokenInfo) { i.Name, i.Roles = "cairn-esx-09", []string{"target"} }), good.ID, good.ID, "partly spent by cairn-esx-09"},
		{"under the margin", with(func(i *gateway.JoinTokenInfo) { i.Expires = now.Add(10 * time.Minute) }), good.ID, good.ID, "good for 10m0s only"},
	} {
		got := staleJoinToken(c.listed, c.carried, c.recorded, now, margin)
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

// The margin follows the engine's wait for a booted SVM, between 15 and 30
// minutes (half the token's life: a token just made is kept).
func TestJoinTokenMargin(t *testing.T) {
	for ready, want := range map[time.Duration]time.Duration{
		3 * time.Second: 15 * time.Minute, 15 * time.Minute: 15 * time.Minute, 20 * time.Minute: 20 * time.Minute, 2 * time.Hour: 30 * time.Minute,
	} {
		r := &run{Engine: &Engine{ReadyTimeout: ready}}
		if got := r.joinTokenMargin(); got != want {
			t.Errorf("ReadyTimeout %s: margin %s, want %s", ready, got, want)
		}
	}
}

func TestJoinTokenID(t *testing.T) {
	for tok, want := range map[string]string{
		"cj1.0123456789abcdef.c2VjcmV0." + strings.Repeat("ab", 32): "0123456789abcdef",
		"0123456789abcdef0123456789abcdef":                          "", // a bootstrap token
		"cj1.nodots":                                                "",
		"":                                                          "",
	} {
		if got := joinTokenID(tok); got != want {
			t.Errorf("joinTokenID(%q) = %q, want %q", tok, got, want)
		}
	}
}
