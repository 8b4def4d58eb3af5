package blockdev

import "encoding/binary"

// AllZero reports whether every byte of b is zero. It is the one test the
// data plane uses to turn a write of zeroes into an unmap (client), to answer
// WRITE SAME with a zero pattern (scsi) and to recognise a blank device
// (sds). It reads eight bytes at a time: the buffers it sees are 4 KiB to
// 1 MiB, and a byte loop over them showed in profiles of zero-fill writes.
func AllZero(b []byte) bool {
	for len(b) >= 8 {
		if binary.LittleEndian.Uint64(b) != 0 {
			return false
		}
		b = b[8:]
	}
	for _, x := range b {
		if x != 0 {
			return false
		}
	}
	return true
}
