package placement

import (
	"fmt"
	"slices"

	"github.com/cairn-storage/cairn/appliance/internal/model"
)

// Maintenance modes of an SDS as the healing logic sees them.
const (
	ModeNormal    = ""
	ModeInstant   = "instant"   // copies go away; changes tracked; delta resync on return
	ModeProtected = "protected" // extra copies first, then away
	ModeRemoving  = "removing"  // copies move elsewhere, then the SDS leaves
)

// SDSView is what the leader knows of one SDS.
type SDSView struct {
	Live        bool
	Mode        string
	FaultDomain string
}

// View is the cluster state one reconciliation step works from.
type View struct {
	// Cands are the devices that may receive new copies (live SDSs in
	// normal mode, healthy devices of the pool).
	Cands []Candidate
	SDS   map[string]SDSView
	// DeviceOK is false for devices in error or removed.
	DeviceOK map[string]bool
	// DeviceLeaving is true for devices being drained (graceful removal).
	DeviceLeaving map[string]bool
	// Done holds completed fills: Done[FillKey(pg, device)] is the state
	// epoch (CopyRef.Since) of the copy the primary finished filling.
	Done map[string]uint64
	// Epoch is the epoch the next map will carry.
	Epoch uint64
	// Rebalance allows moving a healthy group toward its ideal placement.
	Rebalance bool
}

// FillKey names the fill of one copy of a group.
func FillKey(pg int, deviceID string) string { return fmt.Sprintf("%d/%s", pg, deviceID) }

func (v *View) sds(id string) SDSView {
	if s, ok := v.SDS[id]; ok {
		return s
	}
	return SDSView{}
}

// Heal returns the next copy set of one group. The rules, in order:
//
//  1. A copy on a dead SDS (not in maintenance) or a failed device is
//     dropped: it can no longer be trusted.
//  2. A copy on an SDS in instant maintenance goes away (no writes, changes
//     tracked by the primary); in protected maintenance it goes away only
//     once two other copies are ready. A copy that was still being filled
//     is dropped instead: it is incomplete.
//  3. An away copy whose SDS is back (live, normal) starts its resync.
//  4. A copy being filled becomes ready when its primary reported the fill
//     done for the current state.
//  5. The primary (index 0) is always a ready copy.
//  6. While fewer than two copies protect the data (ready or filling, or
//     away in instant maintenance), a new copy is added and filled.
//  7. With everything healthy, surplus copies are trimmed to the ideal
//     placement, and (if allowed) one copy moves toward it.
func Heal(pg int, cur []model.CopyRef, v *View) []model.CopyRef {
	next := make([]model.CopyRef, 0, len(cur)+1)
	set := func(c model.CopyRef, state string) model.CopyRef {
		if c.State != state {
			c.State, c.Since = state, v.Epoch
		}
		return c
	}
	readyOff := func(sdsID string) int { // ready copies not on sdsID
		n := 0
		for _, c := range cur {
			s := v.sds(c.SDSID)
			if c.SDSID != sdsID && c.State == model.CopyReady && s.Live && s.Mode == ModeNormal && v.DeviceOK[c.DeviceID] {
				n++
			}
		}
		return n
	}
	// A dead copy is dropped only while a live ready copy remains: when
	// every complete copy is unreachable (a power cut, all SDSs stopped)
	// the group waits for them, it never forgets where its data is.
	liveReady := slices.ContainsFunc(cur, func(c model.CopyRef) bool {
		s := v.sds(c.SDSID)
		return c.State == model.CopyReady && s.Live && s.Mode != ModeInstant && v.DeviceOK[c.DeviceID]
	})
	for _, c := range cur {
		s := v.sds(c.SDSID)
		if !liveReady && c.State == model.CopyReady && s.Mode == ModeNormal {
			next = append(next, c)
			continue
		}
		if !v.DeviceOK[c.DeviceID] {
			continue // rule 1
		}
		switch s.Mode {
		case ModeInstant:
			if c.State == model.CopyReady || c.State == model.CopyAway || c.State == model.CopyResync {
				// A resync copy going away again keeps only what it had;
				// the primary's tracking restarts, so its fill restarts too.
				next = append(next, set(c, model.CopyAway))
			}
			continue
		case ModeProtected:
			if c.State == model.CopyAway {
				next = append(next, c)
			} else if c.State == model.CopyReady && s.Live && readyOff(c.SDSID) < 2 {
				next = append(next, c) // keeps serving until the extra copy is ready
			} else if c.State == model.CopyReady || c.State == model.CopyResync {
				next = append(next, set(c, model.CopyAway))
			}
			continue
		}
		if !s.Live {
			continue // rule 1: dead (and not in maintenance)
		}
		switch c.State {
		case model.CopyAway:
			next = append(next, set(c, model.CopyResync)) // rule 3
		case model.CopyRebuild, model.CopyResync:
			if done, ok := v.Done[FillKey(pg, c.DeviceID)]; ok && done >= c.Since && c.Since > 0 {
				next = append(next, set(c, model.CopyReady)) // rule 4
			} else {
				next = append(next, c)
			}
		default:
			next = append(next, c)
		}
	}
	// Rule 5: a ready primary.
	if i := slices.IndexFunc(next, func(c model.CopyRef) bool { return c.State == model.CopyReady }); i > 0 {
		p := next[i]
		next = append(next[:i], next[i+1:]...)
		next = append([]model.CopyRef{p}, next...)
	}
	// Rule 6: enough protection.
	protecting := func() int {
		n := 0
		for _, c := range next {
			switch {
			case v.sds(c.SDSID).Mode == ModeProtected:
				// serves until replaced; does not count as protection
			case c.State == model.CopyReady, c.State == model.CopyRebuild, c.State == model.CopyResync:
				n++
			case c.State == model.CopyAway && v.sds(c.SDSID).Mode == ModeInstant:
				n++
			}
		}
		return n
	}
	hasReady := len(next) > 0 && next[0].State == model.CopyReady
	for hasReady && protecting() < Copies {
		c, ok := v.pick(pg, next)
		if !ok {
			break // not enough devices: stays degraded, reported as such
		}
		next = append(next, model.CopyRef{SDSID: c.SDSID, DeviceID: c.DeviceID, State: model.CopyRebuild, Since: v.Epoch})
	}
	// Rule 7: trim surplus and rebalance, only when every copy is ready.
	allReady := hasReady && !slices.ContainsFunc(next, func(c model.CopyRef) bool {
		m := v.sds(c.SDSID).Mode
		return c.State != model.CopyReady || m == ModeInstant || m == ModeProtected
	})
	if allReady && len(v.Cands) > 0 {
		// Balance is judged per SDS: a group never holds two copies on one
		// SDS (the data path finds a copy by its SDS), so moving a copy
		// between devices of one SDS is not a rebalance step.
		ideal := Choose(pg, v.Cands)
		leavingCopy := func(c model.CopyRef) bool {
			return v.sds(c.SDSID).Mode == ModeRemoving || v.DeviceLeaving[c.DeviceID]
		}
		inIdeal := func(c model.CopyRef) bool {
			return !leavingCopy(c) && slices.ContainsFunc(ideal, func(i model.CopyRef) bool { return i.SDSID == c.SDSID })
		}
		hasSDS := func(id string) bool {
			return slices.ContainsFunc(next, func(c model.CopyRef) bool { return c.SDSID == id })
		}
		for len(next) > Copies {
			i := slices.IndexFunc(next, func(c model.CopyRef) bool { return leavingCopy(c) })
			if i < 0 {
				i = slices.IndexFunc(next, func(c model.CopyRef) bool { return !inIdeal(c) })
			}
			if i < 0 {
				i = len(next) - 1
			}
			next = append(next[:i], next[i+1:]...)
		}
		switch {
		case len(next) != Copies:
		case slices.ContainsFunc(next, leavingCopy):
			// Draining: a replacement on another SDS, filled before the
			// leaving copy is trimmed.
			if c, ok := v.pick(pg, next); ok {
				next = append(next, model.CopyRef{SDSID: c.SDSID, DeviceID: c.DeviceID, State: model.CopyRebuild, Since: v.Epoch})
			}
		case v.Rebalance && len(ideal) == Copies:
			for _, want := range ideal {
				if !hasSDS(want.SDSID) {
					next = append(next, model.CopyRef{SDSID: want.SDSID, DeviceID: want.DeviceID, State: model.CopyRebuild, Since: v.Epoch})
					break
				}
			}
		}
		// Prefer the ideal primary's SDS once its copy is ready.
		if len(ideal) > 0 && len(next) > 0 && next[0].SDSID != ideal[0].SDSID {
			if i := slices.IndexFunc(next, func(c model.CopyRef) bool { return c.SDSID == ideal[0].SDSID && c.State == model.CopyReady }); i > 0 {
				next[0], next[i] = next[i], next[0]
			}
		}
	}
	return next
}

// pick chooses the best device for a new copy of pg: distinct SDS from
// every copy, distinct fault domain from every copy if possible, else from
// the copies that are not away.
func (v *View) pick(pg int, have []model.CopyRef) (Candidate, bool) {
	type scored struct {
		s float64
		c Candidate
	}
	var all []scored
	for _, c := range v.Cands {
		all = append(all, scored{score(pg, c), c})
	}
	slices.SortFunc(all, func(a, b scored) int {
		switch {
		case a.s > b.s:
			return -1
		case a.s < b.s:
			return 1
		}
		return 0
	})
	fdOf := func(sdsID string) string {
		if fd := v.sds(sdsID).FaultDomain; fd != "" {
			return fd
		}
		return "sds:" + sdsID
	}
	for _, strict := range []bool{true, false} {
		for _, x := range all {
			ok := true
			for _, h := range have {
				if h.SDSID == x.c.SDSID || h.DeviceID == x.c.DeviceID {
					ok = false
					break
				}
				if (strict || h.State != model.CopyAway) && fdOf(h.SDSID) == x.c.FaultDomain {
					ok = false
					break
				}
			}
			if ok {
				return x.c, true
			}
		}
	}
	return Candidate{}, false
}
