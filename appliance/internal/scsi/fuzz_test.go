package scsi

import (
	"bytes"
	"context"
	"runtime"
	"testing"

	"github.com/cairn-storage/cairn/appliance/internal/blockdev"
)

// fuzzVolumeSize keeps the MemVolume small, so whatever a CDB asks for,
// the volume's own allocations stay small too.
const fuzzVolumeSize = 256 << 10

// maxFuzzAlloc is what one command may allocate beyond its buffers: the
// 1 MiB VERIFY buffer and the MemVolume's own work over at most the whole
// (256 KiB) volume, with room for the runtime.
const maxFuzzAlloc = 8 << 20

// FuzzExecute feeds arbitrary CDBs, data-out and data-in sizes to a LUN:
// it must never panic, must answer GOOD or CHECK CONDITION with 18 bytes of
// fixed-format sense, never claim more data-in than the buffer holds, never
// allocate in proportion to a length field instead of the buffers it was
// given, and never change a read-only LUN's volume. Seeds: every supported
// command (f.Add below) plus testdata/fuzz/FuzzExecute.
func FuzzExecute(f *testing.F) {
	for _, s := range fuzzSeeds() {
		f.Add(s.cdb, s.dataOut, s.inLen)
	}
	f.Fuzz(func(t *testing.T, cdb, dataOut []byte, inLen uint16) {
		ctx := context.Background()
		vol := blockdev.NewMemVolume("fuzz", 1, fuzzVolumeSize)
		other := blockdev.NewMemVolume("other", 2, fuzzVolumeSize)
		seed := bytes.Repeat([]byte{0xA5}, 16<<10)
		if err := vol.WriteAt(ctx, seed, 0, 0); err != nil {
			t.Fatal(err)
		}
		resolve := func(wwn [16]byte) (blockdev.Volume, bool) { return other, wwn == other.WWN() }

		l := NewLUN(vol, Options{Resolve: resolve, GroupPorts: []uint16{1, 2}})
		in := make([]byte, int(inLen))
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		resp := l.Execute(ctx, cdb, dataOut, in)
		runtime.ReadMemStats(&after)
		checkResponse(t, resp, len(in))
		if grew := after.TotalAlloc - before.TotalAlloc; grew > uint64(2*len(dataOut)+len(cdb))+maxFuzzAlloc {
			t.Fatalf("one command allocated %d bytes with %d bytes of data-out", grew, len(dataOut))
		}

		// The same command on a read-only LUN leaves the volume as it was.
		ro := blockdev.NewMemVolume("ro", 3, fuzzVolumeSize)
		if err := ro.WriteAt(ctx, seed, 0, 0); err != nil {
			t.Fatal(err)
		}
		want := make([]byte, fuzzVolumeSize)
		if err := ro.ReadAt(ctx, want, 0); err != nil {
			t.Fatal(err)
		}
		resp = NewLUN(ro, Options{ReadOnly: true}).Execute(ctx, cdb, dataOut, make([]byte, int(inLen)))
		checkResponse(t, resp, int(inLen))
		got := make([]byte, fuzzVolumeSize)
		if err := ro.ReadAt(ctx, got, 0); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("CDB % x changed a read-only volume", cdb)
		}
	})
}

func checkResponse(t *testing.T, resp Response, inLen int) {
	t.Helper()
	switch resp.Status {
	case StatusGood:
		if resp.Sense != nil || resp.DataInLen < 0 || resp.DataInLen > inLen {
			t.Fatalf("GOOD with sense %x and %d of %d data-in bytes", resp.Sense, resp.DataInLen, inLen)
		}
	case StatusCheckCondition:
		if len(resp.Sense) != fixedSenseLen || resp.Sense[0]&0x7F != 0x70 || resp.DataInLen != 0 {
			t.Fatalf("CHECK CONDITION with sense % x and %d data-in bytes", resp.Sense, resp.DataInLen)
		}
	default:
		t.Fatalf("status %#x", resp.Status)
	}
}

type fuzzSeed struct {
	cdb, dataOut []byte
	inLen        uint16
}

// fuzzSeeds is one well-formed command of every kind, so the fuzzer starts
// inside each parser.
func fuzzSeeds() []fuzzSeed {
	blk := bytes.Repeat([]byte{0xA5}, BlockSize)
	self := blockdev.NewMemVolume("fuzz", 1, fuzzVolumeSize).WWN()
	other := blockdev.NewMemVolume("other", 2, fuzzVolumeSize).WWN()
	xlist := xcopyList(1, 0, [][]byte{identCSCD(self), identCSCD(other)}, [][]byte{b2bSegment(0, 1, 16, 0, 32)})
	modeParam := []byte{0, 0, 0, 0, 0x0A, 0x0A, 0x02, 0x10, 0, 0, 0, 0, 0xFF, 0xFF, 0, 0}
	return []fuzzSeed{
		{[]byte{opTestUnitReady, 0, 0, 0, 0, 0}, nil, 0},
		{[]byte{opRequestSense, 0, 0, 0, 252, 0}, nil, 252},
		{inquiryCDB(false, 0, 255), nil, 255},
		{inquiryCDB(true, 0x83, 255), nil, 255},
		{inquiryCDB(true, 0x8F, 1024), nil, 1024},
		{inquiryCDB(true, 0xB0, 64), nil, 64},
		{cdb6(opRead6, 1, 2), nil, 1024},
		{cdb6(opWrite6, 1, 1), blk, 0},
		{cdb10(opRead10, 0x18, 8, 4), nil, 2048},
		{cdb10(opWrite10, 0x08, 8, 1), blk, 0},
		{cdb12(opRead12, 0, 2040, 8), nil, 4096},
		{cdb16(opWrite16, 0, 100, 2), append(blk, blk...), 0},
		{cdb10(opVerify10, 0x02, 0, 1), blk, 0},
		{cdb16(opVerify16, 0x06, 0, 64), blk, 0},
		{cdb16(opVerify16, 0x00, 0, 0xFFFFFFFF), nil, 0},
		{cdb10(opWriteAndVerify10, 0x02, 3, 1), blk, 0},
		{cawCDB(0, 0, 1), append(blk, blk...), 0},
		{cdb10(opWriteSame10, 0x08, 0, 0), make([]byte, BlockSize), 0},
		{cdb16(opWriteSame16, 0x09, 16, 2048), nil, 0},
		{cdb16(opWriteSame16, 0, 16, 16), blk, 0},
		{unmapCDB(40), unmapList([2]uint64{0, 8}, [2]uint64{64, 2048}), 0},
		{getLBAStatusCDB(0, 4096), nil, 4096},
		{cdb16(opServiceActionIn16, saReadCapacity16, 0, 32), nil, 32},
		{[]byte{opReadCapacity10, 0, 0, 0, 0, 0, 0, 0, 0, 0}, nil, 8},
		{cdb10(opSyncCache10, 0, 0, 0), nil, 0},
		{cdb16(opPrefetch16, 0, 0, 8), nil, 0},
		{modeSense6(false, 0, 0x3F, 0, 255), nil, 255},
		{modeSense10(true, false, 1, 0x3F, 1024), nil, 1024},
		{[]byte{opModeSelect6, 0x10, 0, 0, byte(len(modeParam)), 0}, modeParam, 0},
		{rsocCDB(true, 0, 0, 0, 65535), nil, 8192},
		{rsocCDB(false, 2, opServiceActionIn16, saGetLBAStatus, 512), nil, 512},
		{rtpgCDB(1, 1024), nil, 1024},
		{[]byte{opReportLUNs, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0}, nil, 256},
		{xcopyCDB(uint32(len(xlist))), xlist, 0},
		{rcrCDB(saOperatingParams, 0, 1024), nil, 1024},
		{rcrCDB(saCopyStatus, 1, 1024), nil, 1024},
	}
}
