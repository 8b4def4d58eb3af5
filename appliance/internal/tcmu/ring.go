// Package tcmu drives the Linux kernel's TCMU command ring (target_core_user):
// it maps a LIO user-backstore's uio device, takes SCSI commands off the ring,
// starts the reads and writes an AsyncHandler takes without a goroutine, runs
// every other command on a pool of long-lived worker goroutines through the
// Handler, and writes the completions back, in any order.
package tcmu

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Ring format, TCMU mailbox version 2 (include/uapi/linux/target_core_user.h,
// TCMU_VERSION "2.0"; the layout is the same from kernel 4.x through 6.12).
// All integers are little-endian on x86-64 (host byte order); all structs are
// packed. The uio device's map 0 is one shared region:
//
//	offset 0                 mailbox (64-byte cache lines)
//	  0  u16 version         = 2
//	  2  u16 flags           capability bits, see mbFlag*
//	  4  u32 cmdr_off        offset of the command ring from the region start
//	  8  u32 cmdr_size       ring size in bytes (not a power of two)
//	 12  u32 cmd_head        written by the kernel: end of queued entries
//	 64  u32 cmd_tail        written by us: end of completed entries
//	cmdr_off                 command ring, cmdr_size bytes
//	data_off                 data area (pages allocated on demand)
//
// An entry starts with an 8-byte header, padded to 8 bytes:
//
//	0 u32 len_op   length (multiple of 8) | opcode in the low 3 bits
//	4 u16 cmd_id   kernel's id for the command (1..65535)
//	6 u8  kflags
//	7 u8  uflags   written by us: entryFlag*
//
// Opcodes: PAD (0) fills the ring's end so entries never wrap; TMR (2) is a
// task-management notice (only with the device's tmr_notification on); CMD
// (1) is a SCSI command, whose request body is:
//
//	 8 u32 iov_cnt        data buffer iovecs
//	12 u32 iov_bidi_cnt   bidirectional data-in iovecs, after the first ones
//	16 u32 iov_dif_cnt
//	24 u64 cdb_off        offset of the CDB from the region start
//	32 u64 pad, 40 u64 pad
//	48 iovec[]            {u64 base, u64 len}; base is an offset from the region start
//
// (The entry is packed but its request struct is not: cdb_off is 8-aligned
// inside it, hence the hole at 20.)
//
// and whose response, written over the same bytes, is:
//
//	 8 u8  scsi_status
//	12 u32 read_len       bytes of data-in actually returned (with entryFlagReadLen)
//	16 u8  sense[96]
//
// Protocol. The kernel appends entries at cmd_head and raises a uio event.
// We read entries in ring order; every CMD entry must be answered once.
// Completions need not follow ring order (mbFlagOutOfOrder): the kernel walks
// from its last cleaned position to cmd_tail and, for each CMD entry there,
// completes the command named by the entry's cmd_id. So a completion is
// written into whatever CMD entry sits at cmd_tail (skipping PAD/TMR
// entries) with that command's cmd_id, and cmd_tail moves past it. This is
// safe because every CMD entry between cmd_tail and our read position has
// already been copied out, and there are never fewer of them than commands
// in flight. Writing 4 bytes to the uio fd makes the kernel process the new
// completions.
//
// Netlink. target_core_user also announces devices on the "TCM-USER"
// generic netlink family (TCMU_CMD_ADDED_DEVICE, ...). Kernel 6.1 waits for
// a reply only after a daemon declared TCMU_ATTR_SUPP_KERN_CMD_REPLY through
// TCMU_CMD_SET_FEATURES (tcmu-runner does) and only for devices whose
// nl_reply_supported is above 0. Cairn never declares it and creates its
// backstores with nl_reply_supported=-1 (internal/lio), so it needs no
// netlink listener; the ring is found by its uio name instead.
const (
	mailboxVersion = 2

	mbVersion  = 0
	mbFlags    = 2
	mbCmdrOff  = 4
	mbCmdrSize = 8
	mbCmdHead  = 12
	mbCmdTail  = 64
	mailboxLen = 128 // sizeof(struct tcmu_mailbox) rounded to its alignment

	mbFlagOutOfOrder = 1 << 0 // TCMU_MAILBOX_FLAG_CAP_OOOC
	mbFlagReadLen    = 1 << 1 // TCMU_MAILBOX_FLAG_CAP_READ_LEN

	opPad  = 0
	opCmd  = 1
	opTMR  = 2
	opMask = 7

	hdrLen             = 8
	reqIovCnt          = 8
	reqBidiCnt         = 12
	reqCdbOff          = 24
	reqIov             = 48
	iovecLen           = 16
	rspStatus          = 8
	rspReadLen         = 12
	rspSense           = 16
	SenseLen           = 96                  // TCMU_SENSE_BUFFERSIZE
	minCmdEntry        = rspSense + SenseLen // sizeof(struct tcmu_cmd_entry) = 112
	entryFlagUnknownOp = 0x1
	entryFlagReadLen   = 0x2

	// maxCDB bounds the CDB we copy out; SCSI variable-length CDBs stop at 260.
	maxCDB = 260
)

// ErrBrokenRing means the ring's contents break the protocol; the device must
// be reset (disable and re-enable the backstore) before it can be served again.
var ErrBrokenRing = errors.New("tcmu ring broken")

var le = binary.LittleEndian

// iovec is one data segment: an offset from the region start and a length.
type iovec struct{ off, len uint64 }

// command is a CMD entry copied out of the ring.
type command struct {
	id   uint16
	cdb  []byte
	iov  []iovec // data-out, or data-in for non-bidirectional commands
	bidi []iovec // data-in of a bidirectional command
}

// mailbox is the decoded fixed part of the mailbox.
type mailbox struct {
	version         uint16
	flags           uint16
	cmdrOff, cmdrSz uint32
}

func parseMailbox(mem []byte) (mailbox, error) {
	if len(mem) < mailboxLen {
		return mailbox{}, fmt.Errorf("tcmu: region of %d bytes has no mailbox: %w", len(mem), ErrBrokenRing)
	}
	mb := mailbox{
		version: le.Uint16(mem[mbVersion:]),
		flags:   le.Uint16(mem[mbFlags:]),
		cmdrOff: le.Uint32(mem[mbCmdrOff:]),
		cmdrSz:  le.Uint32(mem[mbCmdrSize:]),
	}
	if mb.version != mailboxVersion {
		return mb, fmt.Errorf("tcmu: mailbox version %d, this driver speaks %d: %w", mb.version, mailboxVersion, ErrBrokenRing)
	}
	if mb.flags&mbFlagOutOfOrder == 0 {
		return mb, fmt.Errorf("tcmu: kernel lacks out-of-order completion (flags %#x): %w", mb.flags, ErrBrokenRing)
	}
	if mb.cmdrOff < mbCmdTail+4 || mb.cmdrSz < minCmdEntry || mb.cmdrSz%8 != 0 ||
		uint64(mb.cmdrOff)+uint64(mb.cmdrSz) > uint64(len(mem)) {
		return mb, fmt.Errorf("tcmu: ring at %d size %d outside region of %d bytes: %w", mb.cmdrOff, mb.cmdrSz, len(mem), ErrBrokenRing)
	}
	return mb, nil
}

// entryAt decodes the header of the entry at ring offset pos: its opcode and
// length, checked to lie inside the ring.
func entryAt(ring []byte, pos uint32) (op uint32, length uint32, err error) {
	if uint64(pos)+hdrLen > uint64(len(ring)) || pos%8 != 0 {
		return 0, 0, fmt.Errorf("tcmu: entry at %d outside ring of %d: %w", pos, len(ring), ErrBrokenRing)
	}
	lenOp := le.Uint32(ring[pos:])
	op, length = lenOp&opMask, lenOp&^opMask
	if length < hdrLen || uint64(pos)+uint64(length) > uint64(len(ring)) {
		return 0, 0, fmt.Errorf("tcmu: entry at %d has length %d (ring %d): %w", pos, length, len(ring), ErrBrokenRing)
	}
	return op, length, nil
}

// parseCommand copies the CMD entry at ring offset pos (length entLen) out of
// the shared region mem (ring = mem[cmdrOff:cmdrOff+cmdrSz]). dataOff/dataEnd
// bound where iovecs may point. Every field is checked: the region is shared
// with the kernel and a bad entry must not crash us.
func parseCommand(mem, ring []byte, pos, entLen uint32, dataOff, dataEnd uint64) (command, error) {
	e := ring[pos : pos+entLen]
	if entLen < minCmdEntry {
		return command{}, fmt.Errorf("tcmu: command entry of %d bytes: %w", entLen, ErrBrokenRing)
	}
	c := command{id: le.Uint16(e[4:])}
	nIov, nBidi := le.Uint32(e[reqIovCnt:]), le.Uint32(e[reqBidiCnt:])
	if uint64(nIov)+uint64(nBidi) > uint64(entLen-reqIov)/iovecLen {
		return c, fmt.Errorf("tcmu: command %d: %d+%d iovecs overflow its %d-byte entry: %w", c.id, nIov, nBidi, entLen, ErrBrokenRing)
	}
	readIov := func(i uint32) (iovec, error) {
		p := reqIov + i*iovecLen
		v := iovec{off: le.Uint64(e[p:]), len: le.Uint64(e[p+8:])}
		if v.off < dataOff || v.len > dataEnd || v.off > dataEnd-v.len {
			return v, fmt.Errorf("tcmu: command %d: iovec %d [%d,+%d) outside data area [%d,%d): %w", c.id, i, v.off, v.len, dataOff, dataEnd, ErrBrokenRing)
		}
		return v, nil
	}
	for i := uint32(0); i < nIov+nBidi; i++ {
		v, err := readIov(i)
		if err != nil {
			return c, err
		}
		if i < nIov {
			c.iov = append(c.iov, v)
		} else {
			c.bidi = append(c.bidi, v)
		}
	}
	cdbOff := le.Uint64(e[reqCdbOff:])
	if cdbOff >= uint64(len(mem)) {
		return c, fmt.Errorf("tcmu: command %d: CDB offset %d outside region: %w", c.id, cdbOff, ErrBrokenRing)
	}
	n := cdbLen(mem[cdbOff])
	if n == 0x7f0000 { // variable length: 8 + additional CDB length (byte 7)
		if cdbOff+8 > uint64(len(mem)) {
			return c, fmt.Errorf("tcmu: command %d: CDB runs off the region: %w", c.id, ErrBrokenRing)
		}
		n = 8 + int(mem[cdbOff+7])
	}
	if n > maxCDB || cdbOff+uint64(n) > uint64(len(mem)) {
		return c, fmt.Errorf("tcmu: command %d: %d-byte CDB runs off the region: %w", c.id, n, ErrBrokenRing)
	}
	c.cdb = append([]byte(nil), mem[cdbOff:cdbOff+uint64(n)]...)
	return c, nil
}

// cdbLen is the CDB length implied by the operation code's group (SAM-5
// 5.3.2), as the kernel's scsi_command_size computes it; 0x7f0000 marks the
// variable-length CDB (opcode 0x7f), whose length is in the CDB itself.
func cdbLen(opcode byte) int {
	if opcode == 0x7f {
		return 0x7f0000
	}
	return [8]int{6, 10, 10, 12, 16, 12, 10, 10}[opcode>>5]
}

// writeResponse writes a completion for command id into the CMD entry at
// ring offset pos. It keeps the entry's len_op (the kernel walks by it).
func writeResponse(ring []byte, pos uint32, id uint16, status byte, sense []byte, readLen uint32, setReadLen bool) {
	e := ring[pos:]
	le.PutUint16(e[4:], id)
	e[6] = 0 // kflags
	var uf byte
	if setReadLen {
		uf |= entryFlagReadLen
	}
	e[7] = uf
	e[rspStatus] = status
	e[rspStatus+1], e[rspStatus+2], e[rspStatus+3] = 0, 0, 0
	le.PutUint32(e[rspReadLen:], readLen)
	s := e[rspSense : rspSense+SenseLen]
	n := copy(s, sense)
	clear(s[n:])
}
