// Package scsi emulates an SPC-4/SBC-3 direct-access logical unit over a
// blockdev.Volume: it parses CDBs, runs them against the volume and builds
// status, sense data and data-in. It does no I/O of its own, so transports
// (the TCMU handler) call it and tests and fuzzers drive it directly.
package scsi

import (
	"context"
	"encoding/binary"
	"errors"
	"log/slog"
	"math/bits"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/cairn-storage/cairn/appliance/internal/blockdev"
)

// BlockSize is the logical block length every Cairn LUN reports.
const BlockSize = blockdev.SectorSize

// Geometry and limits the LUN advertises (INQUIRY VPD B0h/B2h, READ
// CAPACITY(16), RECEIVE COPY RESULTS). They describe the data plane: a
// volume is cut into 1 MiB chunks, the unit of allocation, deallocation
// and of COMPARE AND WRITE atomicity.
const (
	// defaultPhysicalExp: 2^3 logical blocks per physical block, so
	// initiators align I/O to 4 KiB (512e).
	defaultPhysicalExp = 3
	// chunkBlocks is the 1 MiB chunk in blocks: the unmap granularity and
	// the optimal transfer length.
	chunkBlocks = 1 << 20 / BlockSize
	// defaultMaxTransfer is MAXIMUM TRANSFER LENGTH when Options leaves it
	// zero: one chunk.
	defaultMaxTransfer = chunkBlocks
	// maxCompareAndWrite is MAXIMUM COMPARE AND WRITE LENGTH. One block:
	// atomicity lives at the primary of one chunk, a single block never
	// spans two chunks, and ESXi's ATS uses exactly one block.
	maxCompareAndWrite = 1
	// maxWriteSame is MAXIMUM WRITE SAME LENGTH (16 MiB, 16 chunks): large
	// enough for ESXi's eager zeroing, small enough to finish well within
	// an initiator's command timeout.
	maxWriteSame = 16 * chunkBlocks
	// maxUnmapBlocks and maxUnmapDescriptors bound one UNMAP command.
	maxUnmapBlocks      = 1 << 20
	maxUnmapDescriptors = 256
	// getLBAStatusWindow bounds how much of the volume one GET LBA STATUS
	// inspects (64 chunks: 64 small data-path requests, run in parallel);
	// the initiator continues from the last descriptor (SBC-3 allows an
	// answer that stops short of the end).
	getLBAStatusWindow = 64 * chunkBlocks
)

// Options configure a LUN. The identity fields (strings, TargetPortGroup)
// must be the same on every SVM exporting the volume.
type Options struct {
	VendorID, ProductID, Revision string // INQUIRY strings ("CAIRN", "Cairn volume", version)
	TargetPortGroup               uint16 // the same on every SVM; all ports active/optimized
	RelativeTargetPort            uint16 // this SVM's port number (differs per SVM)
	ReadOnly                      bool
	// Resolve finds another Cairn volume by its NAA WWN for EXTENDED COPY
	// across volumes. Nil: only copies within this LUN's volume.
	Resolve func(wwn [16]byte) (blockdev.Volume, bool)
	Logger  *slog.Logger

	// Optional fields (zero values are the defaults).

	// MaxTransferLength is the largest READ/WRITE/VERIFY in blocks; it
	// must fit the transport's data area. 0: 2048 blocks (1 MiB).
	MaxTransferLength uint32
	// PhysicalBlockSize is the physical block size reported (READ
	// CAPACITY(16) LBPPBE, optimal transfer length granularity): a power of
	// two from 512 to 1 MiB. 0: 4096. (512 reports one logical block per
	// physical block, as LIO's fileio backstore does; libiscsi 1.19's
	// GetLBAStatus.UnmapSingle only passes then, see the package tests.)
	PhysicalBlockSize uint32
	// GroupPorts lists the relative target port identifiers of every SVM
	// in TargetPortGroup, for REPORT TARGET PORT GROUPS. It must be the
	// same list on every SVM (it is sorted here); nil reports the group
	// with no port list, which is also identical everywhere.
	GroupPorts []uint16
	// GroupPortsNow, when set, replaces GroupPorts: it is asked at every REPORT
	// TARGET PORT GROUPS, so the answer follows the system as SVMs join and leave
	// (cairn target takes it from the model). It must be safe for concurrent use.
	GroupPortsNow func() []uint16
}

// LUN is one logical unit backed by a volume. Execute may be called from
// many goroutines at once.
type LUN struct {
	vol blockdev.Volume
	// async is vol when it starts I/O without a goroutine (the client
	// library), else nil; asserted once here, not per command.
	async blockdev.AsyncVolume
	opts  Options
	log   *slog.Logger

	maxTransfer uint32
	physExp     byte // log2(logical blocks per physical block)
	groupPorts  []uint16

	mu     sync.Mutex  // guards copies
	copies copyResults // held data for RECEIVE COPY RESULTS

	// transitioning is set when a medium-access command was answered
	// NOT READY, ASYMMETRIC ACCESS STATE TRANSITION (the cluster could not
	// serve the volume) and cleared by the next one that succeeds; REPORT
	// TARGET PORT GROUPS reports the group's state from it (see alua.go).
	transitioning atomic.Bool
}

// NewLUN returns a LUN serving vol.
func NewLUN(vol blockdev.Volume, opts Options) *LUN {
	l := &LUN{vol: vol, opts: opts, log: opts.Logger, maxTransfer: opts.MaxTransferLength}
	if l.log == nil {
		l.log = slog.New(slog.DiscardHandler)
	}
	l.log = l.log.With("volume", vol.Name())
	if l.maxTransfer == 0 {
		l.maxTransfer = defaultMaxTransfer
	}
	l.physExp = defaultPhysicalExp
	if p := opts.PhysicalBlockSize; p >= BlockSize && p <= 1<<20 && p&(p-1) == 0 {
		l.physExp = byte(bits.TrailingZeros32(p / BlockSize))
	}
	l.groupPorts = sortedUnique(opts.GroupPorts)
	l.async, _ = vol.(blockdev.AsyncVolume)
	return l
}

// Response is the outcome of one command.
type Response struct {
	Status byte   // SCSI status: StatusGood or StatusCheckCondition
	Sense  []byte // fixed-format sense data with CHECK CONDITION
	// DataInLen is how many bytes of dataIn hold data for the initiator;
	// the transport reports the rest of its buffer as residual.
	DataInLen int
}

// request is one command being executed.
type request struct {
	cdb     []byte
	dataOut []byte // what the initiator sent; may be shorter than the CDB says
	dataIn  []byte // room for data to the initiator
}

// reply copies data into the data-in buffer, truncated to the CDB's
// allocation length and to the buffer, and returns the length copied.
func (r *request) reply(data []byte, alloc uint32) int {
	n := min(uint64(len(data)), uint64(alloc), uint64(len(r.dataIn)))
	return copy(r.dataIn[:n], data)
}

// Execute runs one command. dataOut holds the data the initiator sent (may
// be nil); dataIn is the buffer for data to the initiator (its length is
// what the transport can take). Neither slice is kept.
func (l *LUN) Execute(ctx context.Context, cdb []byte, dataOut, dataIn []byte) Response {
	n, cc := l.execute(ctx, &request{cdb: cdb, dataOut: dataOut, dataIn: dataIn})
	if cc != nil {
		return Response{Status: StatusCheckCondition, Sense: cc.sense()}
	}
	return Response{Status: StatusGood, DataInLen: n}
}

func (l *LUN) execute(ctx context.Context, r *request) (int, *checkCondition) {
	if len(r.cdb) == 0 {
		return 0, newCC(keyIllegalRequest, ascInvalidOpcode).fieldPointer(true, 0, -1)
	}
	cmd, cc := lookup(r.cdb)
	if cc != nil {
		return 0, cc
	}
	if len(r.cdb) < len(cmd.usage) {
		// The transport hands over whole CDBs; a short one is malformed.
		return 0, invalidCDB(len(r.cdb), -1)
	}
	// Every bit the device server does not evaluate must be zero
	// (reserved fields, protection information, NACA): the same mask is
	// what REPORT SUPPORTED OPERATION CODES returns as CDB usage data.
	for i := 1; i < len(cmd.usage); i++ {
		if bad := r.cdb[i] &^ cmd.usage[i]; bad != 0 {
			return 0, invalidCDB(i, highBit(bad))
		}
	}
	n, cc := cmd.run(l, ctx, r)
	if cc == nil && cmd.medium {
		l.served()
	}
	return n, cc
}

// numBlocks is the volume's capacity in logical blocks.
func (l *LUN) numBlocks() uint64 {
	s := l.vol.Size()
	if s <= 0 {
		return 0
	}
	return uint64(s) / BlockSize
}

// checkRange validates [lba, lba+n) against the capacity. An LBA equal to
// the capacity with no blocks is allowed, as SBC-3 words it.
func (l *LUN) checkRange(lba, n uint64) *checkCondition {
	nb := l.numBlocks()
	if lba > nb || n > nb-lba {
		return lbaOutOfRange()
	}
	return nil
}

// checkWritable refuses writes to a read-only mapping.
func (l *LUN) checkWritable() *checkCondition {
	if l.opts.ReadOnly {
		return writeProtected()
	}
	return nil
}

// ioKind says what a failed volume call was doing, to choose the sense.
type ioKind int

const (
	ioRead ioKind = iota
	ioWrite
	ioOther
)

// volumeError maps an error from the volume to sense data. A miscompare is
// handled by the callers; everything here is a failure of some kind.
func (l *LUN) volumeError(ctx context.Context, what string, kind ioKind, err error) *checkCondition {
	switch {
	case errors.Is(err, blockdev.ErrUnavailable):
		// NOT READY with an ALUA transition makes ESXi and Linux retry
		// (possibly on another path) instead of failing the I/O; the group
		// is reported transitioning until the volume serves again.
		l.log.DebugContext(ctx, "scsi: volume unavailable", "op", what, "err", err)
		return l.enterTransition()
	case errors.Is(err, blockdev.ErrReadOnly):
		return writeProtected()
	case errors.Is(err, blockdev.ErrOutOfRange):
		return lbaOutOfRange()
	case errors.Is(err, blockdev.ErrIO):
		l.log.WarnContext(ctx, "scsi: i/o error reported to the initiator as a medium error", "op", what, "err", err)
		if kind == ioRead {
			return newCC(keyMediumError, ascUnrecoveredReadError)
		}
		return newCC(keyMediumError, ascWriteError)
	case errors.Is(err, context.DeadlineExceeded):
		return newCC(keyAbortedCommand, ascCommunicationTimeout)
	case errors.Is(err, context.Canceled):
		return newCC(keyAbortedCommand, ascNoAdditionalSense)
	}
	l.log.ErrorContext(ctx, "scsi: unexpected volume error, reported as internal target failure; check the client library and the cluster's health",
		"op", what, "err", err)
	return newCC(keyHardwareError, ascInternalTargetFailure)
}

func highBit(b byte) int {
	for i := 7; i >= 0; i-- {
		if b&(1<<i) != 0 {
			return i
		}
	}
	return -1
}

func sortedUnique(in []uint16) []uint16 {
	out := slices.Clone(in)
	slices.Sort(out)
	return slices.Compact(out)
}

func be16(b []byte) uint16 { return binary.BigEndian.Uint16(b) }
func be32(b []byte) uint32 { return binary.BigEndian.Uint32(b) }
func be64(b []byte) uint64 { return binary.BigEndian.Uint64(b) }

func put16(b []byte, v uint16) { binary.BigEndian.PutUint16(b, v) }
func put32(b []byte, v uint32) { binary.BigEndian.PutUint32(b, v) }
func put64(b []byte, v uint64) { binary.BigEndian.PutUint64(b, v) }
