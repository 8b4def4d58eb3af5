// The last step, one per ESXi host: its software iSCSI adapter bound to a
// VMkernel port on the iSCSI port group, every target SVM as a send
// target, the host registered in Cairn by its IQN, and round robin on
// the Cairn LUNs it already sees.

package deploy

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sort"

	"github.com/cairn-storage/cairn/vcenter-plugin/internal/gateway"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/hoststorage"
	"github.com/cairn-storage/cairn/vcenter-plugin/internal/plan"
)

// iscsiSteps are the iscsi/<host> steps of every plan host, in plan order.
func (r *run) iscsiSteps() []step {
	var targets []string
	for _, o := range r.p.Hosts {
		if o.Has(plan.RoleTarget) {
			targets = append(targets, fmt.Sprintf("%s:%d", hostPort(o.DataAddress()), hoststorage.DefaultISCSIPort))
		}
	}
	sort.Strings(targets)
	var steps []step
	for i := range r.p.Hosts {
		h := &r.p.Hosts[i]
		steps = append(steps, step{key: "iscsi/" + h.Name, event: "iscsi", host: h.Name,
			do: func(ctx context.Context) (string, error) { return r.wireHost(ctx, h, targets) }})
	}
	return steps
}

// iscsiVSwitch is the standard switch of the iSCSI port group.
func (r *run) iscsiVSwitch() string {
	if r.p.ISCSI.VSwitch == "" {
		return "vSwitch0"
	}
	return r.p.ISCSI.VSwitch
}

func (r *run) wireHost(ctx context.Context, h *plan.Host, targets []string) (string, error) {
	hs := hoststorage.New(r.VC, r.hosts[h.Name])
	st, err := hs.EnableISCSI(ctx)
	if err != nil {
		return "", err
	}
	vmk := ""
	if h.VmkernelIP != "" || !r.p.ISCSI.CreateVmkernel {
		mask := ""
		cidr := r.p.ISCSI.CIDR
		if cidr == "" {
			cidr = r.p.Network.CIDR
		}
		if pfx, err := netip.ParsePrefix(cidr); err == nil {
			mask = prefixMask(pfx.Bits())
		}
		if vmk, err = hs.EnsureVmkernelPort(ctx, st.HBA, r.p.ISCSI.Portgroup, r.iscsiVSwitch(), h.VmkernelIP, mask, r.p.ISCSI.CreateVmkernel); err != nil {
			return "", err
		}
	}
	if err := hs.AddSendTargets(ctx, targets); err != nil {
		return "", err
	}
	if _, err := r.api.GetHost(ctx, h.Name); errors.Is(err, gateway.ErrNotFound) {
		if _, err := r.api.CreateHost(ctx, gateway.HostSpec{Name: h.Name, Type: "iscsi", IQN: st.IQN}); err != nil {
			return "", fmt.Errorf("register host %s (%s) in Cairn: %w", h.Name, st.IQN, err)
		}
	} else if err != nil {
		return "", err
	}
	if err := hs.Rescan(ctx); err != nil {
		return "", err
	}
	if _, err := hs.EnsureRoundRobin(ctx, ""); err != nil { // Cairn LUNs already mapped to the host
		return "", err
	}
	return fmt.Sprintf("%s %s bound to %s, %d send targets", st.HBA, st.IQN, vmk, len(targets)), nil
}

func prefixMask(bits int) string {
	var b [4]byte
	for i := 0; i < bits && i < 32; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	return netip.AddrFrom4(b).String()
}
