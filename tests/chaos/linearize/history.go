package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
)

// The history is what `cairn ats-torture --history FILE` writes
// (appliance/internal/torture, format version 1): one JSON object per line,
// one line per operation, in the order the operations returned:
//
//	{"client":0,"kind":"cas","expect":0,"value":1,"ok":true,"call":1700000000000000000,"return":1700000000000250000}
//	{"client":1,"kind":"read","value":1,"ok":true,"call":...,"return":...}
//	{"client":2,"kind":"cas","expect":1,"value":8589934593,"unknown":true,"error":"...","call":...,"return":...}
//
//	client   0-based index of the client; a client has one operation
//	         outstanding at a time
//	kind     "read" or "cas" (compare-and-write of the block)
//	key      optional, default 0: which block, when a run uses several;
//	         every key is an independent register
//	expect   cas: the value compared
//	value    cas: the value written; read: the value read
//	ok       cas: compared equal and wrote; read: succeeded
//	unknown  the call failed without a definite answer: it may or may not
//	         have taken effect, possibly after "return"
//	call     Unix ns when the call started; return: when it returned
//
// The register is the block's first 8 bytes (big-endian), 0 before the run.
// A cas that is neither ok nor unknown is a miscompare: it wrote nothing.
// The values a run writes are unique.

// maxLine bounds one history line: a record is well under 300 bytes, plus
// an error message.
const maxLine = 4096

// Record is one line of a history file.
type Record struct {
	V       int    `json:"v"` // optional format version: 0 (absent) or 1
	Client  int    `json:"client"`
	Kind    string `json:"kind"`
	Key     int64  `json:"key"`
	Expect  uint64 `json:"expect"`
	Value   uint64 `json:"value"`
	OK      bool   `json:"ok"`
	Unknown bool   `json:"unknown"`
	Error   string `json:"error"`
	Call    int64  `json:"call"`
	Return  int64  `json:"return"`
}

// result is the outcome: "ok", "miscompare" (cas only) or "unknown".
func (r *Record) result() string {
	switch {
	case r.Unknown:
		return "unknown"
	case r.OK:
		return "ok"
	}
	return "miscompare"
}

// ParseHistory reads a history; it rejects anything malformed with the line
// number, so a broken recorder is not mistaken for a correct storage system.
func ParseHistory(r io.Reader) ([]Record, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 512), maxLine)
	var out []Record
	for n := 1; sc.Scan(); n++ {
		line := sc.Bytes()
		if len(line) == 0 {
			continue
		}
		var rec Record
		if err := json.Unmarshal(line, &rec); err != nil {
			return nil, fmt.Errorf("history line %d: %w", n, err)
		}
		if err := rec.validate(); err != nil {
			return nil, fmt.Errorf("history line %d: %w", n, err)
		}
		out = append(out, rec)
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, fmt.Errorf("history: a line longer than %d bytes: not an ats-torture history", maxLine)
		}
		return nil, fmt.Errorf("history: %w", err)
	}
	return out, nil
}

func (r *Record) validate() error {
	if r.V != 0 && r.V != 1 {
		return fmt.Errorf("format version %d, want 1", r.V)
	}
	if r.Client < 0 || r.Client > 1<<16 {
		return fmt.Errorf("client %d out of range", r.Client)
	}
	if r.Key < 0 {
		return fmt.Errorf("negative key %d", r.Key)
	}
	if r.Call <= 0 || r.Return < r.Call || r.Return >= math.MaxInt64/2 {
		return fmt.Errorf("bad call/return times %d/%d", r.Call, r.Return)
	}
	if r.OK && r.Unknown {
		return errors.New("both ok and unknown")
	}
	switch r.Kind {
	case "cas":
	case "read":
		if !r.OK && !r.Unknown {
			return errors.New("a read neither ok nor unknown")
		}
	default:
		return fmt.Errorf("unknown kind %q", r.Kind)
	}
	return nil
}
