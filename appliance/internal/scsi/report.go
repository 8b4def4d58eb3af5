package scsi

import "context"

// reportTargetPortGroups serves REPORT TARGET PORT GROUPS (SPC-4 6.36).
// Cairn's ALUA is symmetric: one target port group, active/optimized, the
// only state it supports, and the answer is byte for byte the same on
// every SVM (the port list comes from Options.GroupPorts or GroupPortsNow, the same on all
// SVMs, never from this SVM's own port). Descriptor layout:
//
//	byte 0    PREF=1 | ASYMMETRIC ACCESS STATE 0 (active/optimized)
//	byte 1    supported states: AO_SUP only
//	bytes 2-3 TARGET PORT GROUP
//	byte 5    STATUS CODE 0, byte 7 TARGET PORT COUNT
//	8..       4 bytes per port: reserved (2), RELATIVE TARGET PORT IDENTIFIER
func (l *LUN) reportTargetPortGroups(_ context.Context, r *request) (int, *checkCondition) {
	format := r.cdb[1] >> 5
	alloc := be32(r.cdb[6:])
	if format > 1 {
		return 0, invalidCDB(1, 7)
	}
	ports := l.groupPorts
	if now := l.opts.GroupPortsNow; now != nil {
		ports = sortedUnique(now())
	}
	if len(ports) > 255 {
		ports = ports[:255]
	}
	d := make([]byte, 8+4*len(ports))
	d[0] = 0x80 | l.aluaState()
	d[1] = aluaSupported
	put16(d[2:], l.opts.TargetPortGroup)
	d[7] = byte(len(ports))
	for i, p := range ports {
		put16(d[8+4*i+2:], p)
	}
	hdr := make([]byte, 4)
	if format == 1 {
		// Extended header: FORMAT TYPE 001b, IMPLICIT TRANSITION TIME.
		hdr = append(hdr, 0x10, implicitTransitionSeconds, 0, 0)
	}
	out := append(hdr, d...)
	put32(out[0:], uint32(len(out)-4))
	return r.reply(out, alloc), nil
}

// reportLUNs serves REPORT LUNS. LIO answers it for the whole target
// before the command reaches a backstore; this answer (LUN 0 only) is for
// transports without that.
func (l *LUN) reportLUNs(_ context.Context, r *request) (int, *checkCondition) {
	alloc := be32(r.cdb[6:])
	if alloc < 16 {
		return 0, invalidCDB(6, -1)
	}
	var out []byte
	switch r.cdb[2] { // SELECT REPORT
	case 0x00, 0x02:
		out = make([]byte, 16)
		put32(out[0:], 8) // one LUN: 0
	case 0x01:
		out = make([]byte, 8) // no well-known logical units
	default:
		return 0, invalidCDB(2, -1)
	}
	return r.reply(out, alloc), nil
}
