package main

import (
	"context"
	"strings"
	"testing"
)

// cairn target refuses bad flags before it connects to anything, and says
// what it wants instead.
func TestTargetRefusesBadFlags(t *testing.T) {
	iqn := "--iqn=iqn.2026-01.io.cairn:svm1"
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "--iqn is required"},
		{[]string{iqn, "--port-number", "0"}, "--port-number must be 1..65535"},
		{[]string{iqn, "--conns-per-sds", "0"}, "--conns-per-sds must be 1..8, not 0"},
		{[]string{iqn, "--conns-per-sds", "9"}, "--conns-per-sds must be 1..8, not 9"},
		{[]string{iqn, "--group-ports", "1,x"}, `--group-ports: "x" is not a port number`},
		{[]string{iqn, "--sds-addr-map", "10.0.0.1"}, `--sds-addr-map: "10.0.0.1" is not from=to`},
	} {
		ctx, cancel := context.WithCancel(context.Background())
		cancel() // nothing may be reached: a refusal comes first
		err := runTarget(ctx, tc.args)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("cairn target %q: %v, want an error saying %q", tc.args, err, tc.want)
		}
	}
}
