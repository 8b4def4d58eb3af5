// The cluster's steps, through the gateway once every SVM is ready: set
// the admin password with the one-time bootstrap token and wait for the
// gateway to answer (connectGateway), then create the system, protection
// domain, fault sets, pool, and each host's SDS and devices.

package deploy

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"

	"github.com/cairn-storage/cairn/appliance/contract"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/gateway"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/plan"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/poll"
)

// GatewayConfig is how the plugin reaches system p's gateways: every gateway SVM in
// plan order, each pinned by the thumbprint its SVM published, the first one preferred
// and the others taken over when it is down. It logs in as admin with the password
// the deployment set.
func GatewayConfig(p *plan.Plan, st *State, port int) (gateway.Config, error) {
	if port == 0 {
		port = contract.GatewayPort
	}
	cfg := gateway.Config{Username: "admin", Password: st.Secrets.AdminPassword}
	for _, h := range p.Hosts {
		if !h.Has(plan.RoleGateway) {
			continue
		}
		tp := st.GatewayThumbprints[h.Name]
		if tp == "" {
			return cfg, fmt.Errorf("no certificate thumbprint pinned for the gateway on %s: resume the deployment so its SVM is checked", h.Name)
		}
		url := fmt.Sprintf("https://%s:%d", hostPort(h.SVMIP), port)
		if cfg.URL == "" {
			cfg.URL, cfg.Thumbprint = url, tp
		} else {
			cfg.Failover = append(cfg.Failover, gateway.Endpoint{URL: url, Thumbprint: tp})
		}
	}
	if cfg.URL == "" {
		return cfg, fmt.Errorf("system %s has no gateway in its plan", p.System)
	}
	return cfg, nil
}

// connectGateway sets the admin password with the bootstrap token (once,
// the step cluster/admin), logs in to the gateways and waits until one
// answers; r.api is then the gateway. Each of the two waits is bounded by
// ReadyTimeout.
func (r *run) connectGateway(ctx context.Context) error {
	cfg, err := GatewayConfig(r.p, r.st, r.GatewayPort)
	if err != nil {
		return err
	}
	api, err := r.Gateway(cfg)
	if err != nil {
		return err
	}
	hint := "check the gateway in its SVM (journalctl -u cairn-gateway) and that this machine reaches it, then resume"
	if err := r.runStep(ctx, step{key: "cluster/admin", event: "gateway", do: func(ctx context.Context) (string, error) {
		var detail string
		err := poll.Until(ctx, r.ReadyTimeout, r.PollInterval, hint, func() (bool, string, error) {
			err := api.RedeemBootstrapToken(ctx, r.st.Secrets.BootstrapToken, r.st.Secrets.AdminPassword)
			if err == nil {
				detail = "admin password set with the one-time bootstrap token"
				return true, "", nil
			}
			var se *gateway.StatusError
			if errors.As(err, &se) && se.Status == http.StatusUnauthorized {
				// Used already (a run that stopped before saving this step)?
				// Then our password works.
				if _, lerr := api.System(ctx); lerr == nil {
					detail = "admin password already set"
					return true, "", nil
				}
				return false, "", fmt.Errorf("the gateway refused the bootstrap token (%s): it is good once and for %s after the first gateway started. "+
					"Log in to the SVM console of the first gateway, read /var/lib/cairn/gateway/admin-password, set it as secrets.admin_password in %s, then resume",
					se.Message, contract.BootstrapTokenLifetime, StatePath(r.StateDir, r.p.System))
			}
			return false, fmt.Sprintf("gateway %s does not answer (%v)", cfg.URL, err), nil
		})
		return detail, err
	}}); err != nil {
		return err
	}
	if err := poll.Until(ctx, r.ReadyTimeout, r.PollInterval, hint, func() (bool, string, error) {
		_, err := api.System(ctx)
		return err == nil, fmt.Sprintf("gateway %s does not answer (%v)", cfg.URL, err), nil
	}); err != nil {
		return err
	}
	r.api = api
	return nil
}

func hostPort(ip string) string {
	if a, err := netip.ParseAddr(ip); err == nil && a.Is6() {
		return "[" + ip + "]"
	}
	return ip
}

// SDSName is the gateway name of the SDS on host: the SVM's host name, which the
// appliance's SDS runs under (packer/files/cairn-role: cairn sds --name $CAIRN_HOSTNAME).
func SDSName(host string) string { return plan.SVMHostname(host) }

// clusterSteps are the cluster's steps, in order: the system, its
// protection domain, fault sets and pool, then each SDS host's SDS and
// devices.
func (r *run) clusterSteps() []step {
	cluster := func(key string, do func(context.Context) (string, error)) step {
		return step{key: key, event: "bootstrap", do: do}
	}
	steps := []step{
		cluster("cluster/system", r.createSystem),
		cluster("cluster/service-users", r.createServiceUsers),
		cluster("cluster/pd", r.createPD),
	}
	for _, fs := range r.p.FaultSets() {
		steps = append(steps, cluster("cluster/faultset/"+fs, func(ctx context.Context) (string, error) { return r.createFaultSet(ctx, fs) }))
	}
	steps = append(steps, cluster("cluster/pool", r.createPool))
	for i := range r.p.Hosts {
		h := &r.p.Hosts[i]
		if !h.Has(plan.RoleSDS) {
			continue
		}
		steps = append(steps,
			step{key: "cluster/sds/" + h.Name, event: "bootstrap", host: h.Name,
				do: func(ctx context.Context) (string, error) { return r.createSDS(ctx, h) }},
			step{key: "cluster/devices/" + h.Name, event: "bootstrap", host: h.Name,
				do: func(ctx context.Context) (string, error) { return r.addDevices(ctx, h) }})
	}
	return steps
}

func (r *run) createSystem(ctx context.Context) (string, error) {
	return "", r.api.Bootstrap(ctx, r.p.System)
}

func (r *run) createPD(ctx context.Context) (string, error) {
	if _, err := r.api.GetPD(ctx, r.p.ProtectionDomain); err == nil {
		return "exists", nil
	} else if !errors.Is(err, gateway.ErrNotFound) {
		return "", err
	}
	pd, err := r.api.CreatePD(ctx, r.p.ProtectionDomain)
	if err != nil {
		return "", err
	}
	return pd.ID, nil
}

func (r *run) createFaultSet(ctx context.Context, fs string) (string, error) {
	if _, err := r.api.GetFaultSet(ctx, fs); err == nil {
		return "exists", nil
	} else if !errors.Is(err, gateway.ErrNotFound) {
		return "", err
	}
	f, err := r.api.CreateFaultSet(ctx, fs, r.p.ProtectionDomain)
	if err != nil {
		return "", err
	}
	return f.ID, nil
}

func (r *run) createPool(ctx context.Context) (string, error) {
	p := r.p
	if _, err := r.api.GetPool(ctx, p.StoragePool.Name); err == nil {
		return "exists", nil
	} else if !errors.Is(err, gateway.ErrNotFound) {
		return "", err
	}
	pool, err := r.api.CreatePool(ctx, gateway.PoolSpec{Name: p.StoragePool.Name, PD: p.ProtectionDomain, SparePercent: p.StoragePool.SparePercent})
	if err != nil {
		return "", err
	}
	return pool.ID, nil
}

func (r *run) createSDS(ctx context.Context, h *plan.Host) (string, error) {
	name := SDSName(h.Name)
	if s, err := r.api.GetSDS(ctx, name); err == nil {
		return "exists " + s.ID, nil
	} else if !errors.Is(err, gateway.ErrNotFound) {
		return "", err
	}
	s, err := r.api.CreateSDS(ctx, gateway.SDSSpec{Name: name, Address: fmt.Sprintf("%s:%d", hostPort(h.DataAddress()), r.SDSPort), PD: r.p.ProtectionDomain, FaultSet: h.FaultSet})
	if err != nil {
		return "", err
	}
	return s.ID, nil
}

// addDevices adds the host's plan devices its SDS does not have yet.
func (r *run) addDevices(ctx context.Context, h *plan.Host) (string, error) {
	name := SDSName(h.Name)
	// The gateway asks the SDS to prepare each device, so the SDS must be
	// up: a freshly created SDS starts serving only once it has read its
	// record (a moment after CreateSDS).
	var sds *gateway.SDS
	if err := poll.Until(ctx, r.ReadyTimeout, r.PollInterval, fmt.Sprintf("check `cairn sds` in the SVM on %s (journalctl -u cairn-sds), then resume", h.Name), func() (bool, string, error) {
		var err error
		if sds, err = r.api.GetSDS(ctx, name); err != nil {
			return false, "", err
		}
		return sds.Up, fmt.Sprintf("sds %s (%s) is not up", name, sds.Address), nil
	}); err != nil {
		return "", err
	}
	devs, err := r.api.ListDevices(ctx)
	if err != nil {
		return "", err
	}
	have := map[string]bool{}
	for _, d := range devs {
		if d.SDSID == sds.ID {
			have[d.Path] = true
		}
	}
	added := 0
	for _, d := range h.Devices {
		r.mu.Lock()
		guest := r.guest[h.Name].Values
		r.mu.Unlock()
		path, err := r.DevicePath(h.Name, d, guest)
		if err != nil {
			return "", err
		}
		if have[path] {
			continue
		}
		if _, err := r.api.AddDevice(ctx, gateway.DeviceSpec{SDS: sds.ID, Path: path, Pool: r.p.StoragePool.Name}); err != nil {
			return "", fmt.Errorf("add device %s to %s: %w", path, name, err)
		}
		added++
	}
	return fmt.Sprintf("%d added, %d present", added, len(h.Devices)-added), nil
}
