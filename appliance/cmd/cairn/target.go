package main

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/cairn-storage/cairn/appliance/internal/blockdev"
	"github.com/cairn-storage/cairn/appliance/internal/catalog"
	"github.com/cairn-storage/cairn/appliance/internal/frontend"
	"github.com/cairn-storage/cairn/appliance/internal/lio"
	"github.com/cairn-storage/cairn/appliance/internal/model"
	"github.com/cairn-storage/cairn/appliance/internal/peersync"
	"github.com/cairn-storage/cairn/appliance/internal/pki"
	"github.com/cairn-storage/cairn/appliance/internal/scsi"
	"github.com/cairn-storage/cairn/appliance/internal/target"
)

func init() {
	register("target", "export mapped volumes over iSCSI through LIO (TCMU user backstores)", runTarget)
}

func runTarget(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("target", flag.ContinueOnError)
	var c common
	c.add(fs)
	iqn := fs.String("iqn", "", "this SVM's target IQN (one per SVM)")
	portals := fs.String("portals", "0.0.0.0:3260", "comma-separated ip:port iSCSI portals")
	port := fs.Int("port-number", 1, "this SVM's relative target port (unique per SVM, 1..65535)")
	group := fs.String("group-ports", "", "comma-separated relative port numbers of every SVM (for REPORT TARGET PORT GROUPS); default: this one")
	prefix := fs.String("backstore-prefix", "", "backstore name prefix (tests running two targets in one kernel)")
	security := dataSecurityFlag(fs)
	addrMap := fs.String("sds-addr-map", "", "rewrite SDS addresses: from=to[,from=to] on the host part (NAT, test guests)")
	conns := fs.Int("conns-per-sds", 2, "TCP connections to each SDS (1..8): small reads always share the first; writes and large reads alternate")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *conns < 1 || *conns > 8 {
		return errorf("--conns-per-sds must be 1..8, not %d", *conns)
	}
	if *iqn == "" {
		return errorf("--iqn is required (e.g. iqn.2026-01.io.cairn:svm1)")
	}
	if *port < 1 || *port > 65535 {
		return errorf("--port-number must be 1..65535")
	}
	ports := []uint16{uint16(*port)}
	if *group != "" {
		ports = nil
		for _, p := range strings.Split(*group, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(p))
			if err != nil || n < 1 || n > 65535 {
				return errorf("--group-ports: %q is not a port number", p)
			}
			ports = append(ports, uint16(n))
		}
	}
	rewrite := map[string]string{}
	if *addrMap != "" {
		for _, kv := range strings.Split(*addrMap, ",") {
			from, to, ok := strings.Cut(kv, "=")
			if !ok {
				return errorf("--sds-addr-map: %q is not from=to", kv)
			}
			rewrite[from] = to
		}
	}
	log := c.logger("target")
	cat, cl, closeClient, err := c.dataClientAs(ctx, log, pki.RoleTarget, *security)
	if err != nil {
		return err
	}
	defer closeClient()
	cl.ConnsPerSDS = *conns
	if len(rewrite) > 0 {
		cl.MapAddr = func(addr string) string {
			host, p, found := strings.Cut(addr, ":")
			if to, ok := rewrite[host]; ok && found {
				return to + ":" + p
			}
			return addr
		}
	}
	vio := frontend.NewIO(cat, model.HostISCSI, "")
	go vio.Run(ctx, cat.Client(), frontend.StatsInterval, log)
	// The port group follows the SVM records (peersync.TargetPorts), checked
	// at start and at each change of the model; RTPG reads it at each command.
	slices.Sort(ports)
	ports = slices.Compact(ports)
	var portGroup atomic.Pointer[[]uint16]
	portGroup.Store(&ports)
	followPorts := func() {
		tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		now, err := peersync.TargetPorts(tctx, cat.Client(), ports)
		if err != nil {
			return // the list stays; the next change tries again
		}
		if old := *portGroup.Load(); !slices.Equal(old, now) {
			portGroup.Store(&now)
			log.Info("target port group changed", "ports", now, "was", old)
		}
	}
	followPorts()
	changed := make(chan struct{}, 1)
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-cat.Changed():
				followPorts()
				select {
				case changed <- struct{}{}:
				default:
				}
			}
		}
	}()
	cfg := target.Config{
		IQN:             *iqn,
		BackstorePrefix: *prefix,
		Portals:         strings.Split(*portals, ","),
		Changed:         changed,
		Mappings: func(ctx context.Context) ([]target.Mapping, error) {
			return iscsiMappings(ctx, cat, model.NewStore(cat.Client()))
		},
		Open: func(ctx context.Context, id string) (blockdev.Volume, error) {
			vid, err := catalog.ParseVolumeID(id)
			if err != nil {
				return nil, fmt.Errorf("volume id %q: %w", id, err)
			}
			v, err := cl.OpenID(vid)
			if err != nil {
				return nil, err
			}
			return vio.Wrap(v), nil
		},
		SCSIOptions: scsi.Options{VendorID: "CAIRN", ProductID: "Cairn volume", Revision: "0001",
			TargetPortGroup: 1, RelativeTargetPort: uint16(*port), GroupPorts: ports,
			GroupPortsNow: func() []uint16 { return *portGroup.Load() },
			// One logical block per physical block reporting: libiscsi's
			// GET LBA STATUS tests assume it, and VMFS does not need 4Kn hints.
			PhysicalBlockSize: 512},
		Log: log,
	}
	log.Info("iSCSI target starting", "iqn", *iqn, "portals", *portals)
	return target.Run(ctx, cfg)
}

// iscsiMappings lists every volume mapped to an iSCSI host, with its hosts
// and their CHAP credentials. The secrets are outside the model (the
// catalog has a flag, Host.CHAP): they are read from etcd at each pass,
// which follows every change of a host (a secret is written with its
// host's key, model/keys.go).
func iscsiMappings(ctx context.Context, cat *catalog.Catalog, st *model.Store) ([]target.Mapping, error) {
	var secrets map[string]string
	for _, v := range cat.Volumes() {
		for _, mp := range v.Mappings {
			if h, ok := cat.Host(mp.HostID); ok && h.CHAP && secrets == nil {
				var err error
				if secrets, err = st.CHAPSecrets(ctx); err != nil {
					return nil, err
				}
			}
		}
	}
	var out []target.Mapping
	for _, v := range cat.Volumes() {
		m := target.Mapping{VolumeID: v.ID, LUN: -1}
		for _, mp := range v.Mappings {
			h, ok := cat.Host(mp.HostID)
			if !ok || h.Type != model.HostISCSI || h.IQN == "" {
				continue
			}
			m.LUN, m.ReadOnly = mp.LUN, m.ReadOnly || mp.ReadOnly
			cred := lio.Credentials{}
			if h.CHAP {
				sec, ok := secrets[h.ID]
				if !ok {
					// Never serve a host that should use CHAP without it.
					return nil, fmt.Errorf("host %q has CHAP on but its secret is missing in etcd (%s): set it again with PATCH /api/v1/hosts/%s", h.Name, model.CHAPSecretKey(h.ID), h.Name)
				}
				cred = lio.Credentials{User: h.CHAPUser, Secret: sec}
			}
			m.Hosts = append(m.Hosts, target.Host{IQN: h.IQN, CHAP: cred})
		}
		if len(m.Hosts) > 0 {
			out = append(out, m)
		}
	}
	return out, nil
}
