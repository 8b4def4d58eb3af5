package scsi

import (
	"context"
	"sort"
)

// command describes one supported operation code (and service action).
type command struct {
	name  string
	op    byte
	sa    uint16
	hasSA bool
	// usage is the CDB usage data of REPORT SUPPORTED OPERATION CODES: a
	// bit is set for every CDB bit the device server evaluates. Execute
	// rejects CDBs with any other bit set. Its length is the CDB length.
	usage []byte
	run   func(l *LUN, ctx context.Context, r *request) (int, *checkCondition)
	// medium is set for commands that access the volume: their success
	// ends an ALUA transition (see alua.go).
	medium bool
}

// Operation codes.
const (
	opTestUnitReady     = 0x00
	opRequestSense      = 0x03
	opRead6             = 0x08
	opWrite6            = 0x0A
	opInquiry           = 0x12
	opModeSelect6       = 0x15
	opModeSense6        = 0x1A
	opStartStopUnit     = 0x1B
	opPreventAllow      = 0x1E
	opReadCapacity10    = 0x25
	opRead10            = 0x28
	opWrite10           = 0x2A
	opWriteAndVerify10  = 0x2E
	opVerify10          = 0x2F
	opPrefetch10        = 0x34
	opSyncCache10       = 0x35
	opWriteSame10       = 0x41
	opUnmap             = 0x42
	opModeSelect10      = 0x55
	opModeSense10       = 0x5A
	opExtendedCopy      = 0x83
	opReceiveCopyResult = 0x84
	opRead16            = 0x88
	opCompareAndWrite   = 0x89
	opWrite16           = 0x8A
	opWriteAndVerify16  = 0x8E
	opVerify16          = 0x8F
	opPrefetch16        = 0x90
	opSyncCache16       = 0x91
	opWriteSame16       = 0x93
	opServiceActionIn16 = 0x9E
	opReportLUNs        = 0xA0
	opMaintenanceIn     = 0xA3
	opRead12            = 0xA8
	opWrite12           = 0xAA
	opWriteAndVerify12  = 0xAE
	opVerify12          = 0xAF
)

// Service actions.
const (
	saReadCapacity16   = 0x10
	saGetLBAStatus     = 0x12
	saReportTPG        = 0x0A
	saReportOpcodes    = 0x0C
	saExtendedCopyLID1 = 0x00
	saCopyStatus       = 0x00
	saOperatingParams  = 0x03
)

// u builds a CDB usage mask: the opcode followed by the given bytes.
func u(op byte, rest ...byte) []byte { return append([]byte{op}, rest...) }

var ff4 = []byte{0xFF, 0xFF, 0xFF, 0xFF}

func cat(parts ...[]byte) []byte {
	var out []byte
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// Byte 1 of the READ/WRITE/VERIFY family: DPO (bit 4), FUA (bit 3), RARC
// (bit 2, reads only) and FUA_NV (bit 1, obsolete, ignored). RDPROTECT and
// WRPROTECT (bits 7-5) are not supported: the LUN has no protection
// information, so they must be zero.
const (
	readFlags   = 0x1E
	writeFlags  = 0x1A
	verifyFlags = 0x16 // DPO, BYTCHK (bits 2-1)
	groupMask   = 0x1F
)

// commandTable lists every supported command, sorted by operation code and
// service action in init (the order REPORT SUPPORTED OPERATION CODES uses).
var commandTable []*command

func newCommandTable() []*command {
	return []*command{
		{name: "TEST UNIT READY", op: opTestUnitReady, usage: u(opTestUnitReady, 0, 0, 0, 0, 0), run: (*LUN).testUnitReady},
		{name: "REQUEST SENSE", op: opRequestSense, usage: u(opRequestSense, 0x01, 0, 0, 0xFF, 0), run: (*LUN).requestSense},
		{name: "READ(6)", op: opRead6, usage: u(opRead6, 0x1F, 0xFF, 0xFF, 0xFF, 0), run: (*LUN).read},
		{name: "WRITE(6)", op: opWrite6, usage: u(opWrite6, 0x1F, 0xFF, 0xFF, 0xFF, 0), run: (*LUN).write},
		{name: "INQUIRY", op: opInquiry, usage: u(opInquiry, 0x01, 0xFF, 0xFF, 0xFF, 0), run: (*LUN).inquiry},
		{name: "MODE SELECT(6)", op: opModeSelect6, usage: u(opModeSelect6, 0x11, 0, 0, 0xFF, 0), run: (*LUN).modeSelect},
		{name: "MODE SENSE(6)", op: opModeSense6, usage: u(opModeSense6, 0x08, 0xFF, 0xFF, 0xFF, 0), run: (*LUN).modeSense},
		{name: "START STOP UNIT", op: opStartStopUnit, usage: u(opStartStopUnit, 0x01, 0, 0x0F, 0xF7, 0), run: (*LUN).noop},
		{name: "PREVENT ALLOW MEDIUM REMOVAL", op: opPreventAllow, usage: u(opPreventAllow, 0, 0, 0, 0x03, 0), run: (*LUN).noop},
		{name: "READ CAPACITY(10)", op: opReadCapacity10, usage: u(opReadCapacity10, 0, 0xFF, 0xFF, 0xFF, 0xFF, 0, 0, 0x01, 0), run: (*LUN).readCapacity10},
		{name: "READ(10)", op: opRead10, usage: u(opRead10, readFlags, 0xFF, 0xFF, 0xFF, 0xFF, groupMask, 0xFF, 0xFF, 0), run: (*LUN).read},
		{name: "WRITE(10)", op: opWrite10, usage: u(opWrite10, writeFlags, 0xFF, 0xFF, 0xFF, 0xFF, groupMask, 0xFF, 0xFF, 0), run: (*LUN).write},
		{name: "WRITE AND VERIFY(10)", op: opWriteAndVerify10, usage: u(opWriteAndVerify10, verifyFlags, 0xFF, 0xFF, 0xFF, 0xFF, groupMask, 0xFF, 0xFF, 0), run: (*LUN).writeAndVerify},
		{name: "VERIFY(10)", op: opVerify10, usage: u(opVerify10, verifyFlags, 0xFF, 0xFF, 0xFF, 0xFF, groupMask, 0xFF, 0xFF, 0), run: (*LUN).verify},
		{name: "PRE-FETCH(10)", op: opPrefetch10, usage: u(opPrefetch10, 0x02, 0xFF, 0xFF, 0xFF, 0xFF, groupMask, 0xFF, 0xFF, 0), run: (*LUN).prefetch},
		{name: "SYNCHRONIZE CACHE(10)", op: opSyncCache10, usage: u(opSyncCache10, 0x06, 0xFF, 0xFF, 0xFF, 0xFF, groupMask, 0xFF, 0xFF, 0), run: (*LUN).synchronizeCache},
		// ANCHOR (bit 4) is not supported (ANC_SUP=0), so it must be zero.
		{name: "WRITE SAME(10)", op: opWriteSame10, usage: u(opWriteSame10, 0x08, 0xFF, 0xFF, 0xFF, 0xFF, groupMask, 0xFF, 0xFF, 0), run: (*LUN).writeSame},
		{name: "UNMAP", op: opUnmap, usage: u(opUnmap, 0, 0, 0, 0, 0, groupMask, 0xFF, 0xFF, 0), run: (*LUN).unmap},
		{name: "MODE SELECT(10)", op: opModeSelect10, usage: u(opModeSelect10, 0x11, 0, 0, 0, 0, 0, 0xFF, 0xFF, 0), run: (*LUN).modeSelect},
		{name: "MODE SENSE(10)", op: opModeSense10, usage: u(opModeSense10, 0x18, 0xFF, 0xFF, 0, 0, 0, 0xFF, 0xFF, 0), run: (*LUN).modeSense},
		{name: "EXTENDED COPY(LID1)", op: opExtendedCopy, sa: saExtendedCopyLID1, hasSA: true, usage: cat(u(opExtendedCopy, 0x1F), make([]byte, 8), ff4, []byte{0, 0}), run: (*LUN).extendedCopy},
		{name: "RECEIVE COPY STATUS(LID1)", op: opReceiveCopyResult, sa: saCopyStatus, hasSA: true, usage: cat(u(opReceiveCopyResult, 0x1F, 0xFF), make([]byte, 7), ff4, []byte{0, 0}), run: (*LUN).receiveCopyResults},
		{name: "RECEIVE COPY OPERATING PARAMETERS", op: opReceiveCopyResult, sa: saOperatingParams, hasSA: true, usage: cat(u(opReceiveCopyResult, 0x1F, 0xFF), make([]byte, 7), ff4, []byte{0, 0}), run: (*LUN).receiveCopyResults},
		{name: "READ(16)", op: opRead16, usage: cat(u(opRead16, readFlags), ff4, ff4, ff4, []byte{groupMask, 0}), run: (*LUN).read},
		{name: "COMPARE AND WRITE", op: opCompareAndWrite, usage: cat(u(opCompareAndWrite, writeFlags), ff4, ff4, []byte{0, 0, 0, 0xFF, groupMask, 0}), run: (*LUN).compareAndWrite},
		{name: "WRITE(16)", op: opWrite16, usage: cat(u(opWrite16, writeFlags), ff4, ff4, ff4, []byte{groupMask, 0}), run: (*LUN).write},
		{name: "WRITE AND VERIFY(16)", op: opWriteAndVerify16, usage: cat(u(opWriteAndVerify16, verifyFlags), ff4, ff4, ff4, []byte{groupMask, 0}), run: (*LUN).writeAndVerify},
		{name: "VERIFY(16)", op: opVerify16, usage: cat(u(opVerify16, verifyFlags), ff4, ff4, ff4, []byte{groupMask, 0}), run: (*LUN).verify},
		{name: "PRE-FETCH(16)", op: opPrefetch16, usage: cat(u(opPrefetch16, 0x02), ff4, ff4, ff4, []byte{groupMask, 0}), run: (*LUN).prefetch},
		{name: "SYNCHRONIZE CACHE(16)", op: opSyncCache16, usage: cat(u(opSyncCache16, 0x06), ff4, ff4, ff4, []byte{groupMask, 0}), run: (*LUN).synchronizeCache},
		// UNMAP (bit 3) and NDOB (bit 0); ANCHOR is not supported.
		{name: "WRITE SAME(16)", op: opWriteSame16, usage: cat(u(opWriteSame16, 0x09), ff4, ff4, ff4, []byte{groupMask, 0}), run: (*LUN).writeSame},
		{name: "READ CAPACITY(16)", op: opServiceActionIn16, sa: saReadCapacity16, hasSA: true, usage: cat(u(opServiceActionIn16, 0x1F), make([]byte, 8), ff4, []byte{0, 0}), run: (*LUN).readCapacity16},
		{name: "GET LBA STATUS", op: opServiceActionIn16, sa: saGetLBAStatus, hasSA: true, usage: cat(u(opServiceActionIn16, 0x1F), ff4, ff4, ff4, []byte{0, 0}), run: (*LUN).getLBAStatus},
		{name: "REPORT LUNS", op: opReportLUNs, usage: cat(u(opReportLUNs, 0, 0xFF, 0, 0, 0), ff4, []byte{0, 0}), run: (*LUN).reportLUNs},
		// Byte 1: PARAMETER DATA FORMAT (bits 7-5) and the service action.
		{name: "REPORT TARGET PORT GROUPS", op: opMaintenanceIn, sa: saReportTPG, hasSA: true, usage: cat(u(opMaintenanceIn, 0xFF, 0, 0, 0, 0), ff4, []byte{0, 0}), run: (*LUN).reportTargetPortGroups},
		// Byte 2: RCTD (bit 7) and REPORTING OPTIONS (bits 2-0).
		{name: "REPORT SUPPORTED OPERATION CODES", op: opMaintenanceIn, sa: saReportOpcodes, hasSA: true, usage: cat(u(opMaintenanceIn, 0x1F, 0x87, 0xFF, 0xFF, 0xFF), ff4, []byte{0, 0}), run: (*LUN).reportSupportedOpcodes},
		{name: "READ(12)", op: opRead12, usage: cat(u(opRead12, readFlags), ff4, ff4, []byte{groupMask, 0}), run: (*LUN).read},
		{name: "WRITE(12)", op: opWrite12, usage: cat(u(opWrite12, writeFlags), ff4, ff4, []byte{groupMask, 0}), run: (*LUN).write},
		{name: "WRITE AND VERIFY(12)", op: opWriteAndVerify12, usage: cat(u(opWriteAndVerify12, verifyFlags), ff4, ff4, []byte{groupMask, 0}), run: (*LUN).writeAndVerify},
		{name: "VERIFY(12)", op: opVerify12, usage: cat(u(opVerify12, verifyFlags), ff4, ff4, []byte{groupMask, 0}), run: (*LUN).verify},
	}
}

// mediumOpcodes are the commands that read, write or flush the volume.
var mediumOpcodes = map[byte]bool{
	opRead6: true, opRead10: true, opRead12: true, opRead16: true,
	opWrite6: true, opWrite10: true, opWrite12: true, opWrite16: true,
	opWriteAndVerify10: true, opWriteAndVerify12: true, opWriteAndVerify16: true,
	opVerify10: true, opVerify12: true, opVerify16: true,
	opSyncCache10: true, opSyncCache16: true, opCompareAndWrite: true,
	opWriteSame10: true, opWriteSame16: true, opUnmap: true, opExtendedCopy: true,
}

// byOpcode indexes commandTable: byOpcode[op] lists the commands with that
// operation code (several only for opcodes with service actions).
var byOpcode [256][]*command

func init() {
	commandTable = newCommandTable()
	sort.SliceStable(commandTable, func(i, j int) bool {
		a, b := commandTable[i], commandTable[j]
		if a.op != b.op {
			return a.op < b.op
		}
		return a.sa < b.sa
	})
	for _, c := range commandTable {
		c.medium = mediumOpcodes[c.op]
		byOpcode[c.op] = append(byOpcode[c.op], c)
	}
}

// lookup finds the command for a CDB, or the sense for an unsupported one.
func lookup(cdb []byte) (*command, *checkCondition) {
	cmds := byOpcode[cdb[0]]
	if len(cmds) == 0 {
		return nil, newCC(keyIllegalRequest, ascInvalidOpcode).fieldPointer(true, 0, -1)
	}
	if !cmds[0].hasSA {
		return cmds[0], nil
	}
	if len(cdb) < 2 {
		return nil, invalidCDB(1, 4)
	}
	sa := uint16(cdb[1] & 0x1F)
	for _, c := range cmds {
		if c.sa == sa {
			return c, nil
		}
	}
	// Unknown service action of a known opcode: INVALID FIELD IN CDB
	// pointing at byte 1, which initiators read as "not implemented".
	return nil, invalidCDB(1, 4)
}

func (l *LUN) noop(context.Context, *request) (int, *checkCondition) { return 0, nil }

// testUnitReady reports the unit ready: a Cairn volume has no medium to
// load; if the cluster cannot serve it, I/O commands say so themselves.
func (l *LUN) testUnitReady(context.Context, *request) (int, *checkCondition) { return 0, nil }

// requestSense returns NO SENSE: the transport delivers sense data with
// every CHECK CONDITION (autosense), so nothing is ever pending here.
func (l *LUN) requestSense(_ context.Context, r *request) (int, *checkCondition) {
	alloc := uint32(r.cdb[4])
	if r.cdb[1]&0x01 != 0 { // DESC: descriptor format, no descriptors
		return r.reply([]byte{0x72, keyNoSense, 0, 0, 0, 0, 0, 0}, alloc), nil
	}
	cc := newCC(keyNoSense, ascNoAdditionalSense)
	return r.reply(cc.sense(), alloc), nil
}

// Command timeouts descriptor (SPC-4 6.35.4): length 0Ah, no timeouts
// specified.
var timeoutsDescriptor = []byte{0x00, 0x0A, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}

// reportSupportedOpcodes implements REPORT SUPPORTED OPERATION CODES
// (SPC-4 6.35) for reporting options 000b (all), 001b (by opcode), 010b (by
// opcode and service action) and 011b (either).
func (l *LUN) reportSupportedOpcodes(_ context.Context, r *request) (int, *checkCondition) {
	cdb := r.cdb
	rctd := cdb[2]&0x80 != 0
	options := cdb[2] & 0x07
	reqOp := cdb[3]
	reqSA := be16(cdb[4:6])
	alloc := be32(cdb[6:10])

	if options == 0 {
		out := make([]byte, 4, 4+len(commandTable)*20)
		for _, c := range commandTable {
			d := make([]byte, 8)
			d[0] = c.op
			put16(d[2:], c.sa)
			if c.hasSA {
				d[5] |= 0x01 // SERVACTV
			}
			if rctd {
				d[5] |= 0x02 // CTDP
			}
			put16(d[6:], uint16(len(c.usage)))
			out = append(out, d...)
			if rctd {
				out = append(out, timeoutsDescriptor...)
			}
		}
		put32(out[0:], uint32(len(out)-4))
		return r.reply(out, alloc), nil
	}

	cmds := byOpcode[reqOp]
	hasSA := len(cmds) > 0 && cmds[0].hasSA
	var found *command
	switch options {
	case 1:
		if hasSA {
			return 0, invalidCDB(2, 2)
		}
		if len(cmds) > 0 {
			found = cmds[0]
		}
	case 2:
		if !hasSA {
			if len(cmds) == 0 {
				break // unsupported opcode: reported as not supported
			}
			return 0, invalidCDB(2, 2)
		}
		for _, c := range cmds {
			if c.sa == reqSA {
				found = c
			}
		}
	case 3:
		for _, c := range cmds {
			if !c.hasSA || c.sa == reqSA {
				found = c
			}
		}
	default:
		return 0, invalidCDB(2, 2)
	}
	out := make([]byte, 4, 4+16+len(timeoutsDescriptor))
	if found == nil {
		out[1] = 0x01 // SUPPORT: not supported
	} else {
		out[1] = 0x03 // SUPPORT: supported in conformance with a standard
		put16(out[2:], uint16(len(found.usage)))
		out = append(out, found.usage...)
	}
	if rctd {
		out[1] |= 0x80 // CTDP
		out = append(out, timeoutsDescriptor...)
	}
	return r.reply(out, alloc), nil
}
