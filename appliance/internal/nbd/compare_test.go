package nbd

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/cairn-storage/cairn/appliance/internal/blockdev"
)

// TestCompareNbdkit is a manual measurement, not part of the default
// suite: fio 4 KiB random reads and writes at queue depth 1 and 32 against
// this server (over a MemVolume) and against nbdkit's file plugin, printed
// side by side. Run it without -race:
//
//	NBD_COMPARE=1 go test -run TestCompareNbdkit -v ./internal/nbd/
func TestCompareNbdkit(t *testing.T) {
	if os.Getenv("NBD_COMPARE") == "" {
		t.Skip("manual measurement; set NBD_COMPARE=1")
	}
	needTool(t, "fio", "fio")
	nbdkit := needTool(t, "nbdkit", "nbdkit")
	const size = 256 << 20
	runtime := os.Getenv("NBD_COMPARE_RUNTIME")
	if runtime == "" {
		runtime = "10"
	}

	vol := blockdev.NewMemVolume("vol", 1, size)
	if err := vol.WriteAt(context.Background(), make([]byte, size), 0, 0); err != nil {
		t.Fatal(err)
	}
	_, addr := startServer(t, newResolver(vol))

	// nbdkit on a free loopback port, serving a preallocated file.
	file := filepath.Join(t.TempDir(), "disk")
	if err := os.WriteFile(file, make([]byte, size), 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	ctx, cancel := context.WithCancel(context.Background())
	kit := exec.CommandContext(ctx, nbdkit, "-f", "-i", "127.0.0.1", "-p", strconv.Itoa(port), "file", file)
	if err := kit.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); kit.Wait() })
	for i := 0; ; i++ {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err == nil {
			c.Close()
			break
		}
		if i > 100 {
			t.Fatal("nbdkit did not start")
		}
		time.Sleep(50 * time.Millisecond)
	}

	targets := []struct{ name, uri string }{
		{"cairn-nbd(mem)", "nbd://" + addr + "/vol"},
		{"nbdkit-file", fmt.Sprintf("nbd://127.0.0.1:%d/", port)},
	}
	for _, rw := range []string{"randread", "randwrite"} {
		for _, qd := range []string{"1", "32"} {
			for _, tg := range targets {
				res := runFioStats(t, "--name=cmp", "--uri="+tg.uri, "--rw="+rw, "--bs=4k", "--iodepth="+qd,
					"--size=256m", "--time_based", "--runtime="+runtime, "--ramp_time=1")
				t.Logf("%-16s %-9s qd%-2s %8.0f IOPS", tg.name, rw, qd, res)
			}
		}
	}
}

func runFioStats(t *testing.T, args ...string) float64 {
	t.Helper()
	var res struct {
		Jobs []struct {
			Read struct {
				IOPS float64 `json:"iops"`
			} `json:"read"`
			Write struct {
				IOPS float64 `json:"iops"`
			} `json:"write"`
		} `json:"jobs"`
	}
	out := runTool(t, 5*time.Minute, "fio", append([]string{"--output-format=json", "--ioengine=nbd"}, args...)...)
	if err := jsonUnmarshalFio(out, &res); err != nil {
		t.Fatal(err)
	}
	var iops float64
	for _, j := range res.Jobs {
		iops += j.Read.IOPS + j.Write.IOPS
	}
	return iops
}
