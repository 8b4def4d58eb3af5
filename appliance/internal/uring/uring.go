//go:build linux

// Package uring does positioned reads and writes of a file through a Linux
// io_uring, so that a goroutine waiting for a device does not hold an OS
// thread asleep in pread/pwrite (issue 18: each O_DIRECT write put its thread
// to sleep and woke it again, two context switches per device write).
//
// The submitting goroutine fills one submission entry and enters the kernel
// once to submit it (no wait). Completions are signalled on an eventfd that
// Go's network poller watches; one reaper goroutine per ring drains the
// completion queue and hands each result to its waiter. Nothing blocks a
// thread: a waiter parks like any goroutine waiting on a socket.
//
// Only what the SDS needs is here: IORING_OP_READ and IORING_OP_WRITE on one
// file (Linux 5.6 and later). New returns an error where io_uring is missing
// or disabled (kernel.io_uring_disabled, seccomp): the caller then keeps its
// plain pread/pwrite.
package uring

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Kernel ABI (include/uapi/linux/io_uring.h).
const (
	sysSetup    = 425
	sysEnter    = 426
	sysRegister = 427

	offSQRing = 0
	offCQRing = 0x8000000
	offSQEs   = 0x10000000

	featSingleMmap = 1 << 0
	setupClamp     = 1 << 4
	setupCoopTask  = 1 << 8 // no IPI to a running submitter: it runs completions at its next kernel entry

	enterGetEvents = 1 << 0

	registerEventfd = 4

	opRead  = 22
	opWrite = 23
)

type sqOffsets struct {
	head, tail, ringMask, ringEntries, flags, dropped, array, resv1 uint32
	userAddr                                                        uint64
}

type cqOffsets struct {
	head, tail, ringMask, ringEntries, overflow, cqes, flags, resv1 uint32
	userAddr                                                        uint64
}

type params struct {
	sqEntries, cqEntries, flags, sqThreadCPU, sqThreadIdle, features, wqFd uint32
	resv                                                                   [3]uint32
	sqOff                                                                  sqOffsets
	cqOff                                                                  cqOffsets
}

type sqe struct {
	opcode      uint8
	flags       uint8
	ioprio      uint16
	fd          int32
	off         uint64
	addr        uint64
	len         uint32
	rwFlags     uint32
	userData    uint64
	bufIndex    uint16
	personality uint16
	spliceFdIn  int32
	addr3       uint64
	pad         uint64
}

type cqe struct {
	userData uint64
	res      int32
	flags    uint32
}

func init() {
	// The layouts must match the kernel's exactly.
	if unsafe.Sizeof(params{}) != 120 || unsafe.Sizeof(sqe{}) != 64 || unsafe.Sizeof(cqe{}) != 16 {
		panic("uring: ABI struct sizes do not match the kernel's")
	}
}

// ErrClosed is returned for I/O on a closed ring.
var ErrClosed = errors.New("uring: ring closed")

// Ring is one io_uring serving positioned I/O on one file. Safe for
// concurrent use; at most Depth I/Os are in the kernel at once (more wait
// for a slot).
type Ring struct {
	fd     int
	fileFd int32    // the file the I/O is on (kept open by its owner)
	efd    *os.File // eventfd: completions are signalled here

	sqMem, cqMem, sqeMem []byte
	sqHead, sqTail       *uint32
	sqMask               uint32
	sqArray              []uint32
	sqes                 []sqe
	cqHead, cqTail       *uint32
	cqMask               uint32
	cqes                 []cqe

	mu      sync.Mutex // submission side
	slots   chan uint32
	waiters []chan int32
	closed  atomic.Bool
	reaped  chan struct{}
}

// Depth is the number of I/Os one ring keeps in the kernel at once.
const Depth = 128

// New sets up a ring for I/O on f. f stays owned by the caller and must
// outlive the ring.
func New(f *os.File) (*Ring, error) {
	var p params
	p.flags = setupClamp | setupCoopTask
	fd, _, errno := unix.Syscall(sysSetup, Depth, uintptr(unsafe.Pointer(&p)), 0)
	if errno == unix.EINVAL {
		// An older kernel without COOP_TASKRUN (5.19).
		p = params{flags: setupClamp}
		fd, _, errno = unix.Syscall(sysSetup, Depth, uintptr(unsafe.Pointer(&p)), 0)
	}
	if errno != 0 {
		return nil, fmt.Errorf("io_uring_setup: %w", errno)
	}
	r := &Ring{fd: int(fd), fileFd: int32(f.Fd())}
	if err := r.mapRings(&p); err != nil {
		r.unmap()
		unix.Close(r.fd)
		return nil, err
	}
	efd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		r.unmap()
		unix.Close(r.fd)
		return nil, fmt.Errorf("eventfd: %w", err)
	}
	e := int32(efd)
	if _, _, errno := unix.Syscall6(sysRegister, uintptr(r.fd), registerEventfd, uintptr(unsafe.Pointer(&e)), 1, 0, 0); errno != 0 {
		unix.Close(efd)
		r.unmap()
		unix.Close(r.fd)
		return nil, fmt.Errorf("io_uring_register(eventfd): %w", errno)
	}
	r.efd = os.NewFile(uintptr(efd), "uring-eventfd") // non-blocking: Go's poller watches it
	n := min(p.sqEntries, p.cqEntries)
	r.slots = make(chan uint32, n)
	r.waiters = make([]chan int32, n)
	for i := range n {
		r.slots <- i
		r.waiters[i] = make(chan int32, 1)
	}
	r.reaped = make(chan struct{})
	go r.reap()
	return r, nil
}

func (r *Ring) mapRings(p *params) error {
	if p.features&featSingleMmap == 0 {
		return errors.New("io_uring: kernel without IORING_FEAT_SINGLE_MMAP (Linux 5.4 or later needed)")
	}
	sqSize := int(p.sqOff.array + p.sqEntries*4)
	cqSize := int(p.cqOff.cqes + p.cqEntries*uint32(unsafe.Sizeof(cqe{})))
	size := max(sqSize, cqSize)
	var err error
	if r.sqMem, err = unix.Mmap(r.fd, offSQRing, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE); err != nil {
		return fmt.Errorf("mmap io_uring rings: %w", err)
	}
	r.cqMem = r.sqMem
	if r.sqeMem, err = unix.Mmap(r.fd, offSQEs, int(p.sqEntries)*int(unsafe.Sizeof(sqe{})), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE); err != nil {
		return fmt.Errorf("mmap io_uring entries: %w", err)
	}
	at := func(mem []byte, off uint32) unsafe.Pointer { return unsafe.Pointer(&mem[off]) }
	r.sqHead = (*uint32)(at(r.sqMem, p.sqOff.head))
	r.sqTail = (*uint32)(at(r.sqMem, p.sqOff.tail))
	r.sqMask = *(*uint32)(at(r.sqMem, p.sqOff.ringMask))
	r.sqArray = unsafe.Slice((*uint32)(at(r.sqMem, p.sqOff.array)), p.sqEntries)
	r.sqes = unsafe.Slice((*sqe)(unsafe.Pointer(&r.sqeMem[0])), p.sqEntries)
	r.cqHead = (*uint32)(at(r.cqMem, p.cqOff.head))
	r.cqTail = (*uint32)(at(r.cqMem, p.cqOff.tail))
	r.cqMask = *(*uint32)(at(r.cqMem, p.cqOff.ringMask))
	r.cqes = unsafe.Slice((*cqe)(at(r.cqMem, p.cqOff.cqes)), p.cqEntries)
	return nil
}

func (r *Ring) unmap() {
	if r.sqeMem != nil {
		unix.Munmap(r.sqeMem)
	}
	if r.sqMem != nil {
		unix.Munmap(r.sqMem)
	}
}

// reap drains the completion queue each time the eventfd fires.
func (r *Ring) reap() {
	defer close(r.reaped)
	var b [8]byte
	for {
		if _, err := r.efd.Read(b[:]); err != nil {
			return // closed
		}
		head := atomic.LoadUint32(r.cqHead)
		for {
			tail := atomic.LoadUint32(r.cqTail)
			if head == tail {
				break
			}
			for ; head != tail; head++ {
				c := r.cqes[head&r.cqMask]
				r.waiters[c.userData] <- c.res
			}
			atomic.StoreUint32(r.cqHead, head)
		}
	}
}

// ReadAt reads len(b) bytes at off, as (*os.File).ReadAt.
func (r *Ring) ReadAt(b []byte, off int64) (int, error) {
	n := 0
	for n < len(b) {
		k, err := r.do(opRead, b[n:], off+int64(n))
		if err != nil {
			return n, err
		}
		if k == 0 {
			return n, io.EOF
		}
		n += k
	}
	return n, nil
}

// WriteAt writes b at off, as (*os.File).WriteAt.
func (r *Ring) WriteAt(b []byte, off int64) (int, error) {
	n := 0
	for n < len(b) {
		k, err := r.do(opWrite, b[n:], off+int64(n))
		if err != nil {
			return n, err
		}
		if k == 0 {
			return n, io.ErrShortWrite
		}
		n += k
	}
	return n, nil
}

func (r *Ring) do(op uint8, b []byte, off int64) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	slot, ok := <-r.slots
	if !ok {
		return 0, ErrClosed
	}
	// The kernel reads or fills b after this call returns to Go code: pin
	// it, so that it neither moves nor is freed before the completion.
	var pin runtime.Pinner
	pin.Pin(&b[0])
	r.mu.Lock()
	if r.closed.Load() {
		r.mu.Unlock()
		pin.Unpin()
		r.slots <- slot
		return 0, ErrClosed
	}
	tail := *r.sqTail
	i := tail & r.sqMask
	r.sqes[i] = sqe{
		opcode:   op,
		fd:       r.fileFd,
		off:      uint64(off),
		addr:     uint64(uintptr(unsafe.Pointer(&b[0]))),
		len:      uint32(len(b)),
		userData: uint64(slot),
	}
	r.sqArray[i] = i
	atomic.StoreUint32(r.sqTail, tail+1)
	var errno unix.Errno
	for {
		_, _, errno = unix.Syscall6(sysEnter, uintptr(r.fd), 1, 0, 0, 0, 0)
		if errno != unix.EINTR {
			break
		}
	}
	if errno != 0 && atomic.LoadUint32(r.sqHead) == tail {
		// Not consumed by the kernel: take the entry back.
		atomic.StoreUint32(r.sqTail, tail)
		r.mu.Unlock()
		pin.Unpin()
		r.slots <- slot
		return 0, fmt.Errorf("io_uring_enter: %w", errno)
	}
	r.mu.Unlock()
	res := <-r.waiters[slot]
	pin.Unpin()
	r.slots <- slot
	if res < 0 {
		return 0, unix.Errno(-res)
	}
	return int(res), nil
}

// Close waits for the I/O in flight and releases the ring (not the file).
func (r *Ring) Close() error {
	r.mu.Lock()
	if r.closed.Swap(true) {
		r.mu.Unlock()
		return nil
	}
	r.mu.Unlock()
	// Every slot back means no I/O is in the kernel.
	for range cap(r.slots) {
		<-r.slots
	}
	close(r.slots)
	r.efd.Close()
	<-r.reaped
	r.unmap()
	return unix.Close(r.fd)
}
