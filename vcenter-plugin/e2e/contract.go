// What a deployment must leave in each SVM and in vCenter: the appliance
// contract checked from the outside.

package main

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/mo"

	"github.com/cairn-storage/cairn/appliance/contract"

	"github.com/cairn-storage/cairn/vcenter-plugin/internal/deploy"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/gateway"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/plan"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/vcsimkit"
)

// checkContract checks what the deployment left in each SVM and in vCenter: the real
// first boot ran from the OVF environment, the units got the contract's values (the
// target's relative port among all ports), the gateway thumbprint vCenter shows is the
// certificate's, and no vApp property holds a usable secret.
func (h *harness) checkContract(ctx context.Context, vc *vim25.Client, p *plan.Plan) error {
	st, err := deploy.LoadState(filepath.Join(h.state, "plugin"), p)
	if err != nil {
		return err
	}
	ports := p.TargetPorts()
	var all []string
	for _, x := range p.Hosts {
		all = append(all, strconv.Itoa(ports[x.Name]))
	}
	finder := find.NewFinder(vc)
	dc, err := finder.Datacenter(ctx, vcsimkit.Datacenter)
	if err != nil {
		return err
	}
	finder.SetDatacenter(dc)
	caCopies := map[string]string{} // SVM -> SHA-256 of its CA certificate and key
	for _, x := range p.Hosts {
		name := p.SVMName(x.Name)
		dir := filepath.Join(h.state, "svm", name)
		env, err := os.ReadFile(filepath.Join(dir, "root", "etc", "cairn", "cairn.env"))
		_, derr := os.Stat(filepath.Join(dir, "root", "var-lib", "cairn", "firstboot.done"))
		h.check(err == nil && derr == nil && strings.Contains(string(env), fmt.Sprintf("CAIRN_CONTRACT=%d\n", contract.Version)),
			"%s: cairn firstboot configured the SVM from its OVF environment (cairn.env, firstboot.done)", name)
		cmd := unitCmdline(dir, "cairn-target.service")
		want := fmt.Sprintf("--port-number %d --group-ports %s", ports[x.Name], strings.Join(all, ","))
		h.check(strings.Contains(cmd, want), "%s: cairn target runs with %q: %s", name, want, cmd)
		if x.Has(plan.RoleMDM) {
			mcmd := unitCmdline(dir, "cairn-mdm.service")
			h.check(strings.Count(mcmd, "=https://") == 3 && strings.Contains(mcmd, "--name "+plan.SVMHostname(x.Name)) &&
				strings.Contains(mcmd, "--pki /etc/cairn/pki/mdm"),
				"%s: cairn mdm runs as %s with its certificate and the 3-member initial cluster over TLS: %s", name, plan.SVMHostname(x.Name), mcmd)
			// The firewall first boot loaded: this core is a data client (etcd client
			// port and data path open, fio runs through them) but no MDM member, so
			// etcd's peer port, which etcd serves, must not answer it.
			fw, _ := os.ReadFile(filepath.Join(dir, "root", "etc", "nftables.conf"))
			conn, derr := (&net.Dialer{Timeout: 1500 * time.Millisecond}).DialContext(ctx, "tcp", net.JoinHostPort(x.SVMIP, strconv.Itoa(contract.MDMPeerPort)))
			if conn != nil {
				conn.Close()
			}
			h.check(derr != nil && strings.Contains(string(fw), "ip saddr { 10.232.0.1 } tcp dport 2379 accept"),
				"%s: the SVM firewall drops etcd peer connections from this core (%v) and lets it reach etcd as a data client", name, derr)
			// Every MDM member keeps the CA (the first created it, the others
			// fetched it with their mdm certificate) and serves joins.
			sum, why := caCopy(filepath.Join(dir, "root", "var-lib", "cairn", "ca"))
			caCopies[name] = sum
			jcmd := unitCmdline(dir, "cairn-join.service")
			h.check(why == "" && strings.Contains(jcmd, "pki serve --ca /var/lib/cairn/ca"),
				"%s: keeps the cluster CA (0700 directory, key 0600: %s) and runs the join service: %s", name, cmp.Or(why, "ok"), jcmd)
		}

		vm, err := finder.VirtualMachine(ctx, name)
		if err != nil {
			return err
		}
		var m mo.VirtualMachine
		if err := vm.Properties(ctx, vm.Reference(), []string{"config.vAppConfig", "config.extraConfig"}, &m); err != nil {
			return err
		}
		leaked := ""
		token := ""
		for _, prop := range m.Config.VAppConfig.GetVmConfigInfo().Property {
			if strings.Contains(prop.Value, st.Secrets.AdminPassword) {
				leaked = prop.Id
			}
			if prop.Id == contract.KeyJoinToken {
				token = prop.Value
			}
		}
		h.check(len(st.Secrets.AdminPassword) >= 20 && leaked == "", "%s: no vApp property holds the admin password (leaked in %q)", name, leaked)
		h.check(token != "" && token == st.Secrets.BootstrapToken, "%s: its first boot got the deployment's one-time bootstrap token, as every SVM of an initial deployment (set: %v)", name, token != "")
		// Every daemon of the SVM runs with a certificate of the cluster CA, got at
		// first boot: the keeper issued its own, the others joined with the token.
		for _, u := range []string{"cairn-sds.service", "cairn-target.service", "cairn-gateway.service", "cairn-peersync.service"} {
			if c := unitCmdline(dir, u); !strings.HasPrefix(c, "(not running") {
				h.check(strings.Contains(c, "--pki /etc/cairn/pki/"), "%s: %s runs with its certificate: %s", name, u, c)
			}
		}
		// Whoever reads the VM's settings in vCenter cannot join with the token:
		// the deployment redeemed it, which closed the bootstrap window.
		h.check(h.joinRefused(ctx, p, token, "the deployer redeemed the bootstrap token"), "%s: the join service refuses the bootstrap token from the vApp properties now", name)
		if x.Has(plan.RoleGateway) {
			published := ""
			for _, o := range m.Config.ExtraConfig {
				if ov := o.GetOptionValue(); ov != nil && ov.Key == contract.GuestThumbprint {
					published, _ = ov.Value.(string)
				}
			}
			pemBytes, err := os.ReadFile(filepath.Join(dir, "root", "var-lib", "cairn", "gateway", "cert.pem"))
			blk, _ := pem.Decode(pemBytes)
			h.check(err == nil && blk != nil && published == gateway.Thumbprint(blk.Bytes) && st.GatewayThumbprints[x.Name] == published,
				"%s: vCenter shows the gateway certificate's SHA-256 (%s) in guestinfo, and the engine pinned it", name, published)
			// Whoever reads the VM's settings in vCenter gets a spent token.
			cfg, err := deploy.GatewayConfig(p, st, 0)
			if err != nil {
				return err
			}
			c, err := gateway.NewHTTPClient(cfg)
			if err != nil {
				return err
			}
			rerr := c.RedeemBootstrapToken(ctx, token, "an-attacker-password")
			var se *gateway.StatusError
			h.check(errors.As(rerr, &se) && se.Status == 401, "%s: the bootstrap token from its vApp properties is refused now: %v", name, rerr)
		}
	}
	sums := map[string]bool{}
	for _, s := range caCopies {
		sums[s] = true
	}
	h.check(len(caCopies) == len(p.MDMMembers()) && len(sums) == 1,
		"every MDM member (%d of %d) holds the same CA, certificate and key (%d distinct)", len(caCopies), len(p.MDMMembers()), len(sums))
	// A node joins at another member than the first, whose join service is
	// then not involved at all: only that member's URL is given.
	if len(p.MDMMembers()) > 1 && h.api != nil {
		tok, err := h.api.CreateJoinToken(ctx, []string{"client"}, 10*time.Minute)
		if err != nil {
			return fmt.Errorf("join token: %w", err)
		}
		dir := filepath.Join(h.state, "pki-client-second-member")
		cctx, cancel := context.WithTimeout(ctx, time.Minute)
		out, err := h.pkiJoinAt(cctx, joinURL(p, 1), tok.Token, "client", "e2e-second-member", dir)
		cancel()
		crt, _ := os.ReadFile(filepath.Join(dir, "ca.crt"))
		blk, _ := pem.Decode(crt)
		same := blk != nil && caCopies[p.SVMName(mdmHost(p, 1))] != "" && strings.HasPrefix(caCopies[p.SVMName(mdmHost(p, 1))], sha256Hex(blk.Bytes))
		h.check(err == nil && same, "a node joins with a one-time join token at the second MDM member's join service alone (%s), and trusts the same CA: %v %s",
			joinURL(p, 1), err, head(string(out), 300))
	}
	return nil
}

// caCopy checks a CA directory as an MDM member keeps it and returns the
// SHA-256 of its certificate's DER and of its key file ("cert/key"), or why
// it is not one.
func caCopy(dir string) (string, string) {
	if st, err := os.Stat(dir); err != nil || st.Mode().Perm() != 0o700 {
		return "", fmt.Sprintf("%s: not a 0700 directory (%v)", dir, err)
	}
	if st, err := os.Stat(filepath.Join(dir, "ca.key")); err != nil || st.Mode().Perm() != 0o600 {
		return "", fmt.Sprintf("ca.key: not 0600 (%v)", err)
	}
	crt, err := os.ReadFile(filepath.Join(dir, "ca.crt"))
	blk, _ := pem.Decode(crt)
	if err != nil || blk == nil {
		return "", fmt.Sprintf("ca.crt: %v", err)
	}
	key, err := os.ReadFile(filepath.Join(dir, "ca.key"))
	if err != nil {
		return "", err.Error()
	}
	return sha256Hex(blk.Bytes) + "/" + sha256Hex(key), ""
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// mdmHost is the host whose SVM is the i-th MDM member.
func mdmHost(p *plan.Plan, i int) string {
	for _, x := range p.Hosts {
		if x.SVMIP == p.MDMMembers()[i] {
			return x.Name
		}
	}
	return ""
}

// joinRefused tries to get a certificate with token (read from an SVM's vApp
// properties, as an attacker who can read them in vCenter would), and reports
// whether the first MDM member's join service refused it, saying why.
func (h *harness) joinRefused(ctx context.Context, p *plan.Plan, token, why string) bool {
	dir, err := os.MkdirTemp(h.state, "attacker-")
	if err != nil {
		return false
	}
	defer os.RemoveAll(dir)
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := h.pkiJoin(cctx, p, token, "mdm", "attacker", filepath.Join(dir, "pki"))
	_, serr := os.Stat(filepath.Join(dir, "pki", "node.crt"))
	refused := err != nil && strings.Contains(string(out), "403") && strings.Contains(string(out), why) && serr != nil
	if !refused {
		fmt.Printf("     join with a token from the vApp properties: %v: %s\n", err, head(string(out), 400))
	}
	return refused
}

// unitCmdline is the command line of a unit's main process in a simulated SVM.
func unitCmdline(svmDir, unit string) string {
	pid, err := os.ReadFile(filepath.Join(svmDir, "sim", "units", unit+".main"))
	if err != nil {
		return "(not running: " + err.Error() + ")"
	}
	b, err := os.ReadFile("/proc/" + strings.TrimSpace(string(pid)) + "/cmdline")
	if err != nil {
		return "(gone: " + err.Error() + ")"
	}
	return strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " "))
}
