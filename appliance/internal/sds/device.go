package sds

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/cairn-storage/cairn/appliance/internal/blockdev"
	"github.com/cairn-storage/cairn/appliance/internal/bufpool"
	"github.com/cairn-storage/cairn/appliance/internal/iostats"
	"github.com/cairn-storage/cairn/appliance/internal/model"
)

// Device on-disk format, version 1.
//
// A device begins with a 4 KiB superblock; chunk slots of model.ChunkSize
// bytes start at DataOffset. Which (volume, chunk) lives in which slot is
// recorded in the SDS's local index, not on the device.
//
//	Superblock (offset 0, 4096 bytes; unused bytes zero):
//	   0 [8]  magic "CAIRNDEV"
//	   8 u32  format version (1)
//	  12 u32  chunk size in bytes
//	  16 [32] cluster id (ASCII, zero padded)
//	  48 [32] device id
//	  80 [32] SDS id
//	 112 u64  data offset in bytes
//	 120 u64  slot count
//	 128 i64  created, Unix nanoseconds
//	 136 u32  CRC-32C of bytes 0..135
//
// All integers big-endian.
const (
	superMagic    = "CAIRNDEV"
	superVersion  = 1
	superSize     = 4096
	DataOffset    = 1 << 20
	minDeviceSize = DataOffset + 16*model.ChunkSize
)

type superblock struct {
	ChunkSize  uint32
	ClusterID  string
	DeviceID   string
	SDSID      string
	DataOffset uint64
	Slots      uint64
	Created    time.Time
}

func putID(b []byte, s string) { copy(b[:32], s) }
func getID(b []byte) string    { return strings.TrimRight(string(b[:32]), "\x00") }

func (s *superblock) encode() []byte {
	b := bufpool.Aligned(superSize)
	copy(b[0:8], superMagic)
	be := binary.BigEndian
	be.PutUint32(b[8:], superVersion)
	be.PutUint32(b[12:], s.ChunkSize)
	putID(b[16:], s.ClusterID)
	putID(b[48:], s.DeviceID)
	putID(b[80:], s.SDSID)
	be.PutUint64(b[112:], s.DataOffset)
	be.PutUint64(b[120:], s.Slots)
	be.PutUint64(b[128:], uint64(s.Created.UnixNano()))
	be.PutUint32(b[136:], crc32.Checksum(b[:136], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

var errNoSuperblock = errors.New("no Cairn superblock")

func decodeSuperblock(b []byte) (*superblock, error) {
	if string(b[0:8]) != superMagic {
		return nil, errNoSuperblock
	}
	be := binary.BigEndian
	if v := be.Uint32(b[8:]); v != superVersion {
		return nil, fmt.Errorf("superblock format version %d is not supported by this release (supports %d): upgrade Cairn", v, superVersion)
	}
	if crc32.Checksum(b[:136], crc32.MakeTable(crc32.Castagnoli)) != be.Uint32(b[136:]) {
		return nil, errors.New("superblock checksum mismatch: the device was overwritten or is damaged")
	}
	return &superblock{
		ChunkSize:  be.Uint32(b[12:]),
		ClusterID:  getID(b[16:]),
		DeviceID:   getID(b[48:]),
		SDSID:      getID(b[80:]),
		DataOffset: be.Uint64(b[112:]),
		Slots:      be.Uint64(b[120:]),
		Created:    time.Unix(0, int64(be.Uint64(b[128:]))),
	}, nil
}

// CheckStablePath refuses device names that move between boots (the
// ScaleIO lesson: /dev/sdX names changed and forced hours of rebalance).
// The SDS checks again what the gateway checked: it may be asked directly.
func CheckStablePath(path string, force bool) error { return model.CheckDevicePath(path, force) }

// device is one open data device.
type device struct {
	id   string
	path string
	f    *os.File
	// rc reads chunk data through the page cache (the read cache), when
	// enabled and f is O_DIRECT; nil otherwise.
	rc *os.File
	// cached is the descriptor that reads through the page cache (rc, or
	// f when f is not O_DIRECT; nil when every read goes to the device),
	// for reads that must not wait (readCachedAt's nowait); noNowait is
	// set once the kernel refused RWF_NOWAIT on it.
	cached   syscall.RawConn
	noNowait atomic.Bool
	align    int64 // I/O alignment the file accepts (512 or 4096)
	block    bool  // a block device (else a regular file)
	super    *superblock
	dirty    atomic.Bool // written since the last sync
	// failed is set at the first I/O error: the device takes no more I/O
	// and its copies are rebuilt elsewhere.
	failed atomic.Bool
	// io counts the I/O served from this device (primary and mirror).
	io iostats.Counters
	// fault injection (tests): I/O fails while <path>.fail exists.
	injectAt   atomic.Int64
	injectFail atomic.Bool
}

// foreignSignature reports a recognisable filesystem or partition table.
func foreignSignature(b []byte) string {
	switch {
	case len(b) >= 1082 && b[1080] == 0x53 && b[1081] == 0xEF:
		return "an ext2/3/4 filesystem"
	case bytes.HasPrefix(b, []byte("XFSB")):
		return "an XFS filesystem"
	case len(b) >= 520 && string(b[512:520]) == "EFI PART":
		return "a GPT partition table"
	case len(b) >= 520 && string(b[512:520]) == "LABELONE":
		return "an LVM physical volume"
	case len(b) >= 65600 && string(b[65600:65608]) == "_BHRfS_M":
		return "a btrfs filesystem"
	case len(b) >= 512 && b[510] == 0x55 && b[511] == 0xAA && !blockdev.AllZero(b[446:510]):
		return "an MBR partition table"
	}
	return ""
}

// openDevice opens path for exclusive use with O_DIRECT where the file
// allows it. For block devices O_EXCL makes the kernel refuse a device that
// is mounted or held by another user; for files an exclusive flock does.
// With readCache, chunk reads go through a second, buffered, read-only
// descriptor (see readCachedAt).
func openDevice(path string, readCache bool) (*device, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("device %s: %w", path, err)
	}
	block := st.Mode()&os.ModeDevice != 0
	if !block && !st.Mode().IsRegular() {
		return nil, fmt.Errorf("device %s is neither a block device nor a regular file", path)
	}
	flags := os.O_RDWR | unix.O_CLOEXEC
	if block {
		flags |= unix.O_EXCL
	}
	direct := true
	f, err := os.OpenFile(path, flags|unix.O_DIRECT, 0)
	if err != nil && errors.Is(err, unix.EINVAL) {
		direct = false // e.g. tmpfs: no O_DIRECT
		f, err = os.OpenFile(path, flags, 0)
	}
	if err != nil {
		if errors.Is(err, unix.EBUSY) {
			return nil, deviceTaken("device %s is in use (mounted, part of RAID/LVM, or held by another program): free it first", path)
		}
		return nil, fmt.Errorf("open device %s: %w", path, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		return nil, deviceTaken("device %s is in use by another process (locked): stop it, or choose another device", path)
	}
	d := &device{path: path, f: f, block: block, align: 1}
	if direct {
		d.align = 512
		probe := bufpool.Aligned(4096)
		if _, err := f.ReadAt(probe[:512], 512); err != nil && errors.Is(err, unix.EINVAL) {
			d.align = 4096
		}
		if readCache {
			// No O_EXCL: this process already holds the device.
			if d.rc, err = os.OpenFile(path, os.O_RDONLY|unix.O_CLOEXEC, 0); err != nil {
				f.Close()
				return nil, fmt.Errorf("open device %s for the read cache: %w", path, err)
			}
			// Chunk reads are random: without this, every miss would read
			// ahead (128 KiB or more for a 4 KiB read).
			_ = unix.Fadvise(int(d.rc.Fd()), 0, 0, unix.FADV_RANDOM)
			d.cached, _ = d.rc.SyscallConn()
		}
	} else {
		d.cached, _ = f.SyscallConn()
	}
	return d, nil
}

func (d *device) size() (int64, error) {
	if d.block {
		// The end of a block device is its size (BLKGETSIZE64 in effect).
		return d.f.Seek(0, 2)
	}
	st, err := d.f.Stat()
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}

func (d *device) readSuper() (*superblock, []byte, error) {
	b := bufpool.Aligned(128 << 10)
	n, err := d.f.ReadAt(b, 0)
	if err != nil && n < superSize {
		return nil, nil, fmt.Errorf("read superblock of %s: %w", d.path, err)
	}
	s, err := decodeSuperblock(b)
	return s, b[:n], err
}

func (d *device) slotOffset(slot uint64) int64 {
	return int64(d.super.DataOffset) + int64(slot)*model.ChunkSize
}

// faultInjection enables the test hook: CAIRN_FAULT_INJECTION=1.
var faultInjection = os.Getenv("CAIRN_FAULT_INJECTION") == "1"

// errInjected is the I/O error of the fault-injection hook.
var errInjected = fmt.Errorf("injected fault: %w", unix.EIO)

// injected reports whether the fault-injection file exists (checked at
// most every 200 ms, so the hook costs nothing on the data path).
func (d *device) injected() bool {
	if !faultInjection {
		return false
	}
	now := time.Now().UnixNano()
	if last := d.injectAt.Load(); now-last > int64(200*time.Millisecond) && d.injectAt.CompareAndSwap(last, now) {
		_, err := os.Stat(d.path + ".fail")
		d.injectFail.Store(err == nil)
	}
	return d.injectFail.Load()
}

// readAt reads len(p) bytes at device offset off, handling alignment.
func (d *device) readAt(p []byte, off int64) error {
	if d.injected() {
		return errInjected
	}
	if d.aligned(p, off) {
		_, err := d.f.ReadAt(p, off)
		return err
	}
	start := off &^ (d.align - 1)
	end := (off + int64(len(p)) + d.align - 1) &^ (d.align - 1)
	b := bufpool.Get(int(end - start))
	defer bufpool.Put(b)
	if _, err := d.f.ReadAt(b, start); err != nil {
		return err
	}
	copy(p, b[off-start:])
	return nil
}

// readCachedAt reads chunk data through the page cache when the read cache
// is on, else as readAt. Coherence: direct writes, hole punching and
// zeroing invalidate the cached pages they cover, and every chunk read or
// write holds its range lock rounded to 4 KiB (whole pages, as slots start
// on page boundaries), so no read can refill a page with old data while a
// write to it is in progress.
//
// With nowait it never waits for the device: when the page cache does not
// hold all of the range (or nothing reads through it) it returns
// errWouldBlock, and the caller reads again where waiting holds nothing up.
func (d *device) readCachedAt(p []byte, off int64, nowait bool) error {
	if d.injected() {
		return errInjected
	}
	if nowait {
		if d.cached == nil {
			return errWouldBlock
		}
		if !d.noNowait.Load() {
			n, err := preadNowait(d.cached, p, off)
			switch {
			case err == nil && n == len(p):
				return nil
			case err == nil || errors.Is(err, unix.EAGAIN):
				return errWouldBlock // a short read: the rest is not cached
			case errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS):
				// This kernel or file system cannot say: read and wait,
				// as before there was a choice.
				d.noNowait.Store(true)
			default:
				return err
			}
		}
	}
	if d.rc == nil {
		return d.readAt(p, off)
	}
	_, err := d.rc.ReadAt(p, off)
	return err
}

// errWouldBlock: a read that may not wait (readCachedAt's nowait) would
// have waited for the device. Not a device error.
var errWouldBlock = errors.New("read would wait for the device")

// preadNowait is preadv2(RWF_NOWAIT) of p at off: it copies what the page
// cache holds and fails with EAGAIN rather than start device I/O. The fd
// stays valid while it runs (RawConn.Control); the closure and its results
// escape to the heap (three small allocations per read, go build -gcflags=-m).
func preadNowait(rc syscall.RawConn, p []byte, off int64) (n int, err error) {
	if len(p) == 0 {
		return 0, nil
	}
	cerr := rc.Control(func(fd uintptr) {
		iov := unix.Iovec{Base: &p[0]}
		iov.SetLen(len(p))
		for {
			r, _, e := unix.Syscall6(unix.SYS_PREADV2, fd, uintptr(unsafe.Pointer(&iov)), 1, uintptr(off), 0, unix.RWF_NOWAIT)
			if e == unix.EINTR {
				continue
			}
			n = int(r)
			if e != 0 {
				n, err = 0, e
			}
			return
		}
	})
	if cerr != nil {
		return 0, cerr
	}
	return n, err
}

// writeAt writes p at device offset off; unaligned writes read-modify-write
// the enclosing aligned range (the caller holds that range's lock).
func (d *device) writeAt(p []byte, off int64) error {
	if d.injected() {
		return errInjected
	}
	d.dirty.Store(true)
	if d.aligned(p, off) {
		_, err := d.f.WriteAt(p, off)
		return err
	}
	start := off &^ (d.align - 1)
	end := (off + int64(len(p)) + d.align - 1) &^ (d.align - 1)
	b := bufpool.Get(int(end - start))
	defer bufpool.Put(b)
	if start != off || end != off+int64(len(p)) {
		if _, err := d.f.ReadAt(b, start); err != nil {
			return err
		}
	}
	copy(b[off-start:], p)
	_, err := d.f.WriteAt(b, start)
	return err
}

func (d *device) aligned(p []byte, off int64) bool {
	return d.align <= 1 || (off%d.align == 0 && int64(len(p))%d.align == 0 && bufpool.IsAligned(p))
}

// zero makes [off, off+n) read as zeros, releasing the space where the
// device can (hole punching on files, zeroing discard on block devices).
func (d *device) zero(off, n int64) error {
	if d.injected() {
		return errInjected
	}
	d.dirty.Store(true)
	fd := int(d.f.Fd())
	if off%d.alignOr512() == 0 && n%d.alignOr512() == 0 {
		if err := unix.Fallocate(fd, unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, off, n); err == nil {
			return nil
		}
		if err := unix.Fallocate(fd, unix.FALLOC_FL_ZERO_RANGE|unix.FALLOC_FL_KEEP_SIZE, off, n); err == nil {
			return nil
		}
	}
	const step = 1 << 20
	z := bufpool.Get(step)
	defer bufpool.Put(z)
	clear(z)
	for n > 0 {
		k := min(n, step)
		if err := d.writeAt(z[:k], off); err != nil {
			return err
		}
		off, n = off+k, n-k
	}
	return nil
}

func (d *device) alignOr512() int64 { return max(d.align, 512) }

// sync makes completed writes durable (fdatasync).
func (d *device) sync() error {
	if !d.dirty.Swap(false) {
		return nil
	}
	if err := unix.Fdatasync(int(d.f.Fd())); err != nil {
		d.dirty.Store(true)
		return err
	}
	return nil
}

func (d *device) close() error {
	if d.rc != nil {
		d.rc.Close()
	}
	return d.f.Close()
}
