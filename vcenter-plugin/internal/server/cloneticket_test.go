package server

import (
	"strings"
	"testing"
)

func TestParseTicket(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		err      bool
	}{
		{`"cst-VCT-52a1"`, "cst-VCT-52a1", false},
		{`{"value":"cst-2"}`, "cst-2", false},
		{`""`, "", true},
		{`{"value":""}`, "", true},
		{`<html>login</html>`, "", true},
		{``, "", true},
	} {
		got, err := parseTicket([]byte(tc.in))
		if got != tc.want || (err != nil) != tc.err {
			t.Errorf("parseTicket(%q) = %q, %v", tc.in, got, err)
		}
	}
}

// FuzzParseTicket: any answer from the network gives a non-empty ticket
// without surrounding space, or an error; never a panic.
func FuzzParseTicket(f *testing.F) {
	for _, s := range []string{`"t"`, `{"value":"t"}`, `null`, `{"value":1}`, `"\u0000"`, `[]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := parseTicket(b)
		if err == nil && (got == "" || strings.TrimSpace(got) != got) {
			t.Fatalf("parseTicket(%q) = %q without error", b, got)
		}
	})
}
