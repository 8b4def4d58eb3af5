package scsi

import "context"

// Version descriptors claimed in standard INQUIRY data (SPC-4 table 144).
const (
	versionSAM5  = 0x00A0
	versionISCSI = 0x0960
	versionSPC4  = 0x0460
	versionSBC3  = 0x04C0
)

// VPD page codes, in the ascending order page 00h lists them.
var supportedVPD = []byte{0x00, 0x80, 0x83, 0x8F, 0xB0, 0xB1, 0xB2}

func (l *LUN) inquiry(_ context.Context, r *request) (int, *checkCondition) {
	evpd := r.cdb[1]&0x01 != 0
	page := r.cdb[2]
	alloc := uint32(be16(r.cdb[3:5]))
	if !evpd {
		if page != 0 {
			return 0, invalidCDB(2, -1)
		}
		return r.reply(l.standardInquiry(), alloc), nil
	}
	var data []byte
	switch page {
	case 0x00:
		data = vpdPage(0x00, supportedVPD)
	case 0x80:
		data = vpdPage(0x80, []byte(printable(l.vol.Serial(), 0)))
	case 0x83:
		data = vpdPage(0x83, l.deviceIdentification())
	case 0x8F:
		data = vpdPage(0x8F, thirdPartyCopyVPD())
	case 0xB0:
		data = vpdPage(0xB0, l.blockLimits())
	case 0xB1:
		b := make([]byte, 0x3C)
		put16(b[0:], 0x0001) // MEDIUM ROTATION RATE: non-rotating medium
		data = vpdPage(0xB1, b)
	case 0xB2:
		data = vpdPage(0xB2, logicalBlockProvisioning())
	default:
		return 0, invalidCDB(2, -1)
	}
	return r.reply(data, alloc), nil
}

// standardInquiry is the standard INQUIRY data (SPC-4 6.6.2), 74 bytes:
//
//	byte 0   peripheral qualifier 0, device type 0 (direct access block)
//	byte 2   VERSION 06h (SPC-4)
//	byte 3   HISUP, RESPONSE DATA FORMAT 2
//	byte 5   TPGS 01b (implicit ALUA), 3PC (EXTENDED COPY)
//	byte 6   MULTIP: the unit is reachable through several target ports
//	byte 7   CMDQUE
//	8-15     T10 vendor identification, 16-31 product, 32-35 revision
//	58-73    version descriptors
func (l *LUN) standardInquiry() []byte {
	b := make([]byte, 74)
	b[2] = 0x06
	b[3] = 0x10 | 0x02
	b[4] = byte(len(b) - 5)
	b[5] = 0x10 | 0x08
	b[6] = 0x10
	b[7] = 0x02
	copy(b[8:16], padded(l.opts.VendorID, "CAIRN", 8))
	copy(b[16:32], padded(l.opts.ProductID, "Cairn volume", 16))
	copy(b[32:36], padded(l.opts.Revision, "0", 4))
	for i, v := range []uint16{versionSAM5, versionISCSI, versionSPC4, versionSBC3} {
		put16(b[58+2*i:], v)
	}
	return b
}

// vpdPage prefixes a VPD page body with its 4-byte header.
func vpdPage(code byte, body []byte) []byte {
	b := make([]byte, 4+len(body))
	b[1] = code
	put16(b[2:], uint16(len(body)))
	copy(b[4:], body)
	return b
}

// deviceIdentification is the body of VPD page 83h (SPC-4 7.8.6). The
// logical unit designators (NAA, T10 vendor ID) are the same on every SVM;
// the relative target port differs per SVM and the target port group is
// the one group all SVMs share.
func (l *LUN) deviceIdentification() []byte {
	var b []byte
	wwn := l.vol.WWN()
	// NAA IEEE registered extended (type 6), 16 bytes: code set binary,
	// association logical unit, designator type 3.
	b = append(b, 0x01, 0x03, 0x00, 16)
	b = append(b, wwn[:]...)
	// T10 vendor ID based: vendor identification + unit serial number.
	t10 := append(padded(l.opts.VendorID, "CAIRN", 8), printable(l.vol.Serial(), 0)...)
	if len(t10) > 255 {
		t10 = t10[:255]
	}
	b = append(b, 0x02, 0x01, 0x00, byte(len(t10)))
	b = append(b, t10...)
	// Relative target port (type 4) and target port group (type 5):
	// protocol identifier iSCSI (5) with PIV, association target port.
	b = append(b, 0x51, 0x94, 0x00, 4, 0, 0, byte(l.opts.RelativeTargetPort>>8), byte(l.opts.RelativeTargetPort))
	b = append(b, 0x51, 0x95, 0x00, 4, 0, 0, byte(l.opts.TargetPortGroup>>8), byte(l.opts.TargetPortGroup))
	return b
}

// blockLimits is the body of VPD page B0h (SBC-3 6.5.3), 3Ch bytes.
func (l *LUN) blockLimits() []byte {
	b := make([]byte, 0x3C)
	// byte 0: WSNZ=0, a WRITE SAME of zero blocks means "to the end".
	b[1] = maxCompareAndWrite
	put16(b[2:], 1<<l.physExp) // OPTIMAL TRANSFER LENGTH GRANULARITY
	put32(b[4:], l.maxTransfer)
	put32(b[8:], min(uint32(chunkBlocks), l.maxTransfer)) // OPTIMAL TRANSFER LENGTH
	put32(b[16:], maxUnmapBlocks)
	put32(b[20:], maxUnmapDescriptors)
	put32(b[24:], chunkBlocks) // OPTIMAL UNMAP GRANULARITY
	put32(b[28:], 0x80000000)  // UGAVALID, UNMAP GRANULARITY ALIGNMENT 0
	put64(b[32:], maxWriteSame)
	return b
}

// logicalBlockProvisioning is the body of VPD page B2h (SBC-3 6.5.4):
// UNMAP and WRITE SAME(10/16) with UNMAP are supported, deallocated blocks
// read as zeros (LBPRZ), the volume is thin provisioned.
func logicalBlockProvisioning() []byte {
	return []byte{
		0x00,                      // THRESHOLD EXPONENT
		0x80 | 0x40 | 0x20 | 0x04, // LBPU, LBPWS, LBPWS10, LBPRZ; ANC_SUP=0, DP=0
		0x02,                      // PROVISIONING TYPE: thin
		0x00,
	}
}

// thirdPartyCopyVPD is the body of VPD page 8Fh (SPC-4 7.8.17) for the
// EXTENDED COPY(LID1) copy manager. Each descriptor is padded to a
// multiple of 4 bytes.
func thirdPartyCopyVPD() []byte {
	var b []byte
	add := func(typ uint16, body []byte) {
		for len(body)%4 != 0 {
			body = append(body, 0)
		}
		d := make([]byte, 4, 4+len(body))
		put16(d[0:], typ)
		put16(d[2:], uint16(len(body)))
		b = append(b, append(d, body...)...)
	}
	// Supported Commands: 83h/00h EXTENDED COPY(LID1); 84h/00h and 84h/03h.
	add(0x0001, []byte{7, opExtendedCopy, 1, saExtendedCopyLID1, opReceiveCopyResult, 2, saCopyStatus, saOperatingParams})
	// Parameter Data.
	params := make([]byte, 28)
	put16(params[4:], maxCSCDDescriptors)
	put16(params[6:], maxSegmentDescriptors)
	put32(params[8:], maxDescriptorListLength)
	add(0x0004, params)
	// Supported Descriptors: block->block segment, identification CSCD.
	add(0x0008, []byte{2, segBlockToBlock, cscdIdentification})
	// Supported CSCD Descriptor IDs: none.
	add(0x000C, []byte{0, 0})
	// General Copy Operations.
	g := make([]byte, 32)
	put32(g[0:], maxConcurrentCopies)
	put32(g[4:], maxHeldCopyResults)
	put32(g[8:], maxSegmentBytes)
	g[12] = 9 // DATA SEGMENT GRANULARITY: 2^9 = one block
	add(0x8001, g)
	return b
}

// padded returns s (or def when s is empty) as printable ASCII, cut or
// space-padded to n bytes, as INQUIRY's fixed fields require.
func padded(s, def string, n int) []byte {
	if s == "" {
		s = def
	}
	b := []byte(printable(s, n))
	for len(b) < n {
		b = append(b, ' ')
	}
	return b
}

// printable keeps SPC's allowed ASCII (20h-7Eh), replacing anything else
// with '_', cut to n bytes when n > 0.
func printable(s string, n int) string {
	b := []byte(s)
	if n > 0 && len(b) > n {
		b = b[:n]
	}
	if len(b) > 250 {
		b = b[:250]
	}
	for i, c := range b {
		if c < 0x20 || c > 0x7E {
			b[i] = '_'
		}
	}
	return string(b)
}
