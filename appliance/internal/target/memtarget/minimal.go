package main

import (
	"context"
	"encoding/binary"

	"github.com/cairn-storage/cairn/appliance/internal/blockdev"
	"github.com/cairn-storage/cairn/appliance/internal/tcmu"
)

// minimal answers just enough SCSI (INQUIRY, READ CAPACITY, READ/WRITE
// 10/16, TEST UNIT READY) to check the ring end to end with results a test
// can verify: data written through LIO reads back. It is not Cairn's SCSI
// layer (internal/scsi); the conformance run uses that.
type minimal struct{ vol blockdev.Volume }

func checkCondition(key, asc byte) tcmu.Result {
	return tcmu.Result{Status: 2, Sense: []byte{0x70, 0, key, 0, 0, 0, 0, 10, 0, 0, 0, 0, asc, 0}}
}

func (m minimal) HandleCommand(ctx context.Context, cdb, out, in []byte) tcmu.Result {
	be := binary.BigEndian
	switch cdb[0] {
	case 0x00: // TEST UNIT READY
		return tcmu.Result{}
	case 0x12: // INQUIRY, standard data only
		if cdb[1]&1 != 0 {
			return checkCondition(5, 0x24)
		}
		d := make([]byte, 36)
		d[2], d[3], d[4] = 6, 2, 31
		copy(d[8:], "CAIRN   MEMTARGET       0001")
		return tcmu.Result{DataInLen: copy(in, d)}
	case 0x25: // READ CAPACITY(10)
		d := make([]byte, 8)
		be.PutUint32(d, uint32(m.vol.Size()/512-1))
		be.PutUint32(d[4:], 512)
		return tcmu.Result{DataInLen: copy(in, d)}
	case 0x9e: // READ CAPACITY(16)
		d := make([]byte, 32)
		be.PutUint64(d, uint64(m.vol.Size()/512-1))
		be.PutUint32(d[8:], 512)
		return tcmu.Result{DataInLen: copy(in, d)}
	case 0x28, 0x2a, 0x88, 0x8a: // READ/WRITE 10/16
		var lba uint64
		var n uint32
		if cdb[0] < 0x80 {
			lba, n = uint64(be.Uint32(cdb[2:])), uint32(be.Uint16(cdb[7:]))
		} else {
			lba, n = be.Uint64(cdb[2:]), be.Uint32(cdb[10:])
		}
		off, length := int64(lba)*512, int64(n)*512
		if off+length > m.vol.Size() {
			return checkCondition(5, 0x21)
		}
		var err error
		if cdb[0] == 0x28 || cdb[0] == 0x88 {
			if int64(len(in)) < length {
				return checkCondition(5, 0x24)
			}
			err = m.vol.ReadAt(ctx, in[:length], off)
		} else {
			if int64(len(out)) < length {
				return checkCondition(5, 0x24)
			}
			err = m.vol.WriteAt(ctx, out[:length], off, 0)
		}
		if err != nil {
			return checkCondition(3, 0x11)
		}
		if cdb[0] == 0x28 || cdb[0] == 0x88 {
			return tcmu.Result{DataInLen: int(length)}
		}
		return tcmu.Result{}
	default:
		return checkCondition(5, 0x20) // INVALID COMMAND OPERATION CODE
	}
}
