package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

const (
	tokA = 1<<32 | 1
	tokB = 2<<32 | 1
	tokC = 3<<32 | 1
)

// cas and read build records; times in arbitrary small units. result is
// "ok", "miscompare" or "unknown".
func cas(client int, expect, value uint64, call, ret int64, result string) Record {
	return Record{Client: client, Kind: "cas", Expect: expect, Value: value, Call: call, Return: ret,
		OK: result == "ok", Unknown: result == "unknown"}
}

func read(client int, value uint64, call, ret int64) Record {
	return Record{Client: client, Kind: "read", Value: value, OK: true, Call: call, Return: ret}
}

func onKey(k int64, r Record) Record { r.Key = k; return r }

func verdict(t *testing.T, recs []Record) porcupine.CheckResult {
	t.Helper()
	for i := range recs {
		if err := recs[i].validate(); err != nil {
			t.Fatalf("test history record %d: %v", i, err)
		}
	}
	ops, _ := operations(recs)
	res, _ := check(ops, 10*time.Second)
	return res
}

func TestLinearizableHistories(t *testing.T) {
	cases := map[string][]Record{
		"sequential chain": {
			cas(0, 0, tokA, 1, 2, "ok"),
			cas(1, tokA, tokB, 3, 4, "ok"),
			read(2, tokB, 5, 6),
			cas(0, tokA, tokC, 7, 8, "miscompare"),
			read(1, tokB, 9, 10),
		},
		"concurrent caw, one wins": {
			cas(0, 0, tokA, 1, 10, "ok"),
			cas(1, 0, tokB, 2, 9, "miscompare"),
			read(2, tokA, 11, 12),
		},
		"read overlapping a caw sees either": {
			cas(0, 0, tokA, 1, 10, "ok"),
			read(1, 0, 2, 3),
			read(2, tokA, 4, 5),
		},
		"unknown caw that took effect": {
			cas(0, 0, tokA, 1, 2, "unknown"),
			read(1, 0, 3, 4),
			read(1, tokA, 5, 6),
		},
		"unknown caw that did not": {
			cas(0, 0, tokA, 1, 2, "unknown"),
			cas(1, 0, tokB, 3, 4, "ok"),
			read(1, tokB, 5, 6),
		},
		"keys are independent": {
			cas(0, 0, tokA, 1, 2, "ok"),
			onKey(1, cas(1, 0, tokB, 1, 2, "ok")),
			onKey(1, read(2, tokB, 3, 4)),
			read(2, tokA, 5, 6),
		},
		"unknown read constrains nothing": {
			cas(0, 0, tokA, 1, 2, "ok"),
			{Client: 1, Kind: "read", Unknown: true, Error: "timeout", Call: 3, Return: 4},
			cas(1, tokA, tokB, 5, 6, "ok"),
		},
	}
	for name, recs := range cases {
		t.Run(name, func(t *testing.T) {
			if got := verdict(t, recs); got != porcupine.Ok {
				t.Fatalf("got %s, want Ok", got)
			}
		})
	}
}

func TestNonLinearizableHistories(t *testing.T) {
	cases := map[string][]Record{
		"two caws of the same old value both succeed": {
			cas(0, 0, tokA, 1, 10, "ok"),
			cas(1, 0, tokB, 2, 9, "ok"),
		},
		"stale read after an acknowledged caw": {
			cas(0, 0, tokA, 1, 2, "ok"),
			read(1, 0, 3, 4),
		},
		"miscompare although the block matched": {
			cas(0, 0, tokA, 1, 2, "miscompare"),
		},
		"lost write: value reverts": {
			cas(0, 0, tokA, 1, 2, "ok"),
			read(1, tokA, 3, 4),
			read(2, 0, 5, 6),
		},
		"unknown caw seen then unseen": {
			cas(0, 0, tokA, 1, 2, "unknown"),
			read(1, tokA, 3, 4),
			read(1, 0, 5, 6),
		},
		"caw succeeds on a value never written": {
			cas(0, tokC, tokA, 1, 2, "ok"),
		},
		"violation on the second key only": {
			cas(0, 0, tokA, 1, 2, "ok"),
			onKey(1, cas(1, 0, tokB, 1, 2, "ok")),
			onKey(1, read(2, tokA, 3, 4)),
		},
	}
	for name, recs := range cases {
		t.Run(name, func(t *testing.T) {
			if got := verdict(t, recs); got != porcupine.Illegal {
				t.Fatalf("got %s, want Illegal", got)
			}
		})
	}
}

func TestQuickCheck(t *testing.T) {
	good := []Record{
		cas(0, 0, tokA, 1, 2, "ok"),
		cas(1, tokA, tokB, 3, 10, "unknown"),
		read(2, tokB, 11, 12),
		cas(2, 0, tokC, 13, 14, "miscompare"),
	}
	if err := quickCheck(good); err != nil {
		t.Fatalf("a clean history: %v", err)
	}
	bad := map[string][]Record{
		"miscompare that took effect": {
			cas(0, 0, tokA, 1, 2, "miscompare"),
			read(1, tokA, 3, 4),
		},
		"value nobody wrote": {
			read(1, tokC, 3, 4),
		},
		"compared equal to a value nobody wrote": {
			cas(0, tokC, tokA, 1, 2, "ok"),
		},
		"double swap of one value": {
			cas(0, 0, tokA, 1, 2, "ok"),
			cas(1, tokA, tokB, 3, 4, "ok"),
			cas(2, tokA, tokC, 5, 6, "ok"),
		},
	}
	for name, recs := range bad {
		t.Run(name, func(t *testing.T) {
			if err := quickCheck(recs); err == nil {
				t.Fatal("not caught")
			}
			// The full search must agree with the quick rules.
			if got := verdict(t, recs); got != porcupine.Illegal {
				t.Fatalf("porcupine says %s", got)
			}
		})
	}
}

func TestParseHistory(t *testing.T) {
	// As written by appliance/internal/torture.
	good := `{"client":0,"kind":"cas","value":1,"ok":true,"call":100,"return":200}

{"client":1,"kind":"read","value":1,"ok":true,"call":300,"return":400}
{"client":2,"kind":"cas","expect":1,"value":8589934593,"unknown":true,"error":"volume temporarily unavailable","call":350,"return":900}
{"client":3,"kind":"cas","expect":0,"value":12884901889,"call":360,"return":500}
`
	recs, err := ParseHistory(strings.NewReader(good))
	if err != nil || len(recs) != 4 {
		t.Fatalf("got %+v, %v", recs, err)
	}
	want := []string{"ok", "ok", "unknown", "miscompare"}
	for i, r := range recs {
		if r.result() != want[i] {
			t.Errorf("record %d: result %s, want %s", i, r.result(), want[i])
		}
	}
	if recs[2].Value != 2<<32|1 || recs[2].Expect != 1 {
		t.Errorf("values not parsed: %+v", recs[2])
	}
	bad := map[string]string{
		"version":          `{"v":2,"client":0,"kind":"read","value":0,"ok":true,"call":1,"return":2}`,
		"kind":             `{"client":0,"kind":"xcopy","call":1,"return":2}`,
		"ok and unknown":   `{"client":0,"kind":"cas","ok":true,"unknown":true,"call":1,"return":2}`,
		"read neither":     `{"client":0,"kind":"read","value":3,"call":1,"return":2}`,
		"return < call":    `{"client":0,"kind":"read","ok":true,"call":5,"return":2}`,
		"no times":         `{"client":0,"kind":"read","ok":true}`,
		"negative key":     `{"client":0,"kind":"read","key":-1,"ok":true,"call":1,"return":2}`,
		"negative client":  `{"client":-1,"kind":"read","ok":true,"call":1,"return":2}`,
		"value not number": `{"client":0,"kind":"cas","value":"1","call":1,"return":2}`,
		"not json":         `client=0 kind=read`,
		"too long":         `{"client":0,"error":"` + strings.Repeat("x", maxLine) + `"}`,
	}
	for name, line := range bad {
		if _, err := ParseHistory(strings.NewReader(line + "\n")); err == nil {
			t.Errorf("%s: accepted %q", name, line)
		}
	}
}

func TestRunExitCodes(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ok := write("ok.jsonl", `{"client":0,"kind":"cas","value":1,"ok":true,"call":1,"return":2}
{"client":1,"kind":"read","value":1,"ok":true,"call":3,"return":4}
`)
	badHist := write("bad.jsonl", `{"client":0,"kind":"cas","value":1,"ok":true,"call":1,"return":2}
{"client":1,"kind":"read","value":0,"ok":true,"call":3,"return":4}
`)
	html := filepath.Join(dir, "v.html")
	if rc := run(ok, 2, 10*time.Second, ""); rc != 0 {
		t.Errorf("linearizable history: exit %d", rc)
	}
	if rc := run(ok, 3, 10*time.Second, ""); rc != 2 {
		t.Errorf("too few operations: exit %d, want 2", rc)
	}
	if rc := run(badHist, 1, 10*time.Second, html); rc != 1 {
		t.Errorf("non-linearizable history: exit %d, want 1", rc)
	}
	if _, err := os.Stat(html); err != nil {
		t.Errorf("no visualization written: %v", err)
	}
	if rc := run(filepath.Join(dir, "missing"), 1, time.Second, ""); rc != 2 {
		t.Errorf("missing file: exit %d, want 2", rc)
	}
}

func FuzzParseHistory(f *testing.F) {
	f.Add([]byte(`{"client":0,"kind":"cas","value":1,"ok":true,"call":100,"return":200}` + "\n"))
	f.Add([]byte(`{"client":2,"kind":"read","call":1,"return":1,"unknown":true,"error":"x"}`))
	f.Add([]byte("{}\n\n{\"v\":1}"))
	f.Fuzz(func(t *testing.T, b []byte) {
		recs, err := ParseHistory(strings.NewReader(string(b)))
		if err != nil {
			return
		}
		// Whatever parses must be checkable without panicking.
		ops, _ := operations(recs)
		if len(ops) > 8 {
			return
		}
		check(ops, time.Second)
	})
}
