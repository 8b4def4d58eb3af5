// Command linearize checks that a compare-and-write history recorded by
// `cairn ats-torture` is linearizable (porcupine), so that COMPARE AND WRITE
// stays atomic across failures. The history format is documented in
// history.go.
//
//	linearize -history FILE [-min-ops N] [-timeout 60s] [-html FILE]
//
// Exit status: 0 linearizable, 1 not linearizable, 2
// unusable input or the check ran out of time.
package main

import (
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/anishathalye/porcupine"
)

func main() {
	path := flag.String("history", "", "history file (JSON lines, version 1)")
	minOps := flag.Int("min-ops", 1, "fail unless the history holds at least this many operations")
	timeout := flag.Duration("timeout", 60*time.Second, "give up the search after this long")
	html := flag.String("html", "", "write porcupine's visualization here when the history is not linearizable")
	flag.Parse()
	os.Exit(run(*path, *minOps, *timeout, *html))
}

func run(path string, minOps int, timeout time.Duration, html string) int {
	if path == "" {
		fmt.Fprintln(os.Stderr, "linearize: -history FILE is required")
		return 2
	}
	f, err := os.Open(path)
	if err != nil {
		fmt.Fprintf(os.Stderr, "linearize: %v\n", err)
		return 2
	}
	defer f.Close()
	recs, err := ParseHistory(f)
	if err != nil {
		fmt.Fprintf(os.Stderr, "linearize: %s: %v\n", path, err)
		return 2
	}
	ops, sum := operations(recs)
	fmt.Printf("%d operations: %d reads, %d swaps, %d miscompares, %d unknown outcome\n",
		sum.Ops, sum.Reads, sum.Swaps, sum.Miscompares, sum.Unknown)
	if sum.Ops < minOps {
		fmt.Fprintf(os.Stderr, "linearize: only %d operations, want at least %d: the run did too little to tell\n", sum.Ops, minOps)
		return 2
	}
	if err := quickCheck(recs); err != nil {
		fmt.Printf("NOT LINEARIZABLE: %v\n", err)
		return 1
	}
	res, info := check(ops, timeout)
	switch res {
	case porcupine.Ok:
		fmt.Println("linearizable")
		return 0
	case porcupine.Illegal:
		fmt.Println("NOT LINEARIZABLE")
		if html != "" {
			if err := porcupine.VisualizePath(blockModel.ToModel(), info, html); err != nil {
				fmt.Fprintf(os.Stderr, "linearize: visualization: %v\n", err)
			} else {
				fmt.Printf("visualization: %s\n", html)
			}
		}
		return 1
	}
	fmt.Fprintf(os.Stderr, "linearize: no answer within %v (history too concurrent?); use fewer keys per client or a longer -timeout\n", timeout)
	return 2
}
