// Command e2e is the end-to-end test of the vCenter plugin against real
// Cairn daemons (tests/e2e/run.sh starts it inside the harness's "core"
// network namespace): a simulated 4-host vCenter whose SVMs are network
// namespaces running the appliance's real first boot and units
// (tests/e2e/svm-hook.sh, svm-guest.sh), a deployment plan, the deploy engine,
// what the contract left in each SVM and in vCenter (port ids, MDM cluster,
// pinned thumbprints, no usable secret in a vApp property), a VMFS datastore
// on all hosts, rolling maintenance under fio with the plugin failing over
// between the two gateways, then an SVM that does not come back and a resume.
//
// It prints one "ok"/"FAIL" line per check, each phase's time, and ends
// with "N passed, M failed"; the exit status is non-zero on any failure.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/vmware/govmomi/vim25"

	"github.com/cairn-storage/cairn/vcenter-plugin/internal/datastore"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/deploy"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/gateway"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/inventory"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/maintenance"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/plan"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/poll"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/progress"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/vcsimkit"
)

const (
	system   = "e2e"
	volume   = "e2e-vol1"
	fioHost  = "fio-client"
	nbdAddr  = "127.0.0.1:10809"
	svmCIDR  = "10.232.0.0/24" // the harness bridge's subnet; core is .1
	dataCIDR = "10.233.0.0/24" // the hosts' (simulated) iSCSI vmkernel ports only
	// kitHosts: 4 deployed, 2 added by the expansion, 1 spare the failed
	// host's SVM is replaced on.
	kitHosts = 7
)

type harness struct {
	state, hook, bin string
	fioSize          string
	secondMode       string
	api              gateway.API // once deployed
	passed, failed   int
	log              *progress.Log
	slog             *slog.Logger
}

func (h *harness) ok(format string, a ...any) {
	h.passed++
	fmt.Printf("ok   %s\n", fmt.Sprintf(format, a...))
}

func (h *harness) fail(format string, a ...any) {
	h.failed++
	fmt.Printf("FAIL %s\n", fmt.Sprintf(format, a...))
}

func (h *harness) check(cond bool, format string, a ...any) bool {
	if cond {
		h.ok(format, a...)
	} else {
		h.fail(format, a...)
	}
	return cond
}

// phase runs f, prints its time; a phase error is a failure and stops the run.
func (h *harness) phase(name string, f func() error) error {
	fmt.Printf("=== phase %s\n", name)
	t0 := time.Now()
	err := f()
	fmt.Printf("=== phase %s: %.1f s\n", name, time.Since(t0).Seconds())
	if err != nil {
		h.fail("%s: %v", name, err)
	}
	return err
}

// lazyLUNs answers the simulated hosts' rescans from the real gateway once
// the deploy engine has connected to it.
type lazyLUNs struct {
	p atomic.Pointer[vcsimkit.GatewayLUNs]
}

func (l *lazyLUNs) LUNsFor(ctx context.Context, iqn string, targets []string) ([]vcsimkit.LUN, error) {
	g := l.p.Load()
	if g == nil {
		return nil, nil
	}
	return g.LUNsFor(ctx, iqn, targets)
}

func main() {
	h := &harness{}
	flag.StringVar(&h.state, "state", "", "state directory (required)")
	flag.StringVar(&h.hook, "hook", "", "SVM hook script (tests/e2e/svm-hook.sh)")
	flag.StringVar(&h.bin, "bin", "", "directory of the cairn binaries")
	flag.StringVar(&h.fioSize, "fio-size", "48m", "bytes each fio pass writes then verifies")
	flag.StringVar(&h.secondMode, "second-mode", gateway.MaintenanceInstant, "SDS maintenance mode of the second roll (the first is instant)")
	timeout := flag.Duration("timeout", 7*time.Minute, "bound on the whole run")
	flag.Parse()
	if h.state == "" || h.hook == "" || h.bin == "" {
		fmt.Fprintln(os.Stderr, "usage: e2e -state DIR -hook svm-hook.sh -bin appliance/bin")
		os.Exit(2)
	}
	for _, d := range []string{"vcsim", "ovfenv", "plugin", "svm"} {
		if err := os.MkdirAll(filepath.Join(h.state, d), 0o755); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
	}
	lf, err := os.Create(filepath.Join(h.state, "e2e.log"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	defer lf.Close()
	h.slog = slog.New(slog.NewTextHandler(lf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	h.log = progress.NewLog(100000, h.slog)

	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	err = h.run(ctx)
	if err != nil && h.api != nil {
		h.dump(context.Background())
	}
	if err != nil {
		fmt.Printf("stopped: %v (engine events: %s; daemon logs: %s/svm/*/logs)\n", err, lf.Name(), h.state)
	}
	fmt.Printf("%d passed, %d failed\n", h.passed, h.failed)
	if h.failed > 0 || err != nil {
		os.Exit(1)
	}
}

func (h *harness) run(ctx context.Context) error {
	luns := &lazyLUNs{}
	var kit *vcsimkit.Kit
	var vc *vim25.Client
	if err := h.phase("simulator", func() error {
		var err error
		kit, err = vcsimkit.Start(vcsimkit.Options{
			Hosts: kitHosts, DisksPerHost: 2, Dir: filepath.Join(h.state, "vcsim"), Template: "cairn-svm",
			LUNs: luns,
			Guest: vcsimkit.CommandHooks{Start: []string{h.hook, "start"}, Stop: []string{h.hook, "stop"},
				Dir: filepath.Join(h.state, "ovfenv")},
			BootTimeout: 2 * time.Minute,
			Logger:      h.slog.With("component", "vcsim"),
		})
		if err != nil {
			return err
		}
		c, err := kit.Client(ctx)
		if err != nil {
			return err
		}
		vc = c.Client
		h.ok("simulated vCenter at %s with %d hosts", kit.URL, len(kit.HostNames()))
		return nil
	}); err != nil {
		return err
	}
	defer kit.Close()

	var p, full *plan.Plan
	if err := h.phase("plan", func() error {
		inv, err := inventory.Collect(ctx, vc)
		if err != nil {
			return err
		}
		full, err = plan.Suggest(inv, vcsimkit.Datacenter, system, "cairn-svm", svmCIDR, dataCIDR)
		if err != nil {
			return err
		}
		if len(full.Hosts) != kitHosts {
			return fmt.Errorf("suggested %d hosts, want %d", len(full.Hosts), kitHosts)
		}
		// The system is deployed on the first 4 hosts; the others are
		// what the lifecycle phases add (lifecycle.go).
		c := *full
		c.Hosts = slices.Clone(full.Hosts[:4])
		p = &c
		// 3 MDM members on hosts 1-3, an SDS and a target on every host,
		// gateways on hosts 3 and 4: they are powered on when the MDM members
		// that form their quorum run. Two gateways: the plugin fails over
		// while one's host is patched.
		for i := range p.Hosts {
			roles := []string{plan.RoleSDS, plan.RoleTarget}
			if i < 3 {
				roles = append([]string{plan.RoleMDM}, roles...)
			}
			if i >= 2 {
				roles = append(roles, plan.RoleGateway)
			}
			p.Hosts[i].Roles = roles
		}
		p.MaintenanceMode = gateway.MaintenanceInstant
		// The fio loop's `cairn nbd` runs here on the core (.1), outside the
		// SVMs: their firewalls must let it reach etcd and the data path.
		p.DataClients = []string{"10.232.0.1"}
		if err := plan.Validate(p, inv).Err(); err != nil {
			return fmt.Errorf("plan does not validate: %w", err)
		}
		b, _ := json.MarshalIndent(p, "", "  ")
		if err := os.WriteFile(filepath.Join(h.state, "plan.json"), b, 0o600); err != nil {
			return err
		}
		h.ok("plan: 4 SVMs, MDM members %s, gateways on %s and %s, target ports %v, %d fault sets", strings.Join(p.MDMMembers(), ","),
			p.Hosts[2].SVMIP, p.Hosts[3].SVMIP, p.TargetPorts(), len(p.FaultSets()))
		return nil
	}); err != nil {
		return err
	}

	var api gateway.API
	newEngine := func() *deploy.Engine {
		return &deploy.Engine{VC: vc, StateDir: filepath.Join(h.state, "plugin"), Log: h.log,
			ReadyTimeout: time.Minute, PollInterval: 300 * time.Millisecond, DataTimeout: 3 * time.Minute,
			DevicePath: func(host string, d plan.Device, _ map[string]string) (string, error) {
				if d.Mode != plan.ModeRDM {
					return "", fmt.Errorf("the e2e backs RDMs only, not %s", d.Mode)
				}
				return filepath.Join(h.state, "svm", p.SVMName(host), "disks", d.Disk+".img"), nil
			},
			Gateway: func(cfg gateway.Config) (gateway.API, error) {
				c, err := gateway.NewHTTPClient(cfg)
				if err != nil {
					return nil, err
				}
				if api == nil {
					api, h.api = c, c
					luns.p.Store(&vcsimkit.GatewayLUNs{API: c})
				}
				return c, nil
			}}
	}
	if err := h.phase("deploy", func() error {
		eng := newEngine()
		if err := eng.Deploy(ctx, p); err != nil {
			return err
		}
		h.ok("deploy engine: 4 SVMs cloned, configured, powered on, cluster bootstrapped, iSCSI wired")
		return nil
	}); err != nil {
		return err
	}

	if err := h.phase("healthy", func() error {
		sys, err := waitHealthy(ctx, api, 90*time.Second)
		if err != nil {
			return err
		}
		h.check(sys.Health.SDSs == 4 && sys.Health.SDSsUp == 4, "cluster %s healthy through the real gateway: %d/%d SDSs up, raw %d GiB",
			sys.System.Name, sys.Health.SDSsUp, sys.Health.SDSs, sys.Capacity.Raw>>30)
		devs, err := api.ListDevices(ctx)
		if err != nil {
			return err
		}
		h.check(len(devs) == 8, "8 devices (2 RDMs per SVM) in the pool: %d", len(devs))
		return nil
	}); err != nil {
		return err
	}

	if err := h.phase("contract", func() error { return h.checkContract(ctx, vc, p) }); err != nil {
		return err
	}

	if err := h.phase("datastore", func() error {
		eng := &datastore.Engine{VC: vc, API: api, Log: h.log, RescanTimeout: time.Minute, PollInterval: 300 * time.Millisecond}
		res, err := eng.Create(ctx, datastore.Request{Datacenter: vcsimkit.Datacenter, Volume: volume, Pool: p.StoragePool.Name,
			SizeGiB: 1, Thin: true, Hosts: hostNames(p)})
		if err != nil {
			return err
		}
		v, err := api.GetVolume(ctx, volume)
		if err != nil {
			return err
		}
		h.check(v.WWN == res.WWN && len(v.Mappings) == 4, "volume %s (naa.%s) mapped to the 4 hosts' IQNs in the real cluster", volume, v.WWN)
		inv, err := inventory.Collect(ctx, vc)
		if err != nil {
			return err
		}
		for _, name := range hostNames(p) {
			ih, _ := inv.Host(name)
			found := false
			for _, ds := range ih.Datastores {
				found = found || (ds.Name == volume && ds.Type == "VMFS" && !ds.Local)
			}
			h.check(found, "host %s mounts VMFS datastore %s", name, volume)
		}
		// The plugin's QoS call against the real gateway: set, refused
		// with the gateway's reason, removed again (fio runs unlimited).
		iops, bw := int64(5000), int64(100<<20)
		u, err := api.UpdateVolume(ctx, volume, gateway.VolumeUpdate{IOPSLimit: &iops, BandwidthLimit: &bw})
		h.check(err == nil && u.IOPSLimit == iops && u.EffectiveBandwidthLimit == bw, "QoS limits set through the gateway: %s %v", limitsOf(u), err)
		tiny := int64(1000)
		_, err = api.UpdateVolume(ctx, volume, gateway.VolumeUpdate{BandwidthLimit: &tiny})
		var se *gateway.StatusError
		h.check(errors.As(err, &se) && se.Status == 400 && strings.Contains(se.Message, "bandwidth_limit 1000 must be 0 (unlimited)"),
			"a bandwidth limit under the minimum refused with the gateway's reason: %v", err)
		var zero int64
		u, err = api.UpdateVolume(ctx, volume, gateway.VolumeUpdate{IOPSLimit: &zero, BandwidthLimit: &zero})
		h.check(err == nil && u.IOPSLimit == 0 && u.BandwidthLimit == 0, "QoS limits removed: %s %v", limitsOf(u), err)
		// Grow the volume in the real cluster and its datastore on every host.
		capacity, err := eng.Grow(ctx, datastore.GrowRequest{Datacenter: vcsimkit.Datacenter, Volume: volume, SizeGiB: 2, Hosts: hostNames(p)})
		h.check(err == nil && capacity == 2<<30-1<<20, "volume and datastore %s grown to 2 GiB: datastore capacity %d %v", volume, capacity, err)
		if v, err := api.GetVolume(ctx, volume); err == nil {
			h.check(v.Size == 2<<30, "the real cluster's volume %s is 2 GiB: %d", volume, v.Size)
		}
		return nil
	}); err != nil {
		return err
	}

	var fio *fioLoop
	if err := h.phase("fio-start", func() error {
		if _, err := api.CreateHost(ctx, gateway.HostSpec{Name: fioHost, Type: "nbd"}); err != nil {
			return err
		}
		if err := api.MapVolume(ctx, volume, fioHost); err != nil {
			return err
		}
		var err error
		fio, err = h.startFIO(ctx, p)
		return err
	}); err != nil {
		return err
	}
	defer fio.kill()

	mcfg := func(ready time.Duration, patched *[][]string, inject func([]string)) *maintenance.Engine {
		return &maintenance.Engine{VC: vc, API: api, Log: h.log, StateDir: filepath.Join(h.state, "plugin"),
			ShutdownTimeout: time.Minute, ReadyTimeout: ready, ResyncTimeout: 3 * time.Minute, PollInterval: 300 * time.Millisecond,
			Patch: func(ctx context.Context, hosts []string) error {
				// At the patch step exactly this unit's host is in
				// maintenance mode and exactly its SDS in SDS maintenance.
				inMM, err := hostsInMaintenance(ctx, vc)
				if err != nil {
					return err
				}
				if err := kit.WaitIdle(ctx); err != nil { // the SVM's guest hooks have run
					return err
				}
				for _, x := range hosts {
					ph := hostOf(p, x)
					if !ph.Has(plan.RoleGateway) {
						continue
					}
					// This host's gateway is down with its SVM; the plugin's
					// client goes on through the other one.
					addr := net.JoinHostPort(ph.SVMIP, "8443")
					conn, derr := net.DialTimeout("tcp", addr, time.Second)
					if conn != nil {
						conn.Close()
					}
					_, gerr := api.System(ctx)
					h.check(derr != nil && gerr == nil, "patching %s: its gateway %s is down (%v), the API answers through the other gateway (%v)", x, addr, derr, gerr)
				}
				sdss, err := api.ListSDS(ctx)
				if err != nil {
					return err
				}
				var inSDS []string
				for _, s := range sdss {
					if s.State != gateway.SDSNormal {
						inSDS = append(inSDS, s.Name)
					}
				}
				var want []string
				for _, x := range hosts {
					want = append(want, deploy.SDSName(x))
				}
				h.check(slices.Equal(inMM, hosts) && slices.Equal(inSDS, want), "patching %v: hosts in maintenance mode %v, SDSs in maintenance %v", hosts, inMM, inSDS)
				for _, x := range hosts {
					s, err := api.GetSDS(ctx, deploy.SDSName(x))
					if err != nil {
						return err
					}
					h.check(!s.Up, "while %s is patched its SVM is down: sds %s up=%v", x, s.Name, s.Up)
				}
				*patched = append(*patched, hosts)
				if inject != nil {
					inject(hosts)
				}
				return nil
			}}
	}
	allHosts := hostNames(p)
	req := maintenance.Request{By: maintenance.ByHost, Mode: gateway.MaintenanceInstant}

	if err := h.phase("rolling-maintenance", func() error {
		var patched [][]string
		seq := h.lastSeq()
		if err := mcfg(90*time.Second, &patched, nil).Run(ctx, p, req); err != nil {
			return err
		}
		h.check(fmt.Sprint(patched) == fmt.Sprint(units(allHosts)), "patched one host at a time in order: %v", patched)
		h.checkOrder(seq, allHosts)
		h.check(fio.passes.Load() > 0 && fio.failures.Load() == 0, "fio during the roll: %d verified passes, %d failures so far", fio.passes.Load(), fio.failures.Load())
		_, err := waitHealthy(ctx, api, 30*time.Second)
		return err
	}); err != nil {
		return err
	}

	failHost := allHosts[1]
	failFlag := filepath.Join(h.state, "fail-boot", failHost)
	if err := h.phase("failure-injection ("+h.secondMode+" maintenance)", func() error {
		var patched [][]string
		seq := h.lastSeq()
		inject := func(hosts []string) {
			if slices.Contains(hosts, failHost) {
				_ = os.MkdirAll(filepath.Dir(failFlag), 0o755)
				_ = os.WriteFile(failFlag, []byte("injected by the e2e\n"), 0o644)
			}
		}
		req := maintenance.Request{By: maintenance.ByHost, Mode: h.secondMode}
		err := mcfg(15*time.Second, &patched, inject).Run(ctx, p, req)
		if err == nil {
			h.fail("the roll went on although the SVM of %s did not come back", failHost)
			return nil
		}
		msg := err.Error()
		fmt.Printf("     roll stopped with: %s\n", msg)
		h.check(strings.Contains(msg, failHost) && strings.Contains(msg, "svm-power-on") && strings.Contains(msg, "did not come back") &&
			strings.Contains(msg, "resume"), "the roll stops at %s's svm-power-on with a message that says what to do", failHost)
		h.check(fmt.Sprint(patched) == fmt.Sprint(units(allHosts[:2])), "no host after %s was touched: patched %v", failHost, patched)
		for _, e := range h.log.Since(seq, maintenance.Job(system)) {
			if e.Host != "" && !strings.Contains(e.Host, allHosts[0]) && !strings.Contains(e.Host, failHost) {
				h.fail("event for %s after the failure: %s %s", e.Host, e.Step, e.Message)
			}
		}
		s, gerr := api.GetSDS(ctx, deploy.SDSName(failHost))
		if gerr != nil {
			return gerr
		}
		h.check(s.State != gateway.SDSNormal, "sds %s stays in maintenance (%s) while its SVM is down", s.Name, s.State)
		st, _ := maintenance.LoadState(filepath.Join(h.state, "plugin"), system)
		h.check(st != nil && !st.Completed && st.LastError != "", "the roll state is unfinished and records the error")

		// The fix: the SVM boots again. Resume with the same request.
		if err := os.Remove(failFlag); err != nil {
			return err
		}
		var resumed [][]string
		seq = h.lastSeq()
		if err := mcfg(90*time.Second, &resumed, nil).Run(ctx, p, req); err != nil {
			return fmt.Errorf("resume: %w", err)
		}
		h.check(fmt.Sprint(resumed) == fmt.Sprint(units(allHosts[2:])), "the resume finished %s and patched the rest in order: %v", failHost, resumed)
		h.checkOrder(seq, allHosts[1:])
		st, _ = maintenance.LoadState(filepath.Join(h.state, "plugin"), system)
		h.check(st != nil && st.Completed && st.LastError == "", "the roll state is completed")
		_, err = waitHealthy(ctx, api, 30*time.Second)
		return err
	}); err != nil {
		return err
	}

	lc := &lifecycle{harness: h, kit: kit, vc: vc, api: api, full: full, fio: fio, engine: newEngine}
	now, err := lc.run(ctx, p)
	if err != nil {
		return err
	}
	// The SVMs the lifecycle left: every one of them reports to the upgrade.
	if err := h.phase("upgrade", func() error { return h.upgrade(ctx, now, fio, newEngine()) }); err != nil {
		return err
	}

	return h.phase("fio-finish", func() error {
		passes, failures, last := fio.stop()
		h.check(passes >= 2 && failures == 0, "fio (nbd engine, verify=crc32c) across both rolls and the lifecycle phases: %d passes written and verified, %d failed%s", passes, failures, last)
		return nil
	})
}

// limitsOf prints a volume's QoS limits, own and effective.
func limitsOf(v *gateway.Volume) string {
	if v == nil {
		return "(no volume)"
	}
	return fmt.Sprintf("%d IOPS, %d B/s (effective %d IOPS, %d B/s)", v.IOPSLimit, v.BandwidthLimit, v.EffectiveIOPSLimit, v.EffectiveBandwidthLimit)
}

func units(hosts []string) [][]string {
	var out [][]string
	for _, x := range hosts {
		out = append(out, []string{x})
	}
	return out
}

func (h *harness) lastSeq() int64 {
	ev := h.log.Since(0, "")
	if len(ev) == 0 {
		return 0
	}
	return ev[len(ev)-1].Seq
}

// checkOrder reads the roll's events after seq: every host's steps form
// one block, the blocks come in the order of hosts, and each block runs
// from its first step to "resync: done".
func (h *harness) checkOrder(after int64, hosts []string) {
	var order []string
	done := map[string]bool{}
	for _, e := range h.log.Since(after, maintenance.Job(system)) {
		if e.Host == "" {
			continue
		}
		if len(order) == 0 || order[len(order)-1] != e.Host {
			order = append(order, e.Host)
		}
		if e.Step == "resync" && strings.HasSuffix(e.Message, "done") {
			done[e.Host] = true
		}
	}
	allDone := true
	for _, x := range hosts {
		allDone = allDone && done[x]
	}
	h.check(slices.Equal(order, hosts) && allDone, "engine event log: hosts went through maintenance one at a time, in order %v (saw %v)", hosts, order)
}

func hostsInMaintenance(ctx context.Context, vc *vim25.Client) ([]string, error) {
	inv, err := inventory.Collect(ctx, vc)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, dc := range inv.Datacenters {
		for _, cl := range dc.Clusters {
			for _, name := range cl.Hosts {
				if ih, _ := inv.Host(name); ih != nil && ih.InMaintenance {
					out = append(out, name)
				}
			}
		}
	}
	slices.Sort(out)
	return out, nil
}

// waitHealthy waits until the cluster's health is ok and returns it.
func waitHealthy(ctx context.Context, api gateway.API, timeout time.Duration) (*gateway.System, error) {
	var sys *gateway.System
	err := poll.Until(ctx, timeout, 500*time.Millisecond, "the daemons' logs are under svm/*/logs in the state directory", func() (bool, string, error) {
		var err error
		if sys, err = api.System(ctx); err != nil {
			return false, fmt.Sprintf("cluster not healthy (%v)", err), nil
		}
		return sys.Health.Status == gateway.HealthOK, fmt.Sprintf("cluster health %q (%s)", sys.Health.Status, strings.Join(sys.Health.Messages, "; ")), nil
	})
	if err != nil {
		return nil, err
	}
	return sys, nil
}

// dump prints what the gateway says about the cluster (after a failure).
func (h *harness) dump(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if sys, err := h.api.System(ctx); err == nil {
		fmt.Printf("     gateway: health %s: %s\n", sys.Health.Status, strings.Join(sys.Health.Messages, "; "))
	}
	sdss, err := h.api.ListSDS(ctx)
	if err != nil {
		fmt.Printf("     gateway: list SDSs: %v\n", err)
		return
	}
	for _, s := range sdss {
		m := gateway.SDSMaintenanceView{}
		if s.Maintenance != nil {
			m = *s.Maintenance
		}
		fmt.Printf("     gateway: sds %s state %s up %v maintenance %+v\n", s.Name, s.State, s.Up, m)
	}
}

func hostNames(p *plan.Plan) []string {
	var out []string
	for _, x := range p.Hosts {
		out = append(out, x.Name)
	}
	return out
}

func hostOf(p *plan.Plan, name string) *plan.Host {
	for i := range p.Hosts {
		if p.Hosts[i].Name == name {
			return &p.Hosts[i]
		}
	}
	return nil
}
