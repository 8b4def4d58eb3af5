package nbd

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/cairn-storage/cairn/appliance/internal/blockdev"
)

// These tests drive the server with real NBD clients: nbdinfo and nbdcopy
// (Debian package libnbd-bin) and fio's nbd engine (package fio).

func needTool(t *testing.T, name, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		// make test-go sets CAIRN_TEST_STRICT: there a missing tool is a failure, never a skip.
		if os.Getenv("CAIRN_TEST_STRICT") != "" {
			t.Fatalf("%s not installed: run scripts/deps.sh go (apt-get install %s)", name, pkg)
		}
		t.Skipf("%s not installed (apt-get install %s)", name, pkg)
	}
	return p
}

// runTool runs a client with a time limit and returns its stdout.
func runTool(t *testing.T, timeout time.Duration, name string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = t.TempDir() // fio leaves verify state files in its working directory
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %v: %v\nstdout:\n%s\nstderr:\n%s", name, args, err, stdout.Bytes(), stderr.Bytes())
	}
	return stdout.Bytes()
}

func TestNbdinfo(t *testing.T) {
	nbdinfo := needTool(t, "nbdinfo", "libnbd-bin")
	vol := blockdev.NewMemVolume("vol", 1, 64<<20)
	ro := blockdev.NewMemVolume("ro", 2, 1<<20)
	r := newResolver(vol, ro)
	r.readOnly["ro"] = true
	_, addr := startServer(t, r)

	var info struct {
		Protocol string `json:"protocol"`
		Exports  []struct {
			Name         string `json:"export-name"`
			Size         int64  `json:"export-size"`
			ReadOnly     bool   `json:"is_read_only"`
			CanMultiConn bool   `json:"can_multi_conn"`
			CanFlush     bool   `json:"can_flush"`
			CanFUA       bool   `json:"can_fua"`
			CanTrim      bool   `json:"can_trim"`
			CanZero      bool   `json:"can_zero"`
			CanFastZero  bool   `json:"can_fast_zero"`
			BlockMin     int64  `json:"block_size_minimum"`
			BlockPref    int64  `json:"block_size_preferred"`
			BlockMax     int64  `json:"block_size_maximum"`
		} `json:"exports"`
	}
	out := runTool(t, time.Minute, nbdinfo, "--json", "nbd://"+addr+"/vol")
	if err := json.Unmarshal(out, &info); err != nil {
		t.Fatalf("nbdinfo output: %v\n%s", err, out)
	}
	if info.Protocol != "newstyle-fixed" || len(info.Exports) != 1 {
		t.Fatalf("nbdinfo: %s", out)
	}
	e := info.Exports[0]
	if e.Name != "vol" || e.Size != 64<<20 || e.ReadOnly || !e.CanMultiConn || !e.CanFlush || !e.CanFUA ||
		!e.CanTrim || !e.CanZero || !e.CanFastZero {
		t.Fatalf("nbdinfo export: %+v\n%s", e, out)
	}
	if e.BlockMin != 512 || e.BlockPref != 4096 || e.BlockMax != 32<<20 {
		t.Fatalf("nbdinfo block sizes %d/%d/%d\n%s", e.BlockMin, e.BlockPref, e.BlockMax, out)
	}

	out = runTool(t, time.Minute, nbdinfo, "--list", "--json", "nbd://"+addr)
	info.Exports = nil
	if err := json.Unmarshal(out, &info); err != nil {
		t.Fatalf("nbdinfo --list output: %v\n%s", err, out)
	}
	if len(info.Exports) != 2 || info.Exports[0].Name != "ro" || !info.Exports[0].ReadOnly ||
		info.Exports[1].Name != "vol" || info.Exports[1].ReadOnly {
		t.Fatalf("nbdinfo --list: %s", out)
	}

	// An export this host may not attach: the client gets a clear error.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	msg, err := exec.CommandContext(ctx, nbdinfo, "nbd://"+addr+"/secret").CombinedOutput()
	if err == nil {
		t.Fatalf("nbdinfo on an unknown export succeeded:\n%s", msg)
	}
	// libnbd reports NBD_REP_ERR_UNKNOWN as ENOENT.
	if !bytes.Contains(msg, []byte("No such file or directory")) {
		t.Errorf("nbdinfo error is not ERR_UNKNOWN:\n%s", msg)
	}
}

func TestNbdcopyRoundTrip(t *testing.T) {
	nbdcopy := needTool(t, "nbdcopy", "libnbd-bin")
	const size = 16 << 20
	vol := blockdev.NewMemVolume("vol", 1, size)
	srv, addr := startServer(t, newResolver(vol))
	dir := t.TempDir()
	in, out := filepath.Join(dir, "in"), filepath.Join(dir, "out")
	want := make([]byte, size)
	rand.Read(want)
	if err := os.WriteFile(in, want, 0o600); err != nil {
		t.Fatal(err)
	}
	uri := "nbd://" + addr + "/vol"
	// Four connections (nbdcopy uses several when CAN_MULTI_CONN is set).
	runTool(t, 2*time.Minute, nbdcopy, "--connections=4", "--threads=4", "--requests=16", in, uri)
	if n := srv.Stats().AcceptedConnections; n < 4 {
		t.Errorf("nbdcopy opened %d connections, want 4 (is CAN_MULTI_CONN advertised?)", n)
	}
	if got := readVol(t, vol, 0, size); !bytes.Equal(got, want) {
		t.Fatal("volume content differs from the file copied in")
	}
	runTool(t, 2*time.Minute, nbdcopy, "--connections=4", uri, out)
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("file copied out differs from the file copied in")
	}
}

// TestNbdcopyZeroes: nbdcopy turns the hole of a sparse source into
// WRITE_ZEROES; the volume must read back zeros there and have the pages
// deallocated (the server asked for unmap).
func TestNbdcopyZeroes(t *testing.T) {
	nbdcopy := needTool(t, "nbdcopy", "libnbd-bin")
	const size = 8 << 20
	vol := blockdev.NewMemVolume("vol", 1, size)
	old := make([]byte, size)
	rand.Read(old)
	if err := vol.WriteAt(context.Background(), old, 0, 0); err != nil {
		t.Fatal(err)
	}
	srv, addr := startServer(t, newResolver(vol))

	// Source: 1 MiB data, 6 MiB hole, 1 MiB data.
	src := filepath.Join(t.TempDir(), "sparse")
	f, err := os.Create(src)
	if err != nil {
		t.Fatal(err)
	}
	head, tail := make([]byte, 1<<20), make([]byte, 1<<20)
	rand.Read(head)
	rand.Read(tail)
	f.WriteAt(head, 0)
	f.WriteAt(tail, 7<<20)
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	runTool(t, 2*time.Minute, nbdcopy, src, "nbd://"+addr+"/vol")

	got := readVol(t, vol, 0, size)
	if !bytes.Equal(got[:1<<20], head) || !bytes.Equal(got[7<<20:], tail) {
		t.Fatal("data regions differ")
	}
	if !isZero(got[1<<20 : 7<<20]) {
		t.Fatal("hole region does not read back as zeros")
	}
	if st := srv.Stats(); st.WriteZeroes == 0 {
		t.Fatalf("nbdcopy sent no WRITE_ZEROES (stats %+v)", st)
	}
	ext, err := vol.Extents(context.Background(), 1<<20, 6<<20)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ext {
		if e.Mapped {
			t.Fatalf("hole region still allocated: %+v", ext)
		}
	}
}

type fioResult struct {
	Jobs []struct {
		Name  string `json:"jobname"`
		Error int    `json:"error"`
		Write struct {
			IOs int64 `json:"total_ios"`
		} `json:"write"`
		Read struct {
			IOs int64 `json:"total_ios"`
		} `json:"read"`
		Trim struct {
			IOs int64 `json:"total_ios"`
		} `json:"trim"`
	} `json:"jobs"`
}

func runFio(t *testing.T, args ...string) fioResult {
	t.Helper()
	fio := needTool(t, "fio", "fio")
	args = append([]string{"--output-format=json", "--ioengine=nbd"}, args...)
	out := runTool(t, 3*time.Minute, fio, args...)
	var res fioResult
	if err := jsonUnmarshalFio(out, &res); err != nil {
		t.Fatalf("fio output: %v\n%s", err, out)
	}
	for _, j := range res.Jobs {
		if j.Error != 0 {
			t.Fatalf("fio job %s: error %d\n%s", j.Name, j.Error, out)
		}
	}
	return res
}

// TestFioVerify: two fio jobs, 16 requests in flight each, random 4 KiB
// writes then crc32c-verified reads, each job in its own 8 MiB region.
func TestFioVerify(t *testing.T) {
	needTool(t, "fio", "fio")
	vol := blockdev.NewMemVolume("vol", 1, 32<<20)
	srv, addr := startServer(t, newResolver(vol))
	res := runFio(t, "--name=verify", "--uri=nbd://"+addr+"/vol",
		"--rw=randwrite", "--bs=4k", "--iodepth=16", "--numjobs=2",
		"--size=8m", "--offset_increment=8m", "--verify=crc32c",
		"--verify_fatal=1", "--do_verify=1")
	var writes, reads int64
	for _, j := range res.Jobs {
		writes += j.Write.IOs
		reads += j.Read.IOs
	}
	if writes != 2*2048 || reads != 2*2048 {
		t.Fatalf("fio did %d writes and %d verify reads, want %d each", writes, reads, 2*2048)
	}
	if st := srv.Stats(); st.ErrorReplies != 0 || st.Writes < uint64(writes) {
		t.Fatalf("server stats %+v", st)
	}
}

// TestFioTrim: fio's trim workload reaches the volume as Unmap.
func TestFioTrim(t *testing.T) {
	needTool(t, "fio", "fio")
	const size = 4 << 20
	vol := blockdev.NewMemVolume("vol", 1, size)
	full := make([]byte, size)
	rand.Read(full)
	if err := vol.WriteAt(context.Background(), full, 0, 0); err != nil {
		t.Fatal(err)
	}
	srv, addr := startServer(t, newResolver(vol))
	res := runFio(t, "--name=trim", "--uri=nbd://"+addr+"/vol",
		"--rw=trim", "--bs=64k", "--iodepth=8", "--size=2m", "--offset=1m")
	if len(res.Jobs) != 1 || res.Jobs[0].Trim.IOs != 32 {
		t.Fatalf("fio trims: %+v", res.Jobs)
	}
	got := readVol(t, vol, 0, size)
	if !isZero(got[1<<20:3<<20]) || !bytes.Equal(got[:1<<20], full[:1<<20]) || !bytes.Equal(got[3<<20:], full[3<<20:]) {
		t.Fatal("trimmed range not zero, or data outside it changed")
	}
	if st := srv.Stats(); st.Trims != 32 {
		t.Fatalf("server saw %d trims, want 32", st.Trims)
	}
}

// jsonUnmarshalFio decodes fio's JSON output, which may follow notes.
func jsonUnmarshalFio(out []byte, v any) error {
	if i := bytes.IndexByte(out, '{'); i > 0 {
		out = out[i:]
	}
	return json.Unmarshal(out, v)
}

// TestQemuImg: qemu's NBD client (package qemu-utils) writes an image into
// the export and compares it back.
func TestQemuImg(t *testing.T) {
	qemuImg := needTool(t, "qemu-img", "qemu-utils")
	const size = 8 << 20
	vol := blockdev.NewMemVolume("vol", 1, size)
	_, addr := startServer(t, newResolver(vol))
	src := filepath.Join(t.TempDir(), "src.raw")
	want := make([]byte, size)
	rand.Read(want[:3<<20]) // the rest stays zero (a hole for qemu)
	if err := os.WriteFile(src, want, 0o600); err != nil {
		t.Fatal(err)
	}
	uri := "nbd://" + addr + "/vol"
	out := runTool(t, time.Minute, qemuImg, "info", "--output=json", uri)
	var info struct {
		VirtualSize int64 `json:"virtual-size"`
	}
	if err := json.Unmarshal(out, &info); err != nil || info.VirtualSize != size {
		t.Fatalf("qemu-img info: %v\n%s", err, out)
	}
	runTool(t, time.Minute, qemuImg, "convert", "-n", "-f", "raw", "-O", "raw", src, uri)
	if got := readVol(t, vol, 0, size); !bytes.Equal(got, want) {
		t.Fatal("volume differs from the image qemu-img wrote")
	}
	runTool(t, time.Minute, qemuImg, "compare", "-f", "raw", "-F", "raw", src, uri)
}
