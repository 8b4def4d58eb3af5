package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
)

func init() {
	register("colocate", "run an SDS and an NBD server in one process: 'cairn colocate sds FLAGS -- nbd FLAGS'", runColocate)
}

// colocated is set by cairn colocate before its daemons start: the SDSs it
// runs then also serve the frontends beside them without the network
// (sds.Config.Local).
var colocated bool

// colocatable are the daemons cairn colocate runs together. cairn target
// would work the same way (it uses the same data client) but is not
// offered until a test runs it beside an SDS in the qemu guest.
var colocatable = []string{"sds", "nbd"}

// runColocate runs several daemons in one process, each with its own flags
// (its own --pki, so its own certificate, etcd user and role), separated by
// "--". A frontend's requests for the chunks whose primary is an SDS of the
// same process are then served by a function call instead of a TCP round
// trip (wire.ServeLocal). When one daemon stops, the others are stopped too, and
// the first error is returned.
func runColocate(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return errorf("give the daemons to run, each with its flags, separated by '--': cairn colocate sds --name sds1 ... -- nbd --host h1 ...")
	}
	groups := splitArgs(args)
	var names []string
	for _, g := range groups {
		if len(g) == 0 {
			return errorf("an empty daemon between two '--': give 'cairn colocate sds FLAGS -- nbd FLAGS'")
		}
		if !slices.Contains(colocatable, g[0]) {
			return errorf("cannot colocate %q: give some of %s, each with its flags, separated by '--' (e.g. cairn colocate sds --name sds1 ... -- nbd --host h1 ...)", g[0], strings.Join(colocatable, ", "))
		}
		names = append(names, g[0])
	}
	if !slices.Contains(names, "sds") || len(names) < 2 {
		return errorf("cairn colocate runs an SDS with frontends: give 'sds FLAGS -- nbd FLAGS', not %q", strings.Join(names, " -- "))
	}
	colocated = true
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type result struct {
		name string
		err  error
	}
	done := make(chan result, len(groups))
	var wg sync.WaitGroup
	for _, g := range groups {
		wg.Add(1)
		go func() {
			defer wg.Done()
			done <- result{g[0], commands[g[0]].run(ctx, g[1:])}
		}()
	}
	first := <-done
	stoppedByUs := ctx.Err() == nil
	cancel()
	wg.Wait()
	close(done)
	errs := []error{}
	if first.err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", first.name, first.err))
	} else if stoppedByUs {
		errs = append(errs, fmt.Errorf("%s stopped, so the others were stopped too", first.name))
	}
	for r := range done {
		if r.err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", r.name, r.err))
		}
	}
	return errors.Join(errs...)
}

// splitArgs cuts args at each "--".
func splitArgs(args []string) [][]string {
	groups := [][]string{{}}
	for _, a := range args {
		if a == "--" {
			groups = append(groups, []string{})
			continue
		}
		groups[len(groups)-1] = append(groups[len(groups)-1], a)
	}
	return groups
}
