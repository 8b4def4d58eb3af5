// Package blockdev defines the volume interface that every frontend (NBD,
// SCSI/TCMU) serves and that the client library implements: a block device
// with the storage primitives Cairn executes in the data plane.
package blockdev

import (
	"context"
	"errors"
	"fmt"
)

// SectorSize is the unit of every offset and length a frontend passes down:
// volumes are addressed in 512-byte sectors (VMFS and Linux both speak it).
const SectorSize = 512

// Sentinel errors callers branch on.
var (
	// ErrOutOfRange: the request reaches beyond the end of the volume.
	ErrOutOfRange = errors.New("request beyond end of volume")
	// ErrUnaligned: offset or length is not a multiple of SectorSize.
	ErrUnaligned = errors.New("offset or length not a multiple of 512")
	// ErrReadOnly: the volume or mapping is read-only.
	ErrReadOnly = errors.New("volume is read-only")
	// ErrIO: the data could not be read or written (no copy reachable).
	ErrIO = errors.New("i/o error")
	// ErrUnavailable: the cluster cannot serve this now (no quorum, no map);
	// the caller may retry later.
	ErrUnavailable = errors.New("volume temporarily unavailable")
)

// MiscompareError is returned by CompareAndWrite when the data on the volume
// differs from the compare buffer. It is a normal answer, not a failure:
// callers must not log it as an error.
type MiscompareError struct {
	// Offset is the byte offset, relative to the start of the compare
	// buffer, of the first byte that differs.
	Offset int64
}

func (e *MiscompareError) Error() string {
	return fmt.Sprintf("miscompare at byte %d", e.Offset)
}

// WriteFlags modify a write.
type WriteFlags uint32

const (
	// FUA: complete only once the data is on stable storage on every copy.
	FUA WriteFlags = 1 << iota
)

// Extent describes the provisioning state of a byte range.
type Extent struct {
	Offset, Length int64
	Mapped         bool // false: deallocated, reads return zeros
}

// Volume is a Cairn volume as the frontends see it. All offsets and lengths
// are in bytes and must be multiples of SectorSize. Implementations are safe
// for concurrent use; concurrent overlapping writes are applied in some
// order, identically on every copy.
type Volume interface {
	// Name is the volume's name; ID its cluster-wide numeric id.
	Name() string
	ID() uint64
	// Size is the volume's size in bytes.
	Size() int64
	// WWN is the 16-byte NAA IEEE registered extended identifier (type 6),
	// the same on every SVM that exports the volume.
	WWN() [16]byte
	// Serial is the unit serial number (VPD 0x80), the same everywhere.
	Serial() string

	ReadAt(ctx context.Context, p []byte, off int64) error
	WriteAt(ctx context.Context, p []byte, off int64, flags WriteFlags) error
	// Flush makes every completed write durable on every copy.
	Flush(ctx context.Context) error
	// CompareAndWrite atomically compares len(cmp) bytes at off with cmp
	// and, if equal, writes data (same length) there. A difference returns
	// *MiscompareError and writes nothing.
	CompareAndWrite(ctx context.Context, cmp, data []byte, off int64, flags WriteFlags) error
	// WriteZeroes makes [off, off+length) read as zeros; with unmap true
	// (or on a thin volume) whole deallocatable chunks are deallocated.
	WriteZeroes(ctx context.Context, off, length int64, unmap bool) error
	// WriteSame writes the one block pattern (len(pattern) bytes, a multiple
	// of SectorSize) repeatedly over [off, off+length). The expansion
	// happens at the data server, not on the wire.
	WriteSame(ctx context.Context, pattern []byte, off, length int64) error
	// Unmap deallocates [off, off+length); it reads back as zeros.
	Unmap(ctx context.Context, off, length int64) error
	// CopyFrom copies length bytes from src at srcOff to this volume at
	// dstOff, server side (data does not pass through the caller). src may
	// be this volume.
	CopyFrom(ctx context.Context, src Volume, srcOff, dstOff, length int64) error
	// Extents reports provisioning for [off, off+length), in order.
	Extents(ctx context.Context, off, length int64) ([]Extent, error)
}
