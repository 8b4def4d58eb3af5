package main

import (
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/anishathalye/porcupine"
)

// input and output of one operation, as porcupine sees it.
type input struct {
	Key    int64
	Kind   string // read, cas
	Expect uint64
	Value  uint64 // cas: the value written
}

type output struct {
	Result string // ok, miscompare, unknown
	Value  uint64 // read: the value read
}

// blockModel is a set of independent registers (one per block), each
// holding a value; compare-and-write is atomic on one block. An operation
// whose outcome is unknown may or may not have taken effect, hence the
// nondeterministic model.
var blockModel = porcupine.NondeterministicModel{
	Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[int64][]porcupine.Operation{}
		for _, op := range h {
			k := op.Input.(input).Key
			byKey[k] = append(byKey[k], op)
		}
		keys := make([]int64, 0, len(byKey))
		for k := range byKey {
			keys = append(keys, k)
		}
		sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
		out := make([][]porcupine.Operation, 0, len(keys))
		for _, k := range keys {
			out = append(out, byKey[k])
		}
		return out
	},
	Init: func() []interface{} { return []interface{}{uint64(0)} },
	Step: func(state, in, out interface{}) []interface{} {
		s, i, o := state.(uint64), in.(input), out.(output)
		switch i.Kind {
		case "read":
			if o.Result == "unknown" || o.Value == s {
				return []interface{}{s}
			}
			return nil
		case "cas":
			match := s == i.Expect
			switch {
			case o.Result == "ok" && match:
				return []interface{}{i.Value}
			case o.Result == "miscompare" && !match:
				return []interface{}{s}
			case o.Result == "unknown" && match:
				return []interface{}{i.Value, s}
			case o.Result == "unknown":
				return []interface{}{s}
			}
			return nil
		}
		return nil
	},
	Equal: func(a, b interface{}) bool { return a.(uint64) == b.(uint64) },
	DescribeOperation: func(in, out interface{}) string {
		i, o := in.(input), out.(output)
		if i.Kind == "read" {
			return fmt.Sprintf("read(%d) -> %#x", i.Key, o.Value)
		}
		return fmt.Sprintf("cas(%d, %#x -> %#x) %s", i.Key, i.Expect, i.Value, o.Result)
	},
	DescribeState: func(s interface{}) string { return fmt.Sprintf("%#x", s.(uint64)) },
}

// Summary counts what a history holds.
type Summary struct {
	Ops, Reads, Swaps, Miscompares, Unknown int
}

// operations turns records into porcupine operations. An operation with an
// unknown outcome may take effect any time after its call, so its return is
// pushed to the end of time; an unknown read constrains nothing and is
// dropped.
func operations(recs []Record) ([]porcupine.Operation, Summary) {
	var ops []porcupine.Operation
	var sum Summary
	for _, r := range recs {
		res := r.result()
		sum.Ops++
		switch {
		case res == "unknown":
			sum.Unknown++
		case r.Kind == "read":
			sum.Reads++
		case res == "ok":
			sum.Swaps++
		default:
			sum.Miscompares++
		}
		if r.Kind == "read" && res == "unknown" {
			continue
		}
		ret := r.Return
		if res == "unknown" {
			ret = math.MaxInt64 / 2
		}
		ops = append(ops, porcupine.Operation{
			ClientId: r.Client,
			Input:    input{Key: r.Key, Kind: r.Kind, Expect: r.Expect, Value: r.Value},
			Call:     r.Call,
			Output:   output{Result: res, Value: r.Value},
			Return:   ret,
		})
	}
	return ops, sum
}

// check runs porcupine; Unknown means it ran out of time.
func check(ops []porcupine.Operation, timeout time.Duration) (porcupine.CheckResult, porcupine.LinearizationInfo) {
	return porcupine.CheckOperationsVerbose(blockModel.ToModel(), ops, timeout)
}

// quickCheck finds violations that need no search, with a message a
// developer can act on. Both rules rest on the values a run writes being
// unique and 0 (the initial value) never being written:
//   - a value observed (read, or compared equal by a successful cas) must
//     have been written by a cas that succeeded or whose outcome is
//     unknown: seeing the value of a cas that reported a miscompare means
//     that cas took effect although it told its client it did not;
//   - a value leaves the register for good once replaced, so two
//     successful cas of the same expected value cannot both be right.
//
// It returns nil when these rules hold; porcupine then decides.
func quickCheck(recs []Record) error {
	type key struct {
		k int64
		v uint64
	}
	writer := map[key]*Record{}
	for i := range recs {
		r := &recs[i]
		if r.Kind == "cas" {
			writer[key{r.Key, r.Value}] = r
		}
	}
	seen := func(r *Record, v uint64, how string) error {
		if v == 0 {
			return nil
		}
		w, ok := writer[key{r.Key, v}]
		switch {
		case !ok:
			return fmt.Errorf("client %d %s %#x on block %d at %d, a value no operation wrote (foreign or corrupt data)", r.Client, how, v, r.Key, r.Call)
		case w.result() == "miscompare":
			return fmt.Errorf("client %d %s %#x on block %d at %d, but the compare-and-write that wrote it (client %d, call %d, return %d, expect %#x) reported a miscompare: it took effect although its client was told it did not (a retried ATS?)",
				r.Client, how, v, r.Key, r.Call, w.Client, w.Call, w.Return, w.Expect)
		}
		return nil
	}
	swapped := map[key]*Record{}
	for i := range recs {
		r := &recs[i]
		switch {
		case r.Kind == "read" && r.OK:
			if err := seen(r, r.Value, "read"); err != nil {
				return err
			}
		case r.Kind == "cas" && r.OK:
			if err := seen(r, r.Expect, "compared equal to"); err != nil {
				return err
			}
			k := key{r.Key, r.Expect}
			if o, dup := swapped[k]; dup {
				return fmt.Errorf("two compare-and-writes of block %d both replaced %#x: client %d (call %d) and client %d (call %d)", r.Key, r.Expect, o.Client, o.Call, r.Client, r.Call)
			}
			swapped[k] = r
		}
	}
	return nil
}
