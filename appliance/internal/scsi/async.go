package scsi

import "context"

// This file starts READs and WRITEs on an asynchronous volume without a
// goroutine per command; hold and FlushHeld follow blockdev.AsyncVolume's
// hold/flush scheme.

// StartRead begins a READ(6/10/12/16) without blocking when the volume is a
// blockdev.AsyncVolume, and reports false (having done nothing) for any other command
// or volume, and for any READ the synchronous path would refuse or treat
// specially (invalid CDB fields, out-of-range LBAs, a partial block): the
// caller then runs the command with Execute. Once started, done runs exactly
// once, possibly before StartRead returns and possibly on another goroutine,
// with ok true and the response, or ok false when the read failed: the
// caller then runs the command again with Execute, which retries and maps
// the error to sense data, so the answer is always the synchronous path's.
func (l *LUN) StartRead(ctx context.Context, cdb, dataIn []byte, hold bool, done func(r Response, ok bool)) bool {
	av := l.async
	if av == nil || len(cdb) == 0 {
		return false
	}
	switch cdb[0] {
	case opRead6, opRead10, opRead12, opRead16:
	default:
		return false
	}
	b, ok := l.validBlockCDB(cdb)
	if !ok {
		return false
	}
	avail := min(b.n*BlockSize, uint64(len(dataIn)))
	if avail == 0 || avail%BlockSize != 0 {
		return false
	}
	av.ReadAtAsync(ctx, dataIn[:avail], int64(b.lba*BlockSize), hold, func(err error) {
		if err != nil {
			done(Response{}, false)
			return
		}
		l.served()
		done(Response{Status: StatusGood, DataInLen: int(avail)}, true)
	})
	return true
}

// StartWrite is StartRead for WRITE(6/10/12/16) (FUA honoured) on an
// AsyncVolume, for writes whose data-out holds every block the CDB names
// on a writable LUN; anything else is left to Execute. A failed write is
// rerun by the caller through Execute: writing the same data again is
// harmless, and SCSI orders no two commands in flight.
func (l *LUN) StartWrite(ctx context.Context, cdb, dataOut []byte, hold bool, done func(r Response, ok bool)) bool {
	av := l.async
	if av == nil || len(cdb) == 0 {
		return false
	}
	switch cdb[0] {
	case opWrite6, opWrite10, opWrite12, opWrite16:
	default:
		return false
	}
	b, ok := l.validBlockCDB(cdb)
	if !ok || l.checkWritable() != nil || b.n == 0 || uint64(len(dataOut)) < b.n*BlockSize {
		return false
	}
	av.WriteAtAsync(ctx, dataOut[:b.n*BlockSize], int64(b.lba*BlockSize), fua(cdb), hold, func(err error) {
		if err != nil {
			done(Response{}, false)
			return
		}
		l.served()
		done(Response{Status: StatusGood}, true)
	})
	return true
}

// validBlockCDB checks cdb as execute does (known command, whole CDB, no
// bit set outside the command's usage mask) and its transfer length, and
// returns its block range.
func (l *LUN) validBlockCDB(cdb []byte) (blockRange, bool) {
	cmd, cc := lookup(cdb)
	if cc != nil || len(cdb) < len(cmd.usage) {
		return blockRange{}, false
	}
	for i := 1; i < len(cmd.usage); i++ {
		if cdb[i]&^cmd.usage[i] != 0 {
			return blockRange{}, false
		}
	}
	b := parseBlockRange(cdb)
	if l.transfer(b) != nil {
		return blockRange{}, false
	}
	return b, true
}

// FlushHeld sends the requests StartRead and StartWrite held back (hold
// true).
func (l *LUN) FlushHeld() {
	if l.async != nil {
		l.async.FlushHeld()
	}
}

// OnIdle registers f as the volume's idle hook (blockdev.AsyncVolume.OnIdle)
// and returns its cancel; ok is false, and nothing is registered, when the
// volume completes nothing asynchronously.
func (l *LUN) OnIdle(f func()) (cancel func(), ok bool) {
	if l.async == nil {
		return nil, false
	}
	return l.async.OnIdle(f), true
}
