package lio

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
)

//go:embed rtslib_apply.py
var rtslibApply string

// DefaultSaveFile is where rtslib-fb keeps the configuration that
// `targetctl restore` (the target service) loads at boot.
const DefaultSaveFile = "/etc/target/saveconfig.json"

// BackstoreOptions are the kernel settings of every Cairn backstore.
type BackstoreOptions struct {
	// MaxDataAreaMB bounds the TCMU data area (kernel memory, allocated on
	// use) per backstore; it must hold the largest command in flight.
	MaxDataAreaMB int
	// HWMaxSectors is the largest transfer, in 512-byte blocks, LIO passes
	// down; it must not be below the Block Limits VPD maximum transfer.
	HWMaxSectors int
}

// DefaultBackstoreOptions: 64 MiB of data area, 1 MiB transfers. (The
// kernel attributes every backstore gets are RequiredAttributes.)
var DefaultBackstoreOptions = BackstoreOptions{MaxDataAreaMB: 64, HWMaxSectors: 2048}

// control is the control string for new backstores: 512-byte blocks, the
// data area bound and no netlink replies expected (Cairn does not listen to
// target_core_user's netlink events; -1 tells the kernel not to wait).
func (o BackstoreOptions) control() string {
	return fmt.Sprintf("hw_block_size=512,max_data_area_mb=%d,nl_reply_supported=-1", o.MaxDataAreaMB)
}

// RTSLib applies plans by running rtslib_apply.py with Python.
type RTSLib struct {
	Python   string // default "python3"
	SaveFile string // "" disables saving (tests); DefaultSaveFile in production
	Options  BackstoreOptions
}

type applyRequest struct {
	Actions      []Action `json:"actions"`
	Control      string   `json:"control"`
	HWMaxSectors int      `json:"hw_max_sectors,omitempty"`
	SaveFile     string   `json:"save_file"`
}

// Apply runs actions in order (one Python process per call: batch them)
// and saves the configuration.
func (r RTSLib) Apply(ctx context.Context, actions []Action) error {
	if len(actions) == 0 {
		return nil
	}
	req, err := json.Marshal(applyRequest{
		Actions: actions, Control: r.Options.control(), HWMaxSectors: r.Options.HWMaxSectors, SaveFile: r.SaveFile,
	})
	if err != nil {
		return err
	}
	py := r.Python
	if py == "" {
		py = "python3"
	}
	cmd := exec.CommandContext(ctx, py, "-c", rtslibApply)
	cmd.Stdin = bytes.NewReader(req)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		return fmt.Errorf("lio: apply %d actions with rtslib-fb: %v: %s (is python3-rtslib-fb installed and configfs mounted?)", len(actions), err, msg)
	}
	return nil
}
