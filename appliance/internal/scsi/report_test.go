package scsi

import (
	"bytes"
	"encoding/binary"
	"slices"
	"sync"
	"testing"

	"github.com/cairn-storage/cairn/appliance/internal/blockdev"
)

func rsocCDB(rctd bool, options, op byte, sa uint16, alloc uint32) []byte {
	c := make([]byte, 12)
	c[0], c[1], c[2], c[3] = opMaintenanceIn, saReportOpcodes, options, op
	if rctd {
		c[2] |= 0x80
	}
	binary.BigEndian.PutUint16(c[4:], sa)
	binary.BigEndian.PutUint32(c[6:], alloc)
	return c
}

type opDescriptor struct {
	op       byte
	sa       uint16
	servactv bool
	cdbLen   int
}

func TestReportSupportedOpcodes(t *testing.T) {
	l, _ := newTestLUN(t, Options{})
	r := run(l, rsocCDB(false, 0, 0, 0, 65535), nil, 65535)
	mustGood(t, r)
	d := r.data
	if int(binary.BigEndian.Uint32(d))+4 != len(d) || (len(d)-4)%8 != 0 {
		t.Fatalf("all commands: length %d, %d bytes", binary.BigEndian.Uint32(d), len(d))
	}
	var all []opDescriptor
	for b := d[4:]; len(b) > 0; b = b[8:] {
		if b[5]&0x02 != 0 {
			t.Fatal("CTDP set without RCTD")
		}
		all = append(all, opDescriptor{b[0], binary.BigEndian.Uint16(b[2:]), b[5]&1 != 0, int(binary.BigEndian.Uint16(b[6:]))})
	}
	if len(all) != len(commandTable) {
		t.Fatalf("%d descriptors, want %d", len(all), len(commandTable))
	}
	seen := map[byte]bool{}
	for _, c := range all {
		seen[c.op] = true
		if !c.servactv && c.sa != 0 {
			t.Errorf("opcode %#x: service action %#x without SERVACTV", c.op, c.sa)
		}
	}
	for _, op := range []byte{0x00, 0x03, 0x08, 0x0A, 0x12, 0x15, 0x1A, 0x1B, 0x1E, 0x25, 0x28, 0x2A, 0x2E, 0x2F, 0x34, 0x35, 0x41, 0x42,
		0x55, 0x5A, 0x83, 0x84, 0x88, 0x89, 0x8A, 0x8E, 0x8F, 0x90, 0x91, 0x93, 0x9E, 0xA0, 0xA3, 0xA8, 0xAA, 0xAE, 0xAF} {
		if !seen[op] {
			t.Errorf("opcode %#x not reported", op)
		}
	}

	for _, c := range all {
		// The one-command form must agree with the list, and its usage data
		// must be what Execute enforces (byte 0 is the opcode).
		opt := byte(1)
		if c.servactv {
			opt = 2
			mustFieldPointer(t, run(l, rsocCDB(false, 1, c.op, c.sa, 512), nil, 512), true, 2)
		} else {
			mustFieldPointer(t, run(l, rsocCDB(false, 2, c.op, c.sa, 512), nil, 512), true, 2)
		}
		r := run(l, rsocCDB(true, opt, c.op, c.sa, 512), nil, 512)
		mustGood(t, r)
		one := r.data
		if one[1] != 0x83 || int(binary.BigEndian.Uint16(one[2:])) != c.cdbLen || one[4] != c.op {
			t.Fatalf("opcode %#x/%#x: one-command header % x", c.op, c.sa, one[:5])
		}
		usage := one[4 : 4+c.cdbLen]
		if timeouts := one[4+c.cdbLen:]; len(timeouts) != 12 || binary.BigEndian.Uint16(timeouts) != 0x0A {
			t.Fatalf("opcode %#x: timeouts descriptor % x", c.op, timeouts)
		}
		// Setting a bit outside the usage data is INVALID FIELD IN CDB at
		// that byte (bytes 0 and 1 select the command, so start at 2).
		for i := 2; i < c.cdbLen; i++ {
			if usage[i] == 0xFF {
				continue
			}
			cdb := make([]byte, c.cdbLen)
			cdb[0] = c.op
			if c.servactv {
				cdb[1] = byte(c.sa)
			}
			cdb[i] = ^usage[i]
			mustFieldPointer(t, run(l, cdb, nil, 0), true, i)
		}
	}
	// DPO/FUA for READ(10), WRITE(10), COMPARE AND WRITE as libiscsi checks.
	for _, op := range []byte{opRead10, opWrite10, opCompareAndWrite, opWrite16} {
		r := run(l, rsocCDB(false, 1, op, 0, 512), nil, 512)
		if r.data[5]&0x18 != 0x18 {
			t.Errorf("opcode %#x: usage byte 1 %#x lacks DPO/FUA", op, r.data[5])
		}
	}
	// An unsupported opcode is reported as not supported.
	r = run(l, rsocCDB(false, 1, 0xC0, 0, 512), nil, 512)
	mustGood(t, r)
	if !bytes.Equal(r.data, []byte{0, 1, 0, 0}) {
		t.Fatalf("unsupported opcode: % x", r.data)
	}
	// RCTD: every descriptor 20 bytes with CTDP.
	r = run(l, rsocCDB(true, 0, 0, 0, 65535), nil, 65535)
	mustGood(t, r)
	if len(r.data) != 4+20*len(commandTable) || r.data[4+5]&0x02 == 0 {
		t.Fatalf("RCTD list: %d bytes", len(r.data))
	}
	mustFieldPointer(t, run(l, rsocCDB(false, 5, 0, 0, 512), nil, 512), true, 2)
}

func TestUnsupportedCommands(t *testing.T) {
	l, _ := newTestLUN(t, Options{})
	r := run(l, []byte{0xC5, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, nil, 0)
	want := []byte{0x70, 0, keyIllegalRequest, 0, 0, 0, 0, 10, 0, 0, 0, 0, 0x20, 0x00, 0, 0xC0, 0, 0}
	if r.Status != StatusCheckCondition || !bytes.Equal(r.Sense, want) {
		t.Fatalf("invalid opcode: sense % x, want % x", r.Sense, want)
	}
	// Commands LIO handles itself or Cairn does not implement.
	for _, op := range []byte{0x5E, 0x5F, 0x16, 0x17, 0x48, 0x8B, 0x9C, 0x7F, 0x04} {
		mustSense(t, run(l, make16(op), nil, 0), keyIllegalRequest, ascInvalidOpcode)
	}
	// Unknown service actions of known opcodes: INVALID FIELD IN CDB at byte 1.
	mustFieldPointer(t, run(l, []byte{opServiceActionIn16, 0x11, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 32, 0, 0}, nil, 32), true, 1)
	mustFieldPointer(t, run(l, []byte{opMaintenanceIn, 0x05, 0, 0, 0, 0, 0, 0, 0, 32, 0, 0}, nil, 32), true, 1)
	mustFieldPointer(t, run(l, make16(opExtendedCopy, 0x01), nil, 0), true, 1) // LID4
	// NACA in the control byte is not supported.
	mustFieldPointer(t, run(l, []byte{opTestUnitReady, 0, 0, 0, 0, 0x04}, nil, 0), true, 5)
	// A truncated CDB.
	mustFieldPointer(t, run(l, []byte{opRead16, 0, 0}, nil, 0), true, 3)
	mustSense(t, run(l, nil, nil, 0), keyIllegalRequest, ascInvalidOpcode)
}

func make16(op byte, rest ...byte) []byte {
	c := make([]byte, 16)
	c[0] = op
	copy(c[1:], rest)
	return c
}

func TestSimpleCommands(t *testing.T) {
	l, _ := newTestLUN(t, Options{})
	mustGood(t, run(l, []byte{opTestUnitReady, 0, 0, 0, 0, 0}, nil, 0))
	mustGood(t, run(l, []byte{opStartStopUnit, 1, 0, 0, 0x01, 0}, nil, 0))
	mustGood(t, run(l, []byte{opPreventAllow, 0, 0, 0, 1, 0}, nil, 0))

	r := run(l, []byte{opRequestSense, 0, 0, 0, 252, 0}, nil, 252)
	mustGood(t, r)
	if want := []byte{0x70, 0, 0, 0, 0, 0, 0, 10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}; !bytes.Equal(r.data, want) {
		t.Fatalf("REQUEST SENSE % x", r.data)
	}
	r = run(l, []byte{opRequestSense, 1, 0, 0, 252, 0}, nil, 252)
	mustGood(t, r)
	if !bytes.Equal(r.data, []byte{0x72, 0, 0, 0, 0, 0, 0, 0}) {
		t.Fatalf("REQUEST SENSE (descriptor) % x", r.data)
	}

	rl := []byte{opReportLUNs, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0}
	r = run(l, rl, nil, 256)
	mustGood(t, r)
	if want := []byte{0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}; !bytes.Equal(r.data, want) {
		t.Fatalf("REPORT LUNS % x", r.data)
	}
	mustFieldPointer(t, run(l, []byte{opReportLUNs, 0, 0, 0, 0, 0, 0, 0, 0, 8, 0, 0}, nil, 8), true, 6)
}

func rtpgCDB(format byte, alloc uint32) []byte {
	c := make([]byte, 12)
	c[0], c[1] = opMaintenanceIn, format<<5|saReportTPG
	binary.BigEndian.PutUint32(c[6:], alloc)
	return c
}

// Every SVM must give the same answer although each has its own port.
func TestReportTargetPortGroupsIdenticalAcrossSVMs(t *testing.T) {
	v := newSpy(1, testVolumeSize)
	var answers [][]byte
	for port := uint16(1); port <= 3; port++ {
		l := NewLUN(v, Options{TargetPortGroup: 1, RelativeTargetPort: port, GroupPorts: []uint16{3, 1, 2, 2}})
		r := run(l, rtpgCDB(0, 1024), nil, 1024)
		mustGood(t, r)
		answers = append(answers, r.data)
	}
	want := []byte{0, 0, 0, 20, 0x80, 0x81, 0, 1, 0, 0, 0, 3, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3}
	for i, a := range answers {
		if !bytes.Equal(a, want) {
			t.Fatalf("SVM %d answered % x, want % x", i+1, a, want)
		}
	}
	// Without a port list: still identical, zero ports.
	l1 := NewLUN(v, Options{TargetPortGroup: 1, RelativeTargetPort: 1})
	l2 := NewLUN(v, Options{TargetPortGroup: 1, RelativeTargetPort: 2})
	a, b := run(l1, rtpgCDB(1, 1024), nil, 1024), run(l2, rtpgCDB(1, 1024), nil, 1024)
	mustGood(t, a)
	if !bytes.Equal(a.data, b.data) || !bytes.Equal(a.data, []byte{0, 0, 0, 12, 0x10, 60, 0, 0, 0x80, 0x81, 0, 1, 0, 0, 0, 0}) {
		t.Fatalf("extended header answers % x / % x", a.data, b.data)
	}
	// Allocation length truncates.
	if r := run(l1, rtpgCDB(0, 6), nil, 1024); r.DataInLen != 6 {
		t.Fatalf("allocation length 6 returned %d bytes", r.DataInLen)
	}
	mustFieldPointer(t, run(l1, rtpgCDB(2, 1024), nil, 1024), true, 1)

	// A port list that follows the system: each answer has the current list.
	var mu sync.Mutex
	now := []uint16{2, 1}
	l3 := NewLUN(v, Options{TargetPortGroup: 1, RelativeTargetPort: 1, GroupPorts: []uint16{9},
		GroupPortsNow: func() []uint16 { mu.Lock(); defer mu.Unlock(); return slices.Clone(now) }})
	if r := run(l3, rtpgCDB(0, 1024), nil, 1024); !bytes.Equal(r.data, []byte{0, 0, 0, 16, 0x80, 0x81, 0, 1, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 2}) {
		t.Fatalf("ports 1,2 answered % x", r.data)
	}
	mu.Lock()
	now = []uint16{3, 1, 2, 3}
	mu.Unlock()
	if r := run(l3, rtpgCDB(0, 1024), nil, 1024); !bytes.Equal(r.data, want) {
		t.Fatalf("after port 3 joined: % x, want % x", r.data, want)
	}
}

// While the cluster cannot serve the volume, I/O ends NOT READY 04/0A and
// RTPG reports the group transitioning (with T_SUP); the next successful
// I/O ends the transition. That is the one ALUA story (alua.go).
func TestALUATransitionStory(t *testing.T) {
	l, v := newTestLUN(t, Options{TargetPortGroup: 1, RelativeTargetPort: 2, GroupPorts: []uint16{1, 2, 3}})
	state := func() (byte, byte) {
		r := run(l, rtpgCDB(1, 1024), nil, 1024)
		mustGood(t, r)
		return r.data[8] & 0x0F, r.data[9]
	}
	if s, sup := state(); s != aluaActiveOptimized || sup != 0x81 {
		t.Fatalf("healthy: state %#x supported %#x, want active/optimized with T_SUP|AO_SUP", s, sup)
	}
	v.setErr(blockdev.ErrUnavailable)
	mustSense(t, run(l, cdb10(opRead10, 0, 0, 1), nil, BlockSize), keyNotReady, ascNotAccessibleTransition)
	if s, _ := state(); s != aluaTransitioning {
		t.Fatalf("after 04/0A: state %#x, want transitioning (0Fh)", s)
	}
	// Commands that do not touch the volume do not end it.
	mustGood(t, run(l, inquiryCDB(false, 0, 96), nil, 96))
	if s, _ := state(); s != aluaTransitioning {
		t.Fatalf("after INQUIRY: state %#x, want still transitioning", s)
	}
	v.setErr(nil)
	mustGood(t, run(l, cdb10(opWrite10, 0, 0, 1), fill(BlockSize, 7), 0))
	if s, _ := state(); s != aluaActiveOptimized {
		t.Fatalf("after a successful write: state %#x, want active/optimized", s)
	}
}

// Persistent reservations and SPC-2 reservations are refused with INVALID
// COMMAND OPERATION CODE: a reservation taken through one SVM would not
// fence another, so Cairn LUNs offer none (docs/vsphere.md: no WSFC shared
// disks). LIO refuses them before the backstore when emulate_pr=0, which
// the lio package sets; this is the answer if one ever reaches Cairn.
func TestReservationsRefused(t *testing.T) {
	l, _ := newTestLUN(t, Options{})
	for _, c := range []struct {
		name string
		cdb  []byte
	}{
		{"PERSISTENT RESERVE IN", []byte{0x5E, 0x00, 0, 0, 0, 0, 0, 0x20, 0, 0}},
		{"PERSISTENT RESERVE OUT", []byte{0x5F, 0x00, 0, 0, 0, 0, 0, 0, 0x18, 0}},
		{"RESERVE(6)", []byte{0x16, 0, 0, 0, 0, 0}},
		{"RELEASE(6)", []byte{0x17, 0, 0, 0, 0, 0}},
		{"RESERVE(10)", []byte{0x56, 0, 0, 0, 0, 0, 0, 0, 0, 0}},
		{"RELEASE(10)", []byte{0x57, 0, 0, 0, 0, 0, 0, 0, 0, 0}},
	} {
		t.Run(c.name, func(t *testing.T) {
			mustSense(t, run(l, c.cdb, make([]byte, 24), 32), keyIllegalRequest, ascInvalidOpcode)
		})
	}
	// And REPORT SUPPORTED OPERATION CODES does not list them.
	for _, op := range []byte{0x5E, 0x5F, 0x16, 0x17, 0x56, 0x57} {
		if len(byOpcode[op]) != 0 {
			t.Fatalf("opcode %#x is in the command table", op)
		}
	}
}
