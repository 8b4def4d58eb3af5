package scsi

import "context"

// Mode pages (SPC-4 7.5, SBC-3 6.4). None of their fields is changeable:
// the caching behaviour is the data plane's (a volatile write cache that
// SYNCHRONIZE CACHE and FUA flush), not a per-SVM setting, and a setting
// changed through one SVM could not reach the others.
const (
	pageCaching              = 0x08
	pageControl              = 0x0A
	pageInformationalExcepts = 0x1C
	pageAll                  = 0x3F
)

// modePageCodes lists the pages in the order MODE SENSE returns them.
var modePageCodes = []byte{pageCaching, pageControl, pageInformationalExcepts}

// modePage returns page code's current values (header included), or nil
// for an unknown page.
func modePage(code byte) []byte {
	switch code {
	case pageCaching:
		p := make([]byte, 20)
		p[0], p[1] = pageCaching, 0x12
		p[2] = 0x04 // WCE: writes are cached until SYNCHRONIZE CACHE or FUA
		return p
	case pageControl:
		p := make([]byte, 12)
		p[0], p[1] = pageControl, 0x0A
		// TST=0, D_SENSE=0 (fixed-format sense), GLTSD=1 (no log pages).
		p[2] = 0x02
		// QUEUE ALGORITHM MODIFIER 1: commands may be reordered; QERR=0.
		p[3] = 0x10
		put16(p[8:], 0xFFFF) // BUSY TIMEOUT PERIOD: unlimited
		return p
	case pageInformationalExcepts:
		p := make([]byte, 12)
		p[0], p[1] = pageInformationalExcepts, 0x0A
		p[2] = 0x08 // DEXCPT: no informational exception reporting
		return p
	}
	return nil
}

// changeableMask is PC=01b: the page with every changeable bit set. None
// are, so it is the header over zeros.
func changeableMask(code byte) []byte {
	p := modePage(code)
	clear(p[2:])
	return p
}

// modeSense serves MODE SENSE(6) and MODE SENSE(10).
func (l *LUN) modeSense(_ context.Context, r *request) (int, *checkCondition) {
	cdb := r.cdb
	ten := cdb[0] == opModeSense10
	dbd := cdb[1]&0x08 != 0
	llbaa := ten && cdb[1]&0x10 != 0
	pc := cdb[2] >> 6
	code := cdb[2] & 0x3F
	sub := cdb[3]
	var alloc uint32
	if ten {
		alloc = uint32(be16(cdb[7:]))
	} else {
		alloc = uint32(cdb[4])
	}
	if pc == 3 {
		return 0, newCC(keyIllegalRequest, ascSavingParamsNotSupported).fieldPointer(true, 2, 7)
	}
	var codes []byte
	switch {
	case code == pageAll && (sub == 0x00 || sub == 0xFF):
		codes = modePageCodes
	case modePage(code) != nil && (sub == 0x00 || sub == 0xFF):
		codes = []byte{code}
	case modePage(code) != nil || code == pageAll:
		return 0, invalidCDB(3, -1)
	default:
		return 0, invalidCDB(2, 5)
	}
	var pages []byte
	for _, c := range codes {
		if pc == 1 {
			pages = append(pages, changeableMask(c)...)
		} else {
			pages = append(pages, modePage(c)...) // current and default are the same
		}
	}

	// Block descriptor: 8-byte short or, with LLBAA, 16-byte long LBA.
	var bd []byte
	if !dbd {
		nb := l.numBlocks()
		if llbaa {
			bd = make([]byte, 16)
			put64(bd[0:], nb)
			put32(bd[12:], BlockSize)
		} else {
			bd = make([]byte, 8)
			put32(bd[0:], uint32(min(nb, 0xFFFFFFFF)))
			put32(bd[4:], BlockSize) // density code 0, 24-bit block length
		}
	}
	devSpecific := byte(0x10) // DPOFUA: DPO and FUA are supported
	if l.opts.ReadOnly {
		devSpecific |= 0x80 // WP
	}
	var out []byte
	if ten {
		out = make([]byte, 8, 8+len(bd)+len(pages))
		out[3] = devSpecific
		if llbaa && bd != nil {
			out[4] = 0x01 // LONGLBA
		}
		put16(out[6:], uint16(len(bd)))
	} else {
		out = make([]byte, 4, 4+len(bd)+len(pages))
		out[2] = devSpecific
		out[3] = byte(len(bd))
	}
	out = append(out, bd...)
	out = append(out, pages...)
	if ten {
		put16(out[0:], uint16(len(out)-2))
	} else {
		out[0] = byte(len(out) - 1)
	}
	return r.reply(out, alloc), nil
}

// modeSelect serves MODE SELECT(6) and MODE SELECT(10). Nothing is
// changeable, so a parameter list is accepted when it restates the current
// values (what initiators do after MODE SENSE) and rejected with INVALID
// FIELD IN PARAMETER LIST, pointing at the first changed bit, otherwise.
func (l *LUN) modeSelect(_ context.Context, r *request) (int, *checkCondition) {
	cdb := r.cdb
	ten := cdb[0] == opModeSelect10
	if cdb[1]&0x01 != 0 { // SP: saving pages is not supported
		return 0, invalidCDB(1, 0)
	}
	var paramLen int
	if ten {
		paramLen = int(be16(cdb[7:]))
	} else {
		paramLen = int(cdb[4])
	}
	if paramLen == 0 {
		return 0, nil
	}
	p := r.dataOut[:min(paramLen, len(r.dataOut))]
	hdrLen := 4
	if ten {
		hdrLen = 8
	}
	if len(p) < hdrLen {
		return 0, paramListLengthError()
	}
	var bdLen int
	longLBA := false
	if ten {
		if p[2] != 0 {
			return 0, invalidParam(2, -1) // MEDIUM TYPE
		}
		longLBA = p[4]&0x01 != 0
		bdLen = int(be16(p[6:]))
	} else {
		if p[1] != 0 {
			return 0, invalidParam(1, -1)
		}
		bdLen = int(p[3])
	}
	pos := hdrLen
	switch {
	case bdLen == 0:
	case !longLBA && bdLen == 8, longLBA && bdLen == 16:
		if pos+bdLen > len(p) {
			return 0, paramListLengthError()
		}
		bd := p[pos : pos+bdLen]
		// The capacity cannot be changed here: NUMBER OF BLOCKS must be 0
		// (no change) or the current one; the block length must be 512.
		var blocks uint64
		var blen uint32
		if longLBA {
			blocks, blen = be64(bd), be32(bd[12:])
		} else {
			blocks, blen = uint64(be32(bd)), be32(bd[4:])&0xFFFFFF
		}
		nb := l.numBlocks()
		if blocks != 0 && blocks != nb && !(!longLBA && nb > 0xFFFFFFFF && blocks == 0xFFFFFFFF) {
			return 0, invalidParam(pos, -1)
		}
		if blen != BlockSize {
			return 0, invalidParam(pos+bdLen-3, -1)
		}
		pos += bdLen
	default:
		return 0, invalidParam(hdrLen-1, -1)
	}
	for pos < len(p) {
		if p[pos]&0x80 != 0 { // PS is reserved in MODE SELECT
			return 0, invalidParam(pos, 7)
		}
		if p[pos]&0x40 != 0 { // SPF: no subpages are implemented
			return 0, invalidParam(pos, 6)
		}
		if pos+2 > len(p) {
			return 0, paramListLengthError()
		}
		code := p[pos] & 0x3F
		cur := modePage(code)
		if cur == nil {
			return 0, invalidParam(pos, 5)
		}
		if int(p[pos+1]) != len(cur)-2 {
			return 0, invalidParam(pos+1, -1)
		}
		if pos+len(cur) > len(p) {
			return 0, paramListLengthError()
		}
		mask := changeableMask(code)
		for i := 2; i < len(cur); i++ {
			if bad := (p[pos+i] ^ cur[i]) &^ mask[i]; bad != 0 {
				return 0, invalidParam(pos+i, highBit(bad))
			}
		}
		pos += len(cur)
	}
	return 0, nil
}
