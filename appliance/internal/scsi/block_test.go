package scsi

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"

	"github.com/cairn-storage/cairn/appliance/internal/blockdev"
)

// rwCase builds the READ and WRITE CDBs of one size.
type rwCase struct {
	name        string
	read, write func(lba uint64, n uint32, flags byte) []byte
	maxLBA      uint64
	hasFlags    bool
}

var rwCases = []rwCase{
	{"6", func(lba uint64, n uint32, _ byte) []byte { return cdb6(opRead6, uint32(lba), byte(n)) },
		func(lba uint64, n uint32, _ byte) []byte { return cdb6(opWrite6, uint32(lba), byte(n)) }, 0x1FFFFF, false},
	{"10", func(lba uint64, n uint32, f byte) []byte { return cdb10(opRead10, f, uint32(lba), uint16(n)) },
		func(lba uint64, n uint32, f byte) []byte { return cdb10(opWrite10, f, uint32(lba), uint16(n)) }, 0xFFFFFFFF, true},
	{"12", func(lba uint64, n uint32, f byte) []byte { return cdb12(opRead12, f, uint32(lba), n) },
		func(lba uint64, n uint32, f byte) []byte { return cdb12(opWrite12, f, uint32(lba), n) }, 0xFFFFFFFF, true},
	{"16", func(lba uint64, n uint32, f byte) []byte { return cdb16(opRead16, f, lba, n) },
		func(lba uint64, n uint32, f byte) []byte { return cdb16(opWrite16, f, lba, n) }, ^uint64(0), true},
}

func TestReadWriteRoundTrip(t *testing.T) {
	for _, c := range rwCases {
		t.Run(c.name, func(t *testing.T) {
			l, v := newTestLUN(t, Options{})
			for _, at := range []struct {
				lba uint64
				n   uint32
			}{{0, 1}, {7, 3}, {100, 255}, {testBlocks - 17, 17}, {testBlocks - 1, 1}} {
				data := make([]byte, int(at.n)*BlockSize)
				for i := range data {
					data[i] = byte(i*7 + int(at.lba))
				}
				mustGood(t, run(l, c.write(at.lba, at.n, 0), data, 0))
				if got := readBack(t, v, at.lba, int(at.n)); !bytes.Equal(got, data) {
					t.Fatalf("lba %d: volume holds different data than written", at.lba)
				}
				r := run(l, c.read(at.lba, at.n, 0), nil, len(data))
				mustGood(t, r)
				if !bytes.Equal(r.data, data) {
					t.Fatalf("lba %d: READ returned different data", at.lba)
				}
			}
		})
	}
}

func TestRead6ZeroMeans256(t *testing.T) {
	l, _ := newTestLUN(t, Options{})
	r := run(l, cdb6(opRead6, 0, 0), nil, 256*BlockSize)
	mustGood(t, r)
	if r.DataInLen != 256*BlockSize {
		t.Fatalf("READ(6) with length 0 returned %d bytes, want 256 blocks", r.DataInLen)
	}
}

func TestReadWriteOutOfRange(t *testing.T) {
	for _, c := range rwCases {
		t.Run(c.name, func(t *testing.T) {
			l, _ := newTestLUN(t, Options{})
			for _, at := range []struct {
				lba uint64
				n   uint32
			}{{testBlocks, 1}, {testBlocks - 1, 2}, {testBlocks + 1, 1}, {c.maxLBA, 1}} {
				if c.name == "6" && at.lba > 0x1FFFFF {
					continue
				}
				mustSense(t, run(l, c.read(at.lba, at.n, 0), nil, int(at.n)*BlockSize), keyIllegalRequest, ascLBAOutOfRange)
				mustSense(t, run(l, c.write(at.lba, at.n, 0), make([]byte, int(at.n)*BlockSize), 0), keyIllegalRequest, ascLBAOutOfRange)
			}
			if c.name == "6" {
				return // READ(6) cannot express zero blocks
			}
			// Zero blocks: fine up to the capacity, out of range beyond it.
			mustGood(t, run(l, c.read(0, 0, 0), nil, 0))
			mustGood(t, run(l, c.read(testBlocks, 0, 0), nil, 0))
			mustSense(t, run(l, c.read(testBlocks+1, 0, 0), nil, 0), keyIllegalRequest, ascLBAOutOfRange)
			mustSense(t, run(l, c.write(testBlocks+1, 0, 0), nil, 0), keyIllegalRequest, ascLBAOutOfRange)
		})
	}
}

func TestWriteFlags(t *testing.T) {
	for _, c := range rwCases[1:] {
		t.Run(c.name, func(t *testing.T) {
			l, v := newTestLUN(t, Options{})
			data := fill(BlockSize, 0xA6)
			for _, f := range []struct {
				flags byte
				want  blockdev.WriteFlags
			}{{0, 0}, {0x10, 0}, {0x08, blockdev.FUA}, {0x18, blockdev.FUA}, {0x02, 0}, {0x0A, blockdev.FUA}} {
				v.flags = nil
				mustGood(t, run(l, c.write(0, 1, f.flags), data, 0))
				if len(v.flags) != 1 || v.flags[0] != f.want {
					t.Fatalf("byte 1 %#x: volume saw flags %v, want %v", f.flags, v.flags, f.want)
				}
				mustGood(t, run(l, c.read(0, 1, f.flags&0x18), nil, BlockSize))
			}
			// RDPROTECT/WRPROTECT: no protection information, so invalid.
			for p := byte(1); p < 8; p++ {
				mustFieldPointer(t, run(l, c.read(0, 1, p<<5), nil, BlockSize), true, 1)
				mustFieldPointer(t, run(l, c.write(0, 1, p<<5), data, 0), true, 1)
			}
		})
	}
}

func TestReadWriteTransferLengthLimit(t *testing.T) {
	l, _ := newTestLUN(t, Options{MaxTransferLength: 16})
	mustGood(t, run(l, cdb10(opRead10, 0, 0, 16), nil, 16*BlockSize))
	mustFieldPointer(t, run(l, cdb10(opRead10, 0, 0, 17), nil, 17*BlockSize), true, 7)
	mustFieldPointer(t, run(l, cdb16(opWrite16, 0, 0, 17), make([]byte, 17*BlockSize), 0), true, 10)
}

// The transport's buffers may differ from what the CDB says (iSCSI
// residuals): only what fits moves, as libiscsi's *Residuals tests expect.
func TestResiduals(t *testing.T) {
	l, v := newTestLUN(t, Options{})
	mustGood(t, run(l, cdb10(opWrite10, 0, 0, 2), fill(2*BlockSize, 'a'), 0))

	// WRITE of 1 block with 2 blocks of data: only the first is written.
	mustGood(t, run(l, cdb10(opWrite10, 0, 0, 1), fill(2*BlockSize, 'b'), 0))
	got := readBack(t, v, 0, 2)
	if !bytes.Equal(got[:BlockSize], fill(BlockSize, 'b')) || !bytes.Equal(got[BlockSize:], fill(BlockSize, 'a')) {
		t.Fatal("WRITE wrote more or less than its transfer length")
	}
	// WRITE of 2 blocks with 1 block of data: the block sent is written.
	mustGood(t, run(l, cdb10(opWrite10, 0, 0, 2), fill(BlockSize, 'c'), 0))
	got = readBack(t, v, 0, 2)
	if !bytes.Equal(got[:BlockSize], fill(BlockSize, 'c')) || !bytes.Equal(got[BlockSize:], fill(BlockSize, 'a')) {
		t.Fatal("short WRITE did not write exactly the data sent")
	}
	// No data at all: nothing written, GOOD.
	mustGood(t, run(l, cdb10(opWrite10, 0, 0, 1), nil, 0))
	// A partial block cannot be written.
	mustSense(t, run(l, cdb10(opWrite10, 0, 0, 1), fill(200, 'd'), 0), keyIllegalRequest, ascInvalidFieldInIU)

	// READ into a short buffer: what fits, including a partial block.
	r := run(l, cdb10(opRead10, 0, 0, 2), nil, 200)
	mustGood(t, r)
	if r.DataInLen != 200 || !bytes.Equal(r.data, fill(200, 'c')) {
		t.Fatalf("short READ returned %d bytes", r.DataInLen)
	}
	r = run(l, cdb10(opRead10, 0, 0, 1), nil, 10000)
	mustGood(t, r)
	if r.DataInLen != BlockSize {
		t.Fatalf("READ of 1 block into a large buffer returned %d bytes", r.DataInLen)
	}
}

func TestReadOnly(t *testing.T) {
	l, v := newTestLUN(t, Options{ReadOnly: true})
	blk := fill(BlockSize, 1)
	for _, c := range []struct {
		name    string
		cdb     []byte
		dataOut []byte
	}{
		{"WRITE(10)", cdb10(opWrite10, 0, 0, 1), blk},
		{"WRITE(16)", cdb16(opWrite16, 0, 0, 1), blk},
		{"WRITE AND VERIFY(10)", cdb10(opWriteAndVerify10, 0x02, 0, 1), blk},
		{"WRITE SAME(10)", cdb10(opWriteSame10, 0, 0, 1), blk},
		{"WRITE SAME(16) UNMAP without data", cdb16(opWriteSame16, 0x08, 0, 1), nil},
		{"COMPARE AND WRITE", cawCDB(0, 0, 1), fill(2*BlockSize, 0)},
		{"UNMAP", unmapCDB(24), unmapList([2]uint64{0, 8})},
	} {
		mustSense(t, run(l, c.cdb, c.dataOut, 0), keyDataProtect, ascWriteProtected)
	}
	if len(v.flags)+len(v.zeroes)+len(v.sames)+len(v.unmaps) != 0 {
		t.Fatal("a read-only LUN modified the volume")
	}
	mustGood(t, run(l, cdb10(opRead10, 0, 0, 1), nil, BlockSize))
	r := run(l, []byte{opModeSense6, 0x08, 0x3F, 0, 255, 0}, nil, 255)
	mustGood(t, r)
	if r.data[2]&0x80 == 0 {
		t.Fatal("MODE SENSE does not report WP on a read-only LUN")
	}
}

func TestVerify(t *testing.T) {
	verifyCDBs := map[string]func(flags byte, lba uint64, n uint32) []byte{
		"10": func(f byte, lba uint64, n uint32) []byte { return cdb10(opVerify10, f, uint32(lba), uint16(n)) },
		"12": func(f byte, lba uint64, n uint32) []byte { return cdb12(opVerify12, f, uint32(lba), n) },
		"16": func(f byte, lba uint64, n uint32) []byte { return cdb16(opVerify16, f, lba, n) },
	}
	for name, mk := range verifyCDBs {
		t.Run(name, func(t *testing.T) {
			l, v := newTestLUN(t, Options{})
			data := make([]byte, 4*BlockSize)
			for i := range data {
				data[i] = byte(i)
			}
			if err := v.WriteAt(context.Background(), data, 10*BlockSize, 0); err != nil {
				t.Fatal(err)
			}
			mustGood(t, run(l, mk(0x02, 10, 4), data, 0))
			// One byte differs: MISCOMPARE with its offset, VALID set.
			bad := append([]byte(nil), data...)
			bad[1234] ^= 'X'
			r := run(l, mk(0x02, 10, 4), bad, 0)
			mustSense(t, r, keyMiscompare, ascMiscompareDuringVerify)
			if r.Sense[0]&0x80 == 0 || binary.BigEndian.Uint32(r.Sense[3:]) != 1234 {
				t.Fatalf("miscompare sense % x: want VALID and INFORMATION 1234", r.Sense)
			}
			// BYTCHK=0 only checks the medium reads: no compare.
			mustGood(t, run(l, mk(0x00, 10, 4), nil, 0))
			// BYTCHK=11b compares every block with one block.
			if err := v.WriteSame(context.Background(), fill(BlockSize, 7), 20*BlockSize, 3*BlockSize); err != nil {
				t.Fatal(err)
			}
			mustGood(t, run(l, mk(0x06, 20, 3), fill(BlockSize, 7), 0))
			r = run(l, mk(0x06, 19, 3), fill(BlockSize, 7), 0)
			mustSense(t, r, keyMiscompare, ascMiscompareDuringVerify)
			if binary.BigEndian.Uint32(r.Sense[3:]) != 0 {
				t.Fatalf("miscompare offset %d, want 0", binary.BigEndian.Uint32(r.Sense[3:]))
			}
			// BYTCHK=10b is reserved; VRPROTECT is unsupported.
			mustFieldPointer(t, run(l, mk(0x04, 0, 1), fill(BlockSize, 0), 0), true, 1)
			mustFieldPointer(t, run(l, mk(0x22, 0, 1), fill(BlockSize, 0), 0), true, 1)
			// Zero blocks: checked against the capacity only.
			mustGood(t, run(l, mk(0x02, testBlocks, 0), nil, 0))
			mustSense(t, run(l, mk(0x02, testBlocks+1, 0), nil, 0), keyIllegalRequest, ascLBAOutOfRange)
			mustSense(t, run(l, mk(0x02, testBlocks-1, 2), fill(2*BlockSize, 0), 0), keyIllegalRequest, ascLBAOutOfRange)
		})
	}
}

func TestWriteAndVerify(t *testing.T) {
	l, v := newTestLUN(t, Options{})
	data := fill(3*BlockSize, 0x5A)
	for _, c := range [][]byte{cdb10(opWriteAndVerify10, 0x02, 5, 3), cdb12(opWriteAndVerify12, 0x12, 5, 3), cdb16(opWriteAndVerify16, 0x00, 5, 3)} {
		v.flags = nil
		mustGood(t, run(l, c, data, 0))
		if !bytes.Equal(readBack(t, v, 5, 3), data) {
			t.Fatal("WRITE AND VERIFY did not write")
		}
		if len(v.flags) != 1 || v.flags[0] != blockdev.FUA {
			t.Fatalf("WRITE AND VERIFY wrote with flags %v, want FUA", v.flags)
		}
		data[0]++
	}
	mustFieldPointer(t, run(l, cdb10(opWriteAndVerify10, 0x06, 5, 1), fill(BlockSize, 0), 0), true, 1)
	mustSense(t, run(l, cdb16(opWriteAndVerify16, 0, testBlocks, 1), fill(BlockSize, 0), 0), keyIllegalRequest, ascLBAOutOfRange)
}

func TestCompareAndWrite(t *testing.T) {
	l, v := newTestLUN(t, Options{})
	ctx := context.Background()
	if err := v.WriteAt(ctx, fill(BlockSize, 'A'), 9*BlockSize, 0); err != nil {
		t.Fatal(err)
	}
	buf := append(fill(BlockSize, 'A'), fill(BlockSize, 'B')...)
	mustGood(t, run(l, cawCDB(0x18, 9, 1), buf, 0)) // DPO and FUA accepted
	if !bytes.Equal(readBack(t, v, 9, 1), fill(BlockSize, 'B')) {
		t.Fatal("COMPARE AND WRITE did not write")
	}
	if v.flags[len(v.flags)-1] != blockdev.FUA {
		t.Fatal("FUA not passed to the volume")
	}

	// Miscompare: nothing written, MISCOMPARE with the byte offset of the
	// first difference in INFORMATION (VALID=1), fixed format.
	cmp := fill(BlockSize, 'B')
	cmp[500] = 'C'
	r := run(l, cawCDB(0, 9, 1), append(cmp, fill(BlockSize, 'D')...), 0)
	want := []byte{0xF0, 0, keyMiscompare, 0, 0, 0x01, 0xF4, 10, 0, 0, 0, 0, 0x1D, 0x00, 0, 0, 0, 0}
	if r.Status != StatusCheckCondition || !bytes.Equal(r.Sense, want) {
		t.Fatalf("miscompare: status %#x sense % x, want % x", r.Status, r.Sense, want)
	}
	if !bytes.Equal(readBack(t, v, 9, 1), fill(BlockSize, 'B')) {
		t.Fatal("a miscompare changed the block")
	}

	// Data-out must be exactly 2 * NUMBER OF LOGICAL BLOCKS blocks.
	mustFieldPointer(t, run(l, cawCDB(0, 9, 1), fill(4*BlockSize, 'B'), 0), true, 13)
	mustFieldPointer(t, run(l, cawCDB(0, 9, 1), fill(BlockSize, 'B'), 0), true, 13)
	// libiscsi's 256-block case sends NUMBER OF LOGICAL BLOCKS 0 with data.
	mustFieldPointer(t, run(l, cawCDB(0, 0, 0), fill(512*BlockSize, 'B'), 0), true, 13)
	// Zero blocks and no data: nothing to do.
	mustGood(t, run(l, cawCDB(0, 0, 0), nil, 0))
	// Above MAXIMUM COMPARE AND WRITE LENGTH.
	mustFieldPointer(t, run(l, cawCDB(0, 0, 2), fill(4*BlockSize, 'B'), 0), true, 13)
	mustSense(t, run(l, cawCDB(0, testBlocks, 1), buf, 0), keyIllegalRequest, ascLBAOutOfRange)
	mustFieldPointer(t, run(l, cawCDB(0x20, 9, 1), buf, 0), true, 1) // WRPROTECT
}

// Many goroutines race COMPARE AND WRITE on one block, each expecting the
// value of the current round: every round exactly one wins and the block
// ends with the winners' history.
func TestCompareAndWriteConcurrent(t *testing.T) {
	l, v := newTestLUN(t, Options{})
	const rounds, racers = 200, 8
	block := func(round, who int) []byte {
		b := make([]byte, BlockSize)
		binary.BigEndian.PutUint32(b, uint32(round))
		binary.BigEndian.PutUint32(b[4:], uint32(who))
		return b
	}
	if err := v.WriteAt(context.Background(), block(0, 0), 0, 0); err != nil {
		t.Fatal(err)
	}
	expect := block(0, 0)
	for round := 1; round <= rounds; round++ {
		wins := make(chan int, racers)
		errs := make(chan error, racers)
		for who := 1; who <= racers; who++ {
			go func() {
				r := run(l, cawCDB(0, 0, 1), append(append([]byte(nil), expect...), block(round, who)...), 0)
				switch {
				case r.Status == StatusGood:
					wins <- who
					errs <- nil
				case r.Status == StatusCheckCondition && r.Sense[2] == keyMiscompare:
					errs <- nil
				default:
					errs <- fmt.Errorf("round %d: unexpected %s", round, describeSense(r.Sense))
				}
			}()
		}
		for range racers {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
		close(wins)
		var winners []int
		for w := range wins {
			winners = append(winners, w)
		}
		if len(winners) != 1 {
			t.Fatalf("round %d: %d winners %v, want exactly 1", round, len(winners), winners)
		}
		expect = block(round, winners[0])
		if got := readBack(t, v, 0, 1); !bytes.Equal(got, expect) {
			t.Fatalf("round %d: block holds %x, want the winner's %x", round, got[:8], expect[:8])
		}
	}
}

func TestWriteSame(t *testing.T) {
	ctx := context.Background()
	t.Run("pattern", func(t *testing.T) {
		l, v := newTestLUN(t, Options{})
		pat := fill(BlockSize, 0x77)
		mustGood(t, run(l, cdb10(opWriteSame10, 0, 100, 300), pat, 0))
		if len(v.sames) != 1 || v.sames[0].off != 100*BlockSize || v.sames[0].length != 300*BlockSize {
			t.Fatalf("WRITE SAME calls %+v", v.sames)
		}
		if !bytes.Equal(readBack(t, v, 100, 300), fill(300*BlockSize, 0x77)) {
			t.Fatal("pattern not written")
		}
		// UNMAP deallocates whatever the pattern (the blocks read zeros).
		mustGood(t, run(l, cdb16(opWriteSame16, 0x08, 400, 8), pat, 0))
		if len(v.sames) != 1 || len(v.zeroes) != 1 || !v.zeroes[0].unmap || !blockdev.AllZero(readBack(t, v, 400, 8)) {
			t.Fatalf("WRITE SAME with UNMAP and a pattern: zeroes %v, sames %d", v.zeroes, len(v.sames))
		}
	})
	t.Run("zeros", func(t *testing.T) {
		l, v := newTestLUN(t, Options{})
		if err := v.WriteAt(ctx, fill(64*BlockSize, 0xFF), 0, 0); err != nil {
			t.Fatal(err)
		}
		mustGood(t, run(l, cdb10(opWriteSame10, 0x08, 0, 16), make([]byte, BlockSize), 0))
		mustGood(t, run(l, cdb16(opWriteSame16, 0x00, 16, 16), make([]byte, BlockSize), 0))
		mustGood(t, run(l, cdb16(opWriteSame16, 0x09, 32, 16), nil, 0)) // NDOB + UNMAP
		want := []zeroCall{{0, 16 * BlockSize, true}, {16 * BlockSize, 16 * BlockSize, false}, {32 * BlockSize, 16 * BlockSize, true}}
		if fmt.Sprint(v.zeroes) != fmt.Sprint(want) || len(v.sames) != 0 {
			t.Fatalf("WriteZeroes calls %v, want %v", v.zeroes, want)
		}
		if !blockdev.AllZero(readBack(t, v, 0, 48)) {
			t.Fatal("zeroed blocks do not read as zeros")
		}
	})
	t.Run("to the end", func(t *testing.T) {
		l, v := newTestLUN(t, Options{})
		mustGood(t, run(l, cdb10(opWriteSame10, 0x08, testBlocks-10, 0), make([]byte, BlockSize), 0))
		if len(v.zeroes) != 1 || v.zeroes[0].length != 10*BlockSize {
			t.Fatalf("WRITE SAME of 0 blocks: %v, want the last 10 blocks", v.zeroes)
		}
		// From LBA 0 the whole 8 MiB volume is within MAXIMUM WRITE SAME LENGTH.
		mustGood(t, run(l, cdb10(opWriteSame10, 0x08, 0, 0), make([]byte, BlockSize), 0))
		mustSense(t, run(l, cdb10(opWriteSame10, 0, testBlocks+1, 0), make([]byte, BlockSize), 0), keyIllegalRequest, ascLBAOutOfRange)
	})
	t.Run("limits", func(t *testing.T) {
		v := newSpy(1, 64<<20)
		l := NewLUN(v, Options{})
		blk := make([]byte, BlockSize)
		mustGood(t, run(l, cdb16(opWriteSame16, 0, 0, maxWriteSame), blk, 0))
		mustFieldPointer(t, run(l, cdb16(opWriteSame16, 0, 0, maxWriteSame+1), blk, 0), true, 10)
		mustFieldPointer(t, run(l, cdb10(opWriteSame10, 0, 0, 0), blk, 0), true, 7) // 64 MiB to the end
		mustSense(t, run(l, cdb10(opWriteSame10, 0, 1<<17-1, 2), blk, 0), keyIllegalRequest, ascLBAOutOfRange)
		// Exactly one block of data-out.
		mustSense(t, run(l, cdb10(opWriteSame10, 0x08, 0, 1), make([]byte, BlockSize/2), 0), keyIllegalRequest, ascInvalidFieldInIU)
		mustSense(t, run(l, cdb10(opWriteSame10, 0x08, 0, 1), make([]byte, 2*BlockSize), 0), keyIllegalRequest, ascInvalidFieldInIU)
		// ANCHOR is not supported; WRPROTECT neither.
		mustFieldPointer(t, run(l, cdb10(opWriteSame10, 0x10, 0, 1), blk, 0), true, 1)
		mustFieldPointer(t, run(l, cdb10(opWriteSame10, 0x18, 0, 1), blk, 0), true, 1)
		mustFieldPointer(t, run(l, cdb16(opWriteSame16, 0x20, 0, 1), blk, 0), true, 1)
	})
}

func TestSynchronizeCacheAndPrefetch(t *testing.T) {
	l, v := newTestLUN(t, Options{})
	mustGood(t, run(l, cdb10(opSyncCache10, 0x02, 0, 0), nil, 0))
	mustGood(t, run(l, cdb16(opSyncCache16, 0, 10, 10), nil, 0))
	if v.Flushes != 2 {
		t.Fatalf("%d flushes, want 2", v.Flushes)
	}
	mustSense(t, run(l, cdb16(opSyncCache16, 0, testBlocks+1, 0), nil, 0), keyIllegalRequest, ascLBAOutOfRange)
	mustGood(t, run(l, cdb10(opPrefetch10, 0x02, 0, 256), nil, 0))
	mustGood(t, run(l, cdb16(opPrefetch16, 0, testBlocks-1, 1), nil, 0))
	mustSense(t, run(l, cdb10(opPrefetch10, 0, testBlocks-1, 2), nil, 0), keyIllegalRequest, ascLBAOutOfRange)
}

func TestReadCapacity(t *testing.T) {
	l, _ := newTestLUN(t, Options{})
	r := run(l, []byte{opReadCapacity10, 0, 0, 0, 0, 0, 0, 0, 0, 0}, nil, 8)
	mustGood(t, r)
	if want := []byte{0, 0, 0x3F, 0xFF, 0, 0, 2, 0}; !bytes.Equal(r.data, want) {
		t.Fatalf("READ CAPACITY(10) % x, want % x", r.data, want)
	}
	mustFieldPointer(t, run(l, []byte{opReadCapacity10, 0, 0, 0, 0, 1, 0, 0, 0, 0}, nil, 8), true, 2)

	rc16 := cdb16(opServiceActionIn16, saReadCapacity16, 0, 32)
	r = run(l, rc16, nil, 32)
	mustGood(t, r)
	want := make([]byte, 32)
	binary.BigEndian.PutUint64(want, testBlocks-1)
	binary.BigEndian.PutUint32(want[8:], 512)
	want[13], want[14] = 3, 0xC0 // LBPPBE 3; LBPME, LBPRZ
	if !bytes.Equal(r.data, want) {
		t.Fatalf("READ CAPACITY(16) % x, want % x", r.data, want)
	}
	for alloc := uint32(0); alloc < 16; alloc++ {
		r := run(l, cdb16(opServiceActionIn16, saReadCapacity16, 0, alloc), nil, 32)
		mustGood(t, r)
		if r.DataInLen != int(alloc) {
			t.Fatalf("allocation length %d returned %d bytes", alloc, r.DataInLen)
		}
	}
}

func TestVolumeErrors(t *testing.T) {
	for _, c := range []struct {
		err       error
		readKey   byte
		readCode  uint16
		writeKey  byte
		writeCode uint16
	}{
		{blockdev.ErrIO, keyMediumError, ascUnrecoveredReadError, keyMediumError, ascWriteError},
		{fmt.Errorf("chunk 3: %w", blockdev.ErrUnavailable), keyNotReady, ascNotAccessibleTransition, keyNotReady, ascNotAccessibleTransition},
		{blockdev.ErrReadOnly, keyDataProtect, ascWriteProtected, keyDataProtect, ascWriteProtected},
		{context.DeadlineExceeded, keyAbortedCommand, ascCommunicationTimeout, keyAbortedCommand, ascCommunicationTimeout},
		{errors.New("surprise"), keyHardwareError, ascInternalTargetFailure, keyHardwareError, ascInternalTargetFailure},
	} {
		l, v := newTestLUN(t, Options{})
		v.setErr(c.err)
		mustSense(t, run(l, cdb10(opRead10, 0, 0, 1), nil, BlockSize), c.readKey, c.readCode)
		mustSense(t, run(l, cdb10(opWrite10, 0, 0, 1), fill(BlockSize, 1), 0), c.writeKey, c.writeCode)
		mustSense(t, run(l, cawCDB(0, 0, 1), fill(2*BlockSize, 1), 0), c.writeKey, c.writeCode)
		mustSense(t, run(l, cdb10(opSyncCache10, 0, 0, 0), nil, 0), c.writeKey, c.writeCode)
	}
}

func TestPhysicalBlockSize(t *testing.T) {
	for _, c := range []struct {
		size uint32
		exp  byte
	}{{0, 3}, {512, 0}, {4096, 3}, {8192, 4}, {1000, 3}, {256, 3}} {
		l, _ := newTestLUN(t, Options{PhysicalBlockSize: c.size})
		r := run(l, cdb16(opServiceActionIn16, saReadCapacity16, 0, 32), nil, 32)
		mustGood(t, r)
		bl := run(l, inquiryCDB(true, 0xB0, 64), nil, 64).data
		if r.data[13] != c.exp || binary.BigEndian.Uint16(bl[6:]) != 1<<c.exp {
			t.Errorf("PhysicalBlockSize %d: LBPPBE %d, granularity %d; want exponent %d", c.size, r.data[13], binary.BigEndian.Uint16(bl[6:]), c.exp)
		}
	}
}
