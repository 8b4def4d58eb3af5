// The I/O that runs during the rolls: fio through `cairn nbd`, checked
// with verify=crc32c, pass after pass.

package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cairn-storage/cairn/appliance/contract"

	"github.com/cairn-storage/cairn/vcenter-plugin/internal/maintenance"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/plan"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/poll"
)

// fioLoop runs fio passes (write, then verify what was written) against
// the volume through `cairn nbd`, each in the next region of the volume,
// until stopped. A pass that fails is kept with its output.
type fioLoop struct {
	nbd      *exec.Cmd
	cancel   context.CancelFunc
	done     chan struct{}
	passes   atomic.Int64
	failures atomic.Int64
	mu       sync.Mutex
	lastFail string
}

func (h *harness) startFIO(ctx context.Context, p *plan.Plan) (*fioLoop, error) {
	var mdm []string
	for _, m := range p.MDMMembers() {
		mdm = append(mdm, "https://"+net.JoinHostPort(m, strconv.Itoa(contract.MDMClientPort)))
	}
	nlog, err := os.Create(filepath.Join(h.state, "nbd.log"))
	if err != nil {
		return nil, err
	}
	pkiDir, err := h.joinAs(ctx, p, "nbd", fioHost)
	if err != nil {
		return nil, err
	}
	nbd := exec.Command(filepath.Join(h.bin, "cairn"), "nbd", "--mdm", strings.Join(mdm, ","), "--pki", pkiDir, "--host", fioHost, "--listen", nbdAddr,
		// fio's nbd engine cannot present a client certificate (libnbd 1.14
		// refuses tls-certificates from a URI): plain NBD, on loopback only;
		// etcd and the data path with the host's certificate.
		"--tls", "off", "--allow-plain-loopback")
	nbd.Stdout, nbd.Stderr = nlog, nlog
	nbd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := nbd.Start(); err != nil {
		return nil, fmt.Errorf("start cairn nbd: %w", err)
	}
	f := &fioLoop{nbd: nbd, done: make(chan struct{})}
	if err := os.WriteFile(filepath.Join(h.state, "pids-nbd"), []byte(fmt.Sprint(nbd.Process.Pid)), 0o644); err != nil {
		f.kill()
		return nil, err
	}
	// Wait for the export: a first short pass doubles as the check.
	lctx, cancel := context.WithCancel(ctx)
	f.cancel = cancel
	uri := "nbd://" + nbdAddr + "/" + volume
	if err := poll.Until(ctx, 30*time.Second, 300*time.Millisecond, "see nbd.log in the state directory", func() (bool, string, error) {
		out, err := exec.CommandContext(ctx, "fio", "--name=probe", "--ioengine=nbd", "--uri="+uri, "--rw=read", "--bs=4k",
			"--size=4k", "--output-format=terse").CombinedOutput()
		return err == nil, fmt.Sprintf("the NBD export %s does not answer: %v: %s", uri, err, out), nil
	}); err != nil {
		f.kill()
		return nil, err
	}
	h.ok("cairn nbd serves %s to host %s", uri, fioHost)
	go func() {
		defer close(f.done)
		region := int64(0)
		for pass := 1; lctx.Err() == nil; pass++ {
			offset := fmt.Sprintf("%dm", (region%16)*64)
			region++
			start := time.Now()
			pctx, pcancel := context.WithTimeout(ctx, 3*time.Minute) // not lctx: a pass always completes its verify
			cmd := exec.CommandContext(pctx, "fio", "--name=e2e", "--ioengine=nbd", "--uri="+uri, "--rw=randwrite", "--bs=4k,64k",
				"--iodepth=8", "--size="+h.fioSize, "--offset="+offset, "--verify=crc32c", "--verify_fatal=1", "--do_verify=1",
				fmt.Sprintf("--randseed=%d", pass), "--output-format=terse")
			var stderr strings.Builder
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			pcancel()
			if err != nil {
				out = []byte(stderr.String() + "\n(terse) " + string(out))
			}
			if err != nil {
				f.failures.Add(1)
				f.mu.Lock()
				f.lastFail = fmt.Sprintf("pass %d at %s: %v: %s", pass, offset, err, head(string(out), 1500))
				f.mu.Unlock()
				fmt.Printf("FAIL fio pass %d at offset %s (%s-%s): %v\n%s\n", pass, offset, start.Format("15:04:05.000"),
					time.Now().Format("15:04:05.000"), err, head(string(out), 1500))
				// What the roll did last.
				ev := h.log.Since(0, maintenance.Job(system))
				for _, e := range ev[max(0, len(ev)-4):] {
					fmt.Printf("     roll event %s %s %s\n", e.Time.Local().Format("15:04:05.000"), e.Host, e.Message)
				}
				continue
			}
			f.passes.Add(1)
			h.slog.Info("fio pass verified", "pass", pass, "offset", offset)
		}
	}()
	return f, nil
}

// joinAs gets this machine a certificate of role for name the way an admin
// gives one to a Linux host (docs/operate.md): a one-time join token from the
// gateway, spent with `cairn pki join` at the first MDM member's join service.
// It returns the PKI directory.
func (h *harness) joinAs(ctx context.Context, p *plan.Plan, role, name string) (string, error) {
	dir := filepath.Join(h.state, "pki-"+role+"-"+name)
	if _, err := os.Stat(filepath.Join(dir, "node.crt")); err == nil {
		return dir, nil
	}
	tok, err := h.api.CreateJoinToken(ctx, []string{role}, 10*time.Minute)
	if err != nil {
		return "", fmt.Errorf("join token for %s/%s: %w", role, name, err)
	}
	if out, err := h.pkiJoin(ctx, p, tok.Token, role, name, dir, "--wait", "1m"); err != nil {
		return "", fmt.Errorf("cairn pki join as %s/%s: %v: %s", role, name, err, out)
	}
	h.ok("%s/%s got its certificate with a one-time join token (token %s)", role, name, tok.ID)
	return dir, nil
}

// pkiJoin runs `cairn pki join` with token (through a 0600 file, as an admin
// would hand it over) at the first MDM member's join service, writing dir.
func (h *harness) pkiJoin(ctx context.Context, p *plan.Plan, token, role, name, dir string, extra ...string) ([]byte, error) {
	return h.pkiJoinAt(ctx, joinURL(p, 0), token, role, name, dir, extra...)
}

// pkiJoinAt is pkiJoin at the join service url only.
func (h *harness) pkiJoinAt(ctx context.Context, url, token, role, name, dir string, extra ...string) ([]byte, error) {
	tf := dir + ".token"
	if err := os.WriteFile(tf, []byte(token), 0o600); err != nil {
		return nil, err
	}
	defer os.Remove(tf)
	args := append([]string{"pki", "join", "--url", url, "--token-file", tf, "--role", role, "--name", name, "--out", dir}, extra...)
	return exec.CommandContext(ctx, filepath.Join(h.bin, "cairn"), args...).CombinedOutput()
}

// joinURL is the join service of the i-th MDM member (every member runs one).
func joinURL(p *plan.Plan, i int) string {
	return "https://" + net.JoinHostPort(p.MDMMembers()[i], strconv.Itoa(contract.JoinPort))
}

func head(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// stop lets the running pass finish, then stops the NBD server.
func (f *fioLoop) stop() (int64, int64, string) {
	f.cancel()
	<-f.done
	f.kill()
	f.mu.Lock()
	defer f.mu.Unlock()
	last := ""
	if f.lastFail != "" {
		last = " (last: " + f.lastFail + ")"
	}
	return f.passes.Load(), f.failures.Load(), last
}

func (f *fioLoop) kill() {
	if f == nil || f.nbd == nil || f.nbd.Process == nil {
		return
	}
	if f.cancel != nil {
		f.cancel()
	}
	_ = f.nbd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = f.nbd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = f.nbd.Process.Kill()
		<-done
	}
	f.nbd = nil
}
