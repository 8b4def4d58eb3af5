// Package torture drives concurrent compare-and-write (ATS) clients against
// one block of a volume and records the history for a linearizability
// checker, the way VMFS heartbeats and locks use ATS.
//
// History format, version 1: one JSON object per line (Op), in the order
// operations returned. The block holds a register: a big-endian uint64 at
// byte 0, the rest of the block zeros.
package torture

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"sync"
	"time"

	"github.com/cairn-storage/cairn/appliance/internal/blockdev"
)

// Op is one operation of the history.
type Op struct {
	Client int    `json:"client"`
	Kind   string `json:"kind"` // "read" or "cas"
	// Expect is the compared value and Value the new value (cas), or the
	// value read (read).
	Expect uint64 `json:"expect,omitempty"`
	Value  uint64 `json:"value"`
	OK     bool   `json:"ok"` // cas: swapped; read: succeeded
	// Unknown: the call failed without a definite answer (a timeout or an
	// error during a failure): it may or may not have taken effect.
	Unknown bool   `json:"unknown,omitempty"`
	Error   string `json:"error,omitempty"`
	Call    int64  `json:"call"`   // Unix ns when the call started
	Return  int64  `json:"return"` // Unix ns when it returned
}

// Config of a run.
type Config struct {
	Clients  int
	Ops      int // per client
	Offset   int64
	Duration time.Duration // stop early after this long (0: no limit)
	Seed     int64
}

func block(v uint64) []byte {
	b := make([]byte, blockdev.SectorSize)
	binary.BigEndian.PutUint64(b, v)
	return b
}

// Run resets the register to 0, runs the clients and writes the history.
// Values written are unique: client c's k-th attempt writes c<<32 | k+1.
func Run(ctx context.Context, vol blockdev.Volume, cfg Config, out io.Writer) (Summary, error) {
	if err := vol.WriteAt(ctx, block(0), cfg.Offset, blockdev.FUA); err != nil {
		return Summary{}, fmt.Errorf("reset the register: %w", err)
	}
	if cfg.Duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cfg.Duration)
		defer cancel()
	}
	w := bufio.NewWriter(out)
	defer w.Flush()
	var mu sync.Mutex
	var sum Summary
	emit := func(op Op) {
		mu.Lock()
		defer mu.Unlock()
		b, _ := json.Marshal(op)
		w.Write(append(b, '\n'))
		sum.add(op)
	}
	var wg sync.WaitGroup
	for c := 0; c < cfg.Clients; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			rng := rand.New(rand.NewSource(cfg.Seed + int64(c)))
			cur := uint64(0)
			for k := 0; k < cfg.Ops && ctx.Err() == nil; k++ {
				if rng.Intn(3) == 0 {
					op := Op{Client: c, Kind: "read", Call: time.Now().UnixNano()}
					buf := make([]byte, blockdev.SectorSize)
					err := vol.ReadAt(ctx, buf, cfg.Offset)
					op.Return = time.Now().UnixNano()
					if err != nil {
						op.Error, op.Unknown = err.Error(), true
					} else {
						op.OK, op.Value = true, binary.BigEndian.Uint64(buf)
						cur = op.Value
					}
					emit(op)
					continue
				}
				nv := uint64(c)<<32 | uint64(k+1)
				op := Op{Client: c, Kind: "cas", Expect: cur, Value: nv, Call: time.Now().UnixNano()}
				err := vol.CompareAndWrite(ctx, block(cur), block(nv), cfg.Offset, 0)
				op.Return = time.Now().UnixNano()
				var mc *blockdev.MiscompareError
				switch {
				case err == nil:
					op.OK = true
					cur = nv
				case errors.As(err, &mc):
					// definite failure: learn the value by the next read
				default:
					op.Error, op.Unknown = err.Error(), true
				}
				emit(op)
			}
		}(c)
	}
	wg.Wait()
	return sum, nil
}

// Summary counts a history.
type Summary struct {
	Ops, Reads, Swaps, Miscompares, Unknown int
}

func (s *Summary) add(op Op) {
	s.Ops++
	switch {
	case op.Unknown:
		s.Unknown++
	case op.Kind == "read":
		s.Reads++
	case op.OK:
		s.Swaps++
	default:
		s.Miscompares++
	}
}
