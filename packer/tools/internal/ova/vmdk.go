// Package ova builds and checks OVA archives: a POSIX ustar tar holding the OVF
// descriptor first, then the SHA256 manifest, then the disks in References order.
package ova

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
)

// VMDK sparse extent header (VMware "Virtual Disk Format 5.0", SparseExtentHeader),
// little endian, first 512-byte sector of the file:
//
//	off size field
//	  0   4  magicNumber        "KDMV" (0x564d444b)
//	  4   4  version            3 for streamOptimized
//	  8   4  flags              bit 16 compressed grains, bit 17 embedded markers
//	 12   8  capacity           sectors
//	 20   8  grainSize          sectors
//	 28   8  descriptorOffset   sectors
//	 36   8  descriptorSize     sectors
//	 44   4  numGTEsPerGT
//	 48   8  rgdOffset
//	 56   8  gdOffset           0xffffffffffffffff (GD_AT_END) in a stream header
//	 64   8  overHead
//	 72   1  uncleanShutdown
//	 73   4  "\n \r\n"           line-end detection characters
//	 77   2  compressAlgorithm  1 = deflate
type VMDKHeader struct {
	Version           uint32
	Flags             uint32
	CapacitySectors   uint64
	GrainSectors      uint64
	DescriptorOffset  uint64
	DescriptorSize    uint64
	GDOffset          uint64
	CompressAlgorithm uint16
	CreateType        string // from the embedded descriptor
}

const (
	vmdkMagic          = 0x564d444b
	flagCompressed     = 1 << 16
	flagMarkers        = 1 << 17
	compressionDeflate = 1
	sector             = 512
)

var createTypeRE = regexp.MustCompile(`(?m)^createType="([A-Za-z]+)"`)

// ParseVMDKHeader decodes the sparse header and embedded descriptor from the first
// bytes of a VMDK (head must cover the descriptor: 64 KiB is plenty for qemu-img's).
func ParseVMDKHeader(head []byte) (*VMDKHeader, error) {
	if len(head) < sector {
		return nil, errors.New("vmdk: shorter than one sector")
	}
	le := binary.LittleEndian
	if le.Uint32(head[0:]) != vmdkMagic {
		return nil, fmt.Errorf("vmdk: magic %q, want \"KDMV\" (not a sparse VMDK)", head[0:4])
	}
	h := &VMDKHeader{
		Version:           le.Uint32(head[4:]),
		Flags:             le.Uint32(head[8:]),
		CapacitySectors:   le.Uint64(head[12:]),
		GrainSectors:      le.Uint64(head[20:]),
		DescriptorOffset:  le.Uint64(head[28:]),
		DescriptorSize:    le.Uint64(head[36:]),
		GDOffset:          le.Uint64(head[56:]),
		CompressAlgorithm: le.Uint16(head[77:]),
	}
	if h.DescriptorOffset == 0 || h.DescriptorSize == 0 || h.DescriptorSize > 64 {
		return h, fmt.Errorf("vmdk: no usable embedded descriptor (offset %d, %d sectors)", h.DescriptorOffset, h.DescriptorSize)
	}
	start, end := h.DescriptorOffset*sector, (h.DescriptorOffset+h.DescriptorSize)*sector
	if end > uint64(len(head)) {
		return h, fmt.Errorf("vmdk: descriptor at bytes %d-%d lies beyond the %d bytes read", start, end, len(head))
	}
	desc := head[start:end]
	if i := bytes.IndexByte(desc, 0); i >= 0 {
		desc = desc[:i]
	}
	if m := createTypeRE.FindSubmatch(desc); m != nil {
		h.CreateType = string(m[1])
	}
	return h, nil
}

// CheckStreamOptimized reports what keeps h from being a streamOptimized VMDK as
// vSphere imports it.
func (h *VMDKHeader) CheckStreamOptimized() []string {
	var p []string
	if h.CreateType != "streamOptimized" {
		p = append(p, fmt.Sprintf("createType is %q, want streamOptimized", h.CreateType))
	}
	if h.Version != 3 {
		p = append(p, fmt.Sprintf("sparse header version %d, want 3", h.Version))
	}
	if h.Flags&flagCompressed == 0 || h.Flags&flagMarkers == 0 {
		p = append(p, fmt.Sprintf("flags %#x lack compressed grains and markers", h.Flags))
	}
	if h.CompressAlgorithm != compressionDeflate {
		p = append(p, fmt.Sprintf("compression algorithm %d, want 1 (deflate)", h.CompressAlgorithm))
	}
	if h.CapacitySectors == 0 {
		p = append(p, "capacity is 0")
	}
	return p
}

// gdAtEnd in the header's gdOffset means "grain directory location is in the footer".
const gdAtEnd = 0xffffffffffffffff

// checkStreamEnd checks that the stream is complete. Two layouts exist: VMware's
// (header gdOffset = GD_AT_END; the file ends with a footer marker, a footer header and
// an all-zero end-of-stream marker) and qemu-img's (the header holds the real gdOffset,
// the grain directory sits at that sector, the file is zero-padded to a grain). tail is
// the last bytes of the file (at least 1536), size its length.
func (h *VMDKHeader) checkStreamEnd(tail []byte, size int64) []string {
	if size%sector != 0 {
		return []string{fmt.Sprintf("file size %d is not a multiple of 512: truncated stream?", size)}
	}
	if h.GDOffset != gdAtEnd {
		if int64(h.GDOffset+1)*sector > size {
			return []string{fmt.Sprintf("grain directory at sector %d lies beyond the end of the %d-byte file: truncated stream?", h.GDOffset, size)}
		}
		return nil
	}
	if len(tail) < 3*sector {
		return []string{"file too short for footer and end-of-stream marker: truncated stream?"}
	}
	tail = tail[len(tail)-3*sector:]
	var p []string
	if binary.LittleEndian.Uint32(tail[sector:]) != vmdkMagic {
		p = append(p, "no footer header (KDMV) before the end-of-stream marker: truncated stream?")
	}
	if !bytes.Equal(tail[2*sector:], make([]byte, sector)) {
		p = append(p, "last sector is not an end-of-stream marker: truncated stream?")
	}
	return p
}

// ReadVMDKFile reads the header of a VMDK file on disk.
func ReadVMDKFile(path string) (*VMDKHeader, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	head := make([]byte, 64<<10)
	n, err := io.ReadFull(f, head)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	h, err := ParseVMDKHeader(head[:n])
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return h, nil
}
