package tcmu

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// SysClassUIO is where the kernel lists uio devices.
const SysClassUIO = "/sys/class/uio"

// UIOName is the uio device name target_core_user gives a user backstore:
// "tcm-user/<hba index>/<backstore name>/<dev_config>".
type UIOName struct {
	HBA       int
	Name      string // backstore (storage object) name
	DevConfig string // e.g. "cairn/vol-42"
}

// ParseUIOName splits a uio device name; ok is false for other drivers' devices.
func ParseUIOName(s string) (n UIOName, ok bool) {
	s = strings.TrimSpace(s)
	rest, found := strings.CutPrefix(s, "tcm-user/")
	if !found {
		return n, false
	}
	parts := strings.SplitN(rest, "/", 3)
	if len(parts) != 3 {
		return n, false
	}
	hba, err := strconv.Atoi(parts[0])
	if err != nil || parts[1] == "" {
		return n, false
	}
	return UIOName{HBA: hba, Name: parts[1], DevConfig: parts[2]}, true
}

// UIODevice is one TCMU uio device found in sysfs.
type UIODevice struct {
	Dev     string // e.g. "uio0"
	UIOName        // parsed name
	MapSize int64  // size of map 0 (mailbox + ring + data area)
}

// ListDevices returns the TCMU uio devices under sysRoot (SysClassUIO).
func ListDevices(sysRoot string) ([]UIODevice, error) {
	ents, err := os.ReadDir(sysRoot)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil // uio not loaded yet: no devices
	}
	if err != nil {
		return nil, fmt.Errorf("tcmu: list %s: %w", sysRoot, err)
	}
	var out []UIODevice
	for _, e := range ents {
		raw, err := os.ReadFile(filepath.Join(sysRoot, e.Name(), "name"))
		if err != nil {
			continue // device went away
		}
		n, ok := ParseUIOName(string(raw))
		if !ok {
			continue
		}
		sz, err := os.ReadFile(filepath.Join(sysRoot, e.Name(), "maps", "map0", "size"))
		if err != nil {
			continue
		}
		size, err := strconv.ParseInt(strings.TrimSpace(string(sz)), 0, 64)
		if err != nil || size <= 0 {
			continue
		}
		out = append(out, UIODevice{Dev: e.Name(), UIOName: n, MapSize: size})
	}
	return out, nil
}

// FindDevice waits up to timeout for the uio device of the backstore named
// name (its dev_config must start with "cairn/" when handler is "cairn").
func FindDevice(ctx context.Context, sysRoot, name string, timeout time.Duration) (UIODevice, error) {
	deadline := time.Now().Add(timeout)
	for {
		devs, err := ListDevices(sysRoot)
		if err != nil {
			return UIODevice{}, err
		}
		for _, d := range devs {
			if d.Name == name {
				return d, nil
			}
		}
		if time.Now().After(deadline) {
			return UIODevice{}, fmt.Errorf("tcmu: no uio device for backstore %q after %s: is the user backstore enabled and target_core_user loaded?", name, timeout)
		}
		select {
		case <-ctx.Done():
			return UIODevice{}, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Device is an open, mapped TCMU uio device.
type Device struct {
	*Ring
	f   *os.File
	mem []byte
}

// Open opens /dev/<d.Dev> and maps its region. The kernel allows one opener
// per device: a second Open fails with EBUSY.
func Open(devDir string, d UIODevice, log *slog.Logger) (*Device, error) {
	path := filepath.Join(devDir, d.Dev)
	// Opened non-blocking and wrapped with os.NewFile so the fd joins Go's
	// poller: Wait then parks a goroutine, not a thread, and a deadline can
	// cancel it. (os.File.Fd would switch the fd back to blocking mode.)
	fd, err := syscall.Open(path, syscall.O_RDWR|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("tcmu: open %s (backstore %s): %w", path, d.Name, err)
	}
	mem, err := syscall.Mmap(fd, 0, int(d.MapSize), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		syscall.Close(fd)
		return nil, fmt.Errorf("tcmu: mmap %s (%d bytes): %w", path, d.MapSize, err)
	}
	f := os.NewFile(uintptr(fd), path)
	dev := &Device{f: f, mem: mem}
	r, err := NewRing(mem, uioNotifier{f}, log)
	if err != nil {
		syscall.Munmap(mem)
		f.Close()
		return nil, fmt.Errorf("tcmu: %s: %w", path, err)
	}
	dev.Ring = r
	return dev, nil
}

// Close unmaps and closes the device. Call it only after Serve returned.
func (d *Device) Close() error {
	err := syscall.Munmap(d.mem)
	if cerr := d.f.Close(); err == nil {
		err = cerr
	}
	return err
}

// uioNotifier waits with a read of the uio event counter and kicks with a
// write. The fd is in Go's poller (uio supports poll), so a blocked Wait
// parks only a goroutine and Interrupt's deadline releases it.
type uioNotifier struct{ f *os.File }

func (u uioNotifier) Wait() error {
	var buf [4]byte
	_, err := u.f.Read(buf[:])
	return err
}

func (u uioNotifier) Interrupt() { u.f.SetReadDeadline(time.Unix(1, 0)) }

func (u uioNotifier) Kick() error {
	var buf [4]byte
	_, err := u.f.Write(buf[:])
	if errors.Is(err, os.ErrClosed) {
		return errClosed
	}
	return err
}
