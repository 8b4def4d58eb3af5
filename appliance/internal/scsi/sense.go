package scsi

// SCSI status codes (SAM-5).
const (
	StatusGood           = 0x00
	StatusCheckCondition = 0x02
)

// Sense keys (SPC-4 table 27).
const (
	keyNoSense        = 0x00
	keyNotReady       = 0x02
	keyMediumError    = 0x03
	keyHardwareError  = 0x04
	keyIllegalRequest = 0x05
	keyDataProtect    = 0x07
	keyCopyAborted    = 0x0A
	keyAbortedCommand = 0x0B
	keyMiscompare     = 0x0E
)

// Additional sense codes, ASC in the high byte and ASCQ in the low byte
// (SPC-4 table 28).
const (
	ascNoAdditionalSense           = 0x0000
	ascNotAccessibleTransition     = 0x040A // logical unit not accessible, asymmetric access state transition
	ascUnreachableCopyTarget       = 0x0804
	ascCommunicationTimeout        = 0x0801
	ascWriteError                  = 0x0C00
	ascThirdPartyDeviceFailure     = 0x0D01
	ascCopyTargetNotReachable      = 0x0D02
	ascInvalidFieldInIU            = 0x0E03 // invalid field in command information unit
	ascUnrecoveredReadError        = 0x1100
	ascParameterListLength         = 0x1A00
	ascMiscompareDuringVerify      = 0x1D00
	ascInvalidOpcode               = 0x2000
	ascLBAOutOfRange               = 0x2100
	ascInvalidFieldInCDB           = 0x2400
	ascInvalidFieldInParameterList = 0x2600
	ascTooManyTargetDescriptors    = 0x2606
	ascUnsupportedTargetDescriptor = 0x2607
	ascTooManySegmentDescriptors   = 0x2608
	ascUnsupportedSegmentDescType  = 0x2609
	ascWriteProtected              = 0x2700
	ascSavingParamsNotSupported    = 0x3900
	ascInternalTargetFailure       = 0x4400
)

// fixedSenseLen is the length of the fixed-format sense data we return
// (response code 70h, additional sense length 10).
const fixedSenseLen = 18

// checkCondition is why a command ends in CHECK CONDITION. It becomes
// fixed-format sense data (SPC-4 4.5.3): the control mode page reports
// D_SENSE=0, so every error is described in this format.
type checkCondition struct {
	key  byte
	code uint16 // ASC<<8 | ASCQ

	// info is the INFORMATION field (VALID=1 when infoValid): the LBA or
	// byte offset the error refers to.
	info      uint32
	infoValid bool
	// csi is the COMMAND-SPECIFIC INFORMATION field (for COPY ABORTED: the
	// number of the segment descriptor being processed).
	csi uint32
	// sks is the sense-key specific field (bytes 15-17) when sks[0]&0x80
	// (SKSV) is set.
	sks [3]byte
}

// sense encodes c as 18 bytes of fixed-format sense data:
//
//	byte 0     VALID | response code 70h (current error)
//	byte 2     sense key
//	bytes 3-6  INFORMATION
//	byte 7     additional sense length (10)
//	bytes 8-11 COMMAND-SPECIFIC INFORMATION
//	bytes 12-13 ASC, ASCQ
//	bytes 15-17 SKSV | sense-key specific
func (c *checkCondition) sense() []byte {
	b := make([]byte, fixedSenseLen)
	b[0] = 0x70
	if c.infoValid {
		b[0] |= 0x80
		put32(b[3:], c.info)
	}
	b[2] = c.key
	b[7] = fixedSenseLen - 8
	put32(b[8:], c.csi)
	b[12] = byte(c.code >> 8)
	b[13] = byte(c.code)
	copy(b[15:], c.sks[:])
	return b
}

func newCC(key byte, code uint16) *checkCondition {
	return &checkCondition{key: key, code: code}
}

// fieldPointer fills the sense-key specific field with a field pointer
// (SPC-4 4.5.2.4.2): cd says whether it points into the CDB (true) or the
// parameter data; bit < 0 means no bit pointer.
func (c *checkCondition) fieldPointer(cd bool, byteIdx, bit int) *checkCondition {
	c.sks[0] = 0x80
	if cd {
		c.sks[0] |= 0x40
	}
	if bit >= 0 && bit <= 7 {
		c.sks[0] |= 0x08 | byte(bit)
	}
	c.sks[1] = byte(byteIdx >> 8)
	c.sks[2] = byte(byteIdx)
	return c
}

// invalidCDB is ILLEGAL REQUEST, INVALID FIELD IN CDB pointing at byte
// byteIdx (and bit, or -1) of the CDB.
func invalidCDB(byteIdx, bit int) *checkCondition {
	return newCC(keyIllegalRequest, ascInvalidFieldInCDB).fieldPointer(true, byteIdx, bit)
}

// invalidParam is ILLEGAL REQUEST, INVALID FIELD IN PARAMETER LIST pointing
// at byte byteIdx (and bit, or -1) of the parameter data.
func invalidParam(byteIdx, bit int) *checkCondition {
	return newCC(keyIllegalRequest, ascInvalidFieldInParameterList).fieldPointer(false, byteIdx, bit)
}

func paramListLengthError() *checkCondition {
	return newCC(keyIllegalRequest, ascParameterListLength)
}

func lbaOutOfRange() *checkCondition {
	return newCC(keyIllegalRequest, ascLBAOutOfRange)
}

func writeProtected() *checkCondition {
	return newCC(keyDataProtect, ascWriteProtected)
}

// miscompare is MISCOMPARE, MISCOMPARE DURING VERIFY OPERATION with the
// INFORMATION field set to the byte offset of the first difference
// (SBC-3 5.2 and 5.22).
func miscompare(offset int64) *checkCondition {
	c := newCC(keyMiscompare, ascMiscompareDuringVerify)
	if offset >= 0 && offset <= 0xFFFFFFFF {
		c.info, c.infoValid = uint32(offset), true
	}
	return c
}

// copyAborted is COPY ABORTED for EXTENDED COPY segment segIdx, with a
// segment pointer to byte field of that segment descriptor (SPC-4
// 4.5.2.4.5).
func copyAborted(code uint16, segIdx, field int) *checkCondition {
	c := newCC(keyCopyAborted, code)
	c.csi = uint32(segIdx)
	c.sks[0] = 0x80 | 0x20 // SKSV, SD: the field pointer is relative to the segment descriptor
	c.sks[1] = byte(field >> 8)
	c.sks[2] = byte(field)
	return c
}

// senseName describes a sense key and ASC/ASCQ for logs and test failures.
func senseName(key byte, code uint16) string {
	keys := map[byte]string{
		keyNoSense: "NO SENSE", keyNotReady: "NOT READY", keyMediumError: "MEDIUM ERROR",
		keyHardwareError: "HARDWARE ERROR", keyIllegalRequest: "ILLEGAL REQUEST",
		keyDataProtect: "DATA PROTECT", keyCopyAborted: "COPY ABORTED",
		keyAbortedCommand: "ABORTED COMMAND", keyMiscompare: "MISCOMPARE",
	}
	k, ok := keys[key]
	if !ok {
		k = "sense key " + hex8(key)
	}
	return k + " " + hex8(byte(code>>8)) + "/" + hex8(byte(code))
}

func hex8(b byte) string {
	const digits = "0123456789abcdef"
	return "0x" + string([]byte{digits[b>>4], digits[b&15]})
}
