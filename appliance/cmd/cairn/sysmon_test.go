package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestKeepSysmonAwake runs this test binary as a data-path daemon would
// start: it must come back (same pid) with the setting in GODEBUG, the
// user's own GODEBUG settings kept, once.
func TestKeepSysmonAwake(t *testing.T) {
	if os.Getenv("CAIRN_SYSMON_CHILD") != "" {
		keepSysmonAwake(os.Getenv("CAIRN_SYSMON_CHILD"))
		comm, _ := os.ReadFile("/proc/self/comm")
		fmt.Printf("pid=%d GODEBUG=%s\n%s", os.Getpid(), os.Getenv("GODEBUG"), comm)
		return
	}
	run := func(command string, env ...string) (pid int, godebug string) {
		t.Helper()
		cmd := exec.Command(os.Args[0], "-test.run=^TestKeepSysmonAwake$", "-test.v=false")
		cmd.Env = append(os.Environ(), append([]string{"CAIRN_SYSMON_CHILD=" + command}, env...)...)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s: %v: %s", command, err, out)
		}
		lines := strings.SplitN(string(out), "\n", 3)
		line := lines[0]
		// The process keeps its name (ps, pgrep), not "exe".
		if want := filepath.Base(os.Args[0]); len(lines) < 2 || !strings.HasPrefix(want, lines[1]) {
			t.Fatalf("%s: process name %q, want %q", command, lines[1:], want)
		}
		if _, err := fmt.Sscanf(line, "pid=%d GODEBUG=%s", &pid, &godebug); err != nil && !strings.HasSuffix(line, "GODEBUG=") {
			t.Fatalf("%s: %q: %v", command, line, err)
		}
		if pid != cmd.Process.Pid {
			t.Fatalf("%s: ran as pid %d, started as %d", command, pid, cmd.Process.Pid)
		}
		return pid, godebug
	}
	if _, g := run("sds", "GODEBUG="); g != sysmonSetting {
		t.Fatalf("sds: GODEBUG=%q", g)
	}
	if _, g := run("nbd", "GODEBUG=madvdontneed=1"); g != "madvdontneed=1,"+sysmonSetting {
		t.Fatalf("nbd with the user's GODEBUG: %q", g)
	}
	if _, g := run("target", "GODEBUG=schedtrace=1000"); g != "schedtrace=1000" {
		t.Fatalf("the user's own schedtrace: %q", g)
	}
	if _, g := run("sds", "GODEBUG=", "CAIRN_SYSMON_DEEP_SLEEP=1"); g != "" {
		t.Fatalf("opted out: %q", g)
	}
	if _, g := run("gateway", "GODEBUG="); g != "" {
		t.Fatalf("gateway (not on the data path): %q", g)
	}
}
