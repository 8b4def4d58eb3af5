package main

import (
	"context"
	"strings"
	"testing"
)

// cairn colocate refuses what it cannot run, before anything starts, and
// says what to give instead.
func TestColocateRefusesBadArguments(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "give the daemons to run"},
		{[]string{"sds", "--name", "a", "--", "--", "nbd"}, "an empty daemon between two '--'"},
		{[]string{"sds", "--", "mdm"}, `cannot colocate "mdm"`},
		{[]string{"sds", "--", "target"}, `cannot colocate "target"`},
		{[]string{"nbd", "--", "nbd"}, "runs an SDS with frontends"},
		{[]string{"sds", "--name", "a"}, "runs an SDS with frontends"},
	} {
		err := runColocate(context.Background(), tc.args)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("cairn colocate %q: %v, want an error saying %q", tc.args, err, tc.want)
		}
	}
	if colocated {
		t.Fatal("a refused cairn colocate marked the process as colocated")
	}
}

// When one daemon stops with an error, the others are stopped and the
// error names the daemon.
func TestColocateStopsAllWhenOneFails(t *testing.T) {
	defer func() { colocated = false }()
	err := runColocate(context.Background(), []string{"sds", "--no-such-flag", "--", "nbd", "--host", "h1", "--tls", "off", "--allow-plain-loopback", "--mdm", "http://127.0.0.1:1"})
	if err == nil || !strings.Contains(err.Error(), "sds: ") || !strings.Contains(err.Error(), "no-such-flag") {
		t.Fatalf("colocate with a bad sds flag: %v, want the sds's flag error", err)
	}
}
