package sds

import (
	"fmt"
	"io"
	"os"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// rawIOMax is the largest aligned device read or write made with a raw
// system call (see rawPIO); larger ones go through os.File.
//
// Why: an O_DIRECT 4 KiB pwrite takes about 50 µs on the machines we
// measure on, longer than the 20 µs after which Go's sysmon takes the P
// from a goroutine in a system call and wakes another thread to run it
// (docs/benchmarks.md, "Where the time goes": a futex wake and a
// nanosleep per device I/O). A raw call keeps its P for those 50 µs and
// wakes nobody; the other Ps run everything else. Large transfers (a
// rebuild's 1 MiB) still release their P.
const rawIOMax = 64 << 10

// rawPIO makes one pread64 or pwrite64 of p at off on f with
// unix.RawSyscall6, retrying EINTR and short transfers. Through
// RawConn.Control, so the descriptor cannot be closed (and reused) during
// the call.
func rawPIO(c syscall.RawConn, write bool, p []byte, off int64) error {
	trap := uintptr(unix.SYS_PREAD64)
	if write {
		trap = unix.SYS_PWRITE64
	}
	var err error
	cerr := c.Control(func(fd uintptr) {
		for len(p) > 0 {
			n, _, e := unix.RawSyscall6(trap, fd, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)), uintptr(off), 0, 0)
			switch {
			case e == unix.EINTR:
				continue
			case e != 0:
				err = e
				return
			case n == 0:
				if write {
					err = io.ErrShortWrite
				} else {
					err = io.ErrUnexpectedEOF
				}
				return
			}
			p, off = p[n:], off+int64(n)
		}
	})
	if cerr != nil {
		return cerr
	}
	return err
}

// rawConn gives f's RawConn for rawPIO, or nil (then os.File is used).
func rawConn(f *os.File) syscall.RawConn {
	c, err := f.SyscallConn()
	if err != nil {
		return nil
	}
	return c
}

// pio reads or writes p at off on f, raw for small transfers.
func pio(f *os.File, c syscall.RawConn, write bool, p []byte, off int64) error {
	if c != nil && len(p) <= rawIOMax && len(p) > 0 {
		if err := rawPIO(c, write, p, off); err != nil {
			op := "read"
			if write {
				op = "write"
			}
			return &os.PathError{Op: op, Path: f.Name(), Err: fmt.Errorf("at %d: %w", off, err)}
		}
		return nil
	}
	var err error
	if write {
		_, err = f.WriteAt(p, off)
	} else {
		_, err = f.ReadAt(p, off)
	}
	return err
}
