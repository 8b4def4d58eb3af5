package join

import (
	"strings"
	"testing"
	"time"
)

// FuzzDecode: any body from the network is refused or accepted without
// panicking, and an accepted one is whole (a token, a role, a verified CSR).
func FuzzDecode(f *testing.F) {
	tok, _, _ := New(strings.Repeat("ab", 32), []string{"sds"}, DefaultTTL, "admin", time.Now())
	f.Add([]byte(`{"token":"` + tok.String() + `","role":"sds","name":"x","csr":""}`))
	f.Add([]byte(`{"token":"cj1.x","role":"sds"}`))
	f.Add([]byte(`{} {}`))
	f.Add([]byte(`{"hosts":["1.2.3.4","a..b"]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := decode(b)
		if err == nil && (p.csr == nil || p.token.ID == "" || p.req.Role == "") {
			t.Fatalf("accepted an incomplete request: %+v", p.req)
		}
	})
}

// FuzzParse: tokens from files and OVF properties.
func FuzzParse(f *testing.F) {
	tok, _, _ := New(strings.Repeat("ab", 32), []string{"sds"}, DefaultTTL, "admin", time.Now())
	f.Add(tok.String())
	f.Add("cj1...")
	f.Fuzz(func(t *testing.T, s string) {
		if tk, err := Parse(s); err == nil {
			if back, err := Parse(tk.String()); err != nil || back != tk {
				t.Fatalf("%q parsed but does not round-trip", s)
			}
		}
	})
}
