// Command memtarget runs the `cairn target` logic over in-memory volumes,
// for the LIO test guest (tests/lio) before a Cairn cluster is reachable
// there: it configures LIO through rtslib-fb, serves each volume's TCMU ring
// and keeps running until killed.
//
//	memtarget -iqn IQN -hosts iqn1,iqn2 -volumes 00000000000000a1:256,...  (sizes in MiB)
//
// With -mappings FILE the hosts come from a file re-read every second (one
// line per mapping: "volume-id host-iqn[,host-iqn...] [chap-user chap-secret]";
// a missing file or no line for a volume unmaps it), so a test can map and
// unmap while the target runs.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cairn-storage/cairn/appliance/internal/blockdev"
	"github.com/cairn-storage/cairn/appliance/internal/lio"
	"github.com/cairn-storage/cairn/appliance/internal/scsi"
	"github.com/cairn-storage/cairn/appliance/internal/target"
	"github.com/cairn-storage/cairn/appliance/internal/tcmu"
)

func main() {
	iqn := flag.String("iqn", "iqn.2026-01.io.cairn:svm-test", "target IQN")
	portal := flag.String("portal", "0.0.0.0:3260", "portal ip:port")
	hosts := flag.String("hosts", "", "comma-separated initiator IQNs every volume is mapped to")
	volumes := flag.String("volumes", "00000000000000a1:256", "comma-separated volume-id:size-MiB")
	chapUser := flag.String("chap-user", "", "CHAP user for every host (optional)")
	chapSecret := flag.String("chap-secret", "", "CHAP secret for every host")
	handler := flag.String("handler", "scsi", "scsi (Cairn's SCSI layer) or minimal (ring smoke test)")
	port := flag.Int("port-id", 1, "relative target port id of this target (differs per SVM)")
	saveFile := flag.String("save", "", "rtslib saveconfig file (empty: do not save)")
	iqn2 := flag.String("second-iqn", "", "also export the volumes through a second target with this IQN (two-SVM tests)")
	mapFile := flag.String("mappings", "", "file of mappings re-read every second (see doc); overrides -hosts")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile here until exit (debugging)")
	flag.Parse()
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err == nil && pprof.StartCPUProfile(f) == nil {
			defer pprof.StopCPUProfile()
		}
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))

	vols := map[string]blockdev.Volume{}
	var mappings []target.Mapping
	for _, spec := range strings.Split(*volumes, ",") {
		id, mib, ok := strings.Cut(spec, ":")
		n, err := strconv.ParseInt(mib, 10, 64)
		num, err2 := strconv.ParseUint(id, 16, 64)
		if !ok || err != nil || err2 != nil {
			fmt.Fprintf(os.Stderr, "memtarget: bad -volumes entry %q (want hexid:MiB)\n", spec)
			os.Exit(2)
		}
		vols[id] = blockdev.NewMemVolume("mem-"+id, num, n<<20)
		m := target.Mapping{VolumeID: id, LUN: -1}
		for _, h := range strings.Split(*hosts, ",") {
			if h != "" {
				m.Hosts = append(m.Hosts, target.Host{IQN: h, CHAP: lio.Credentials{User: *chapUser, Secret: *chapSecret}})
			}
		}
		mappings = append(mappings, m)
	}
	newHandler, ok := handlers[*handler] // "scsi": nil, Run's default
	if !ok {
		fmt.Fprintf(os.Stderr, "memtarget: unknown -handler %q\n", *handler)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	cfg := target.Config{
		IQN:     *iqn,
		Portals: []string{*portal},
		Mappings: func(context.Context) ([]target.Mapping, error) {
			if *mapFile != "" {
				return readMappings(*mapFile, vols)
			}
			return mappings, nil
		},
		Interval: time.Second,
		Open: func(_ context.Context, id string) (blockdev.Volume, error) {
			if v, ok := vols[id]; ok {
				return v, nil
			}
			return nil, fmt.Errorf("no volume %s", id)
		},
		NewHandler: newHandler,
		SCSIOptions: scsi.Options{VendorID: "CAIRN", ProductID: "Cairn volume", Revision: "0001",
			TargetPortGroup: 1, RelativeTargetPort: uint16(*port), GroupPorts: []uint16{uint16(*port)}},
		LIO: target.KernelLIO{IQN: *iqn, Root: lio.ConfigfsRoot,
			RTSLib: lio.RTSLib{SaveFile: *saveFile, Options: lio.DefaultBackstoreOptions}},
		Log: log,
	}
	var wg sync.WaitGroup
	if *iqn2 != "" {
		// A second target over the same volumes, as a second SVM would
		// export them: own IQN, own backstores, own relative port.
		cfg.SCSIOptions.GroupPorts = []uint16{uint16(*port), uint16(*port) + 1}
		cfg2 := cfg
		cfg2.IQN, cfg2.BackstorePrefix = *iqn2, "cairn-b-"
		cfg2.SCSIOptions.RelativeTargetPort = uint16(*port) + 1
		cfg2.LIO = target.KernelLIO{IQN: *iqn2, Prefix: cfg2.BackstorePrefix, Root: lio.ConfigfsRoot,
			RTSLib: lio.RTSLib{Options: lio.DefaultBackstoreOptions}}
		cfg2.Log = log.With("target", *iqn2)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := target.Run(ctx, cfg2); err != nil {
				log.Error("memtarget: second target", "err", err)
			}
		}()
	}
	err := target.Run(ctx, cfg)
	wg.Wait()
	if err != nil {
		log.Error("memtarget", "err", err)
		pprof.StopCPUProfile()
		os.Exit(1)
	}
}

var handlers = map[string]func(blockdev.Volume) tcmu.Handler{
	"minimal": func(v blockdev.Volume) tcmu.Handler { return minimal{v} },
	"scsi":    nil,
}

// readMappings parses the -mappings file.
func readMappings(path string, vols map[string]blockdev.Volume) ([]target.Mapping, error) {
	raw, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []target.Mapping
	for _, line := range strings.Split(string(raw), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		if len(f) != 2 && len(f) != 4 {
			return nil, fmt.Errorf("memtarget: %s: bad line %q", path, line)
		}
		if _, ok := vols[f[0]]; !ok {
			return nil, fmt.Errorf("memtarget: %s: unknown volume %s", path, f[0])
		}
		m := target.Mapping{VolumeID: f[0], LUN: -1}
		for _, h := range strings.Split(f[1], ",") {
			host := target.Host{IQN: h}
			if len(f) == 4 {
				host.CHAP = lio.Credentials{User: f[2], Secret: f[3]}
			}
			m.Hosts = append(m.Hosts, host)
		}
		out = append(out, m)
	}
	return out, nil
}
