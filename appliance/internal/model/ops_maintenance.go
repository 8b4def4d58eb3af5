package model

// Maintenance modes of SDSs (and of whole fault sets): entering sets the
// SDS's state, the MDM leader's healing (placement.Heal) does the rest:
// instant maintenance sends the SDS's copies away at once (the partners
// track changed chunks, only those are resynced on return); protected
// maintenance first builds extra copies elsewhere, then sends the SDS's
// copies away. Entering is refused when it would leave any data without a
// complete copy on a running SDS.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Maintenance modes as the API names them.
const (
	MaintenanceInstant   = "instant"
	MaintenanceProtected = "protected"
)

// MaintenanceState maps an API mode to the SDS state it sets.
func MaintenanceState(mode string) (string, error) {
	switch mode {
	case MaintenanceInstant:
		return SDSMaintenance, nil
	case MaintenanceProtected:
		return SDSProtectedMain, nil
	}
	return "", invalidf("maintenance mode %q: use \"instant\" (copies go away at once, only changed chunks are resynced on return) or \"protected\" (extra copies are built first, so no data has a single copy meanwhile)", mode)
}

// MaintenanceMode maps an SDS state to its API maintenance mode ("" when the
// SDS is not in maintenance).
func MaintenanceMode(state string) string {
	switch state {
	case SDSMaintenance:
		return MaintenanceInstant
	case SDSProtectedMain:
		return MaintenanceProtected
	}
	return ""
}

// maintSnapshot is one consistent read (a single etcd transaction, so one
// revision) of everything a maintenance decision depends on.
type maintSnapshot struct {
	rev       int64
	sdss      []SDS
	faultSets []FaultSet
	devices   map[string]Device
	maps      []PlacementMap
	live      map[string]int64  // SDS id -> create revision of its lease key
	poolNames map[string]string // pool id -> name, for messages
}

func (s *Store) maintSnapshot(ctx context.Context) (*maintSnapshot, error) {
	r, err := s.C.Txn(ctx).Then(
		clientv3.OpGet(KindPrefix(KindSDS), clientv3.WithPrefix()),
		clientv3.OpGet(KindPrefix(KindFaultSet), clientv3.WithPrefix()),
		clientv3.OpGet(KindPrefix(KindDevice), clientv3.WithPrefix()),
		clientv3.OpGet(MapPrefix, clientv3.WithPrefix()),
		clientv3.OpGet(LivePrefix, clientv3.WithPrefix(), clientv3.WithKeysOnly()),
		clientv3.OpGet(KindPrefix(KindPool), clientv3.WithPrefix()),
	).Commit()
	if err != nil {
		return nil, unavailable(err)
	}
	snap := &maintSnapshot{rev: r.Header.Revision, devices: map[string]Device{}, live: map[string]int64{}, poolNames: map[string]string{}}
	decode := func(i int, each func(key string, v []byte) error) error {
		for _, kv := range r.Responses[i].GetResponseRange().Kvs {
			if err := each(string(kv.Key), kv.Value); err != nil {
				return fmt.Errorf("decode %s: %w", kv.Key, err)
			}
		}
		return nil
	}
	err = errors.Join(
		decode(0, func(_ string, b []byte) error {
			var x SDS
			err := json.Unmarshal(b, &x)
			snap.sdss = append(snap.sdss, x)
			return err
		}),
		decode(1, func(_ string, b []byte) error {
			var x FaultSet
			err := json.Unmarshal(b, &x)
			snap.faultSets = append(snap.faultSets, x)
			return err
		}),
		decode(2, func(_ string, b []byte) error {
			var x Device
			err := json.Unmarshal(b, &x)
			snap.devices[x.ID] = x
			return err
		}),
		decode(3, func(_ string, b []byte) error {
			var x PlacementMap
			err := json.Unmarshal(b, &x)
			snap.maps = append(snap.maps, x)
			return err
		}),
		decode(5, func(_ string, b []byte) error {
			var x StoragePool
			err := json.Unmarshal(b, &x)
			snap.poolNames[x.ID] = x.Name
			return err
		}),
	)
	if err != nil {
		return nil, err
	}
	for _, kv := range r.Responses[4].GetResponseRange().Kvs {
		snap.live[strings.TrimPrefix(string(kv.Key), LivePrefix)] = kv.CreateRevision
	}
	return snap, nil
}

// sds finds an SDS by id or name.
func (m *maintSnapshot) sds(ref string) (SDS, bool) {
	for _, x := range m.sdss {
		if x.ID == ref {
			return x, true
		}
	}
	for _, x := range m.sdss {
		if x.Name == ref {
			return x, true
		}
	}
	return SDS{}, false
}

func (m *maintSnapshot) sdsByID(id string) (SDS, bool) {
	for _, x := range m.sdss {
		if x.ID == id {
			return x, true
		}
	}
	return SDS{}, false
}

// faultSetMembers resolves a fault set by id or name to its SDSs.
func (m *maintSnapshot) faultSetMembers(ref string) (FaultSet, []SDS, error) {
	var fs FaultSet
	found := false
	for _, f := range m.faultSets {
		if f.ID == ref || (!found && f.Name == ref) {
			fs, found = f, true
		}
	}
	if !found {
		return fs, nil, notFoundf("fault set %q not found; list them with `cairnctl faultset ls`", ref)
	}
	var members []SDS
	for _, x := range m.sdss {
		if x.FaultSetID == fs.ID {
			members = append(members, x)
		}
	}
	if len(members) == 0 {
		return fs, nil, invalidf("fault set %q holds no SDS", fs.Name)
	}
	return fs, members, nil
}

// guards compare true while nothing the decision read has changed: no SDS
// or placement map written since the snapshot, and every liveness key the
// decision relied upon still the same lease's key.
func (m *maintSnapshot) guards(reliedLive []string) []clientv3.Cmp {
	cmps := []clientv3.Cmp{
		unchangedSince(KindSDS, m.rev),
		unchangedSince(KindDevice, m.rev),
		clientv3.Compare(clientv3.ModRevision(MapPrefix), "<", m.rev+1).WithPrefix(),
	}
	for _, id := range reliedLive {
		cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(LiveKey(id)), "=", m.live[id]))
	}
	return cmps
}

// maintenanceRetries bounds retries of a maintenance change whose snapshot
// was overtaken (placement maps change often while the cluster heals).
const maintenanceRetries = 8

// maintenanceHook, when set (tests only), runs between a decision and its
// transaction.
var maintenanceHook func()

// EnterMaintenance puts SDSs (ids or names) into maintenance, mode
// "instant" or "protected", all at once in one transaction. It refuses,
// changing nothing, when an SDS is not in state normal, or when any
// placement group with a copy on one of them would be left without a
// ready copy on a live SDS in state normal outside the set, or (instant
// mode) while such a group is still being rebuilt or resynced.
func (s *Store) EnterMaintenance(ctx context.Context, sdsRefs []string, mode string) ([]SDS, error) {
	if len(sdsRefs) == 0 {
		return nil, invalidf("give at least one SDS to put into maintenance")
	}
	return s.changeMaintenance(ctx, mode, func(m *maintSnapshot) ([]SDS, string, error) {
		set, err := m.pick(sdsRefs)
		return set, "", err
	})
}

// EnterFaultSetMaintenance puts every SDS of a fault set (id or name) into
// maintenance at once, with the checks of EnterMaintenance.
func (s *Store) EnterFaultSetMaintenance(ctx context.Context, fsRef, mode string) ([]SDS, error) {
	return s.changeMaintenance(ctx, mode, func(m *maintSnapshot) ([]SDS, string, error) {
		fs, set, err := m.faultSetMembers(fsRef)
		return set, fs.Name, err
	})
}

// ExitMaintenance returns SDSs (ids or names) from maintenance to state
// normal: their copies resync (instant) or are trimmed/resynced by the
// leader. Refused, changing nothing, unless every SDS is in maintenance.
func (s *Store) ExitMaintenance(ctx context.Context, sdsRefs []string) ([]SDS, error) {
	if len(sdsRefs) == 0 {
		return nil, invalidf("give at least one SDS to take out of maintenance")
	}
	return s.changeMaintenance(ctx, "", func(m *maintSnapshot) ([]SDS, string, error) {
		set, err := m.pick(sdsRefs)
		return set, "", err
	})
}

// ExitFaultSetMaintenance returns every SDS of a fault set from maintenance.
func (s *Store) ExitFaultSetMaintenance(ctx context.Context, fsRef string) ([]SDS, error) {
	return s.changeMaintenance(ctx, "", func(m *maintSnapshot) ([]SDS, string, error) {
		fs, set, err := m.faultSetMembers(fsRef)
		return set, fs.Name, err
	})
}

func (m *maintSnapshot) pick(refs []string) ([]SDS, error) {
	var set []SDS
	seen := map[string]bool{}
	for _, ref := range refs {
		x, ok := m.sds(ref)
		if !ok {
			return nil, notFoundf("SDS %q not found; list them with `cairnctl sds ls`", ref)
		}
		if !seen[x.ID] {
			seen[x.ID] = true
			set = append(set, x)
		}
	}
	return set, nil
}

// changeMaintenance enters mode (or exits when mode is "") for the SDSs
// pick selects, retrying when the snapshot was overtaken.
func (s *Store) changeMaintenance(ctx context.Context, mode string, pick func(*maintSnapshot) ([]SDS, string, error)) ([]SDS, error) {
	target := SDSNormal
	if mode != "" {
		var err error
		if target, err = MaintenanceState(mode); err != nil {
			return nil, err
		}
	}
	var last error
	for attempt := 0; attempt < maintenanceRetries; attempt++ {
		m, err := s.maintSnapshot(ctx)
		if err != nil {
			return nil, err
		}
		set, fsName, err := pick(m)
		if err != nil {
			return nil, err
		}
		already := mode != "" // exiting a normal SDS stays an error: it names nothing to exit
		for _, x := range set {
			already = already && x.State == target
		}
		if already {
			return set, nil // a repeat: every SDS is where it was asked to be
		}
		var relied []string
		if mode != "" {
			relied, err = m.checkEnter(set, mode, fsName)
		} else {
			err = m.checkExit(set)
		}
		if err != nil {
			return nil, err
		}
		var ops []clientv3.Op
		for i := range set {
			set[i].State = target
			b, err := json.Marshal(set[i])
			if err != nil {
				return nil, err
			}
			ops = append(ops, clientv3.OpPut(Key(KindSDS, set[i].ID), string(b)))
		}
		if maintenanceHook != nil {
			maintenanceHook()
		}
		what := "maintenance of " + setNames(set)
		last = s.txn(ctx, what, m.guards(relied), ops...)
		if !errors.Is(last, ErrConflict) {
			if last != nil {
				return nil, last
			}
			return set, nil
		}
	}
	return nil, last
}

func setNames(set []SDS) string {
	names := make([]string, len(set))
	for i, x := range set {
		names[i] = x.Name
	}
	return "SDS " + nameList(names)
}

func (m *maintSnapshot) checkExit(set []SDS) error {
	for _, x := range set {
		if MaintenanceMode(x.State) == "" {
			return invalidf("SDS %q is not in maintenance (state %s); nothing to exit", x.Name, x.State)
		}
	}
	return nil
}

// checkEnter validates entering maintenance and returns the SDSs whose
// liveness the decision relied upon.
func (m *maintSnapshot) checkEnter(set []SDS, mode, fsName string) ([]string, error) {
	in := map[string]bool{}
	for _, x := range set {
		if MaintenanceMode(x.State) != "" {
			return nil, invalidf("SDS %q is already in maintenance (state %s); exit it first (`cairnctl sds maintenance exit %s`) to change the mode", x.Name, x.State, x.Name)
		}
		if x.State != SDSNormal {
			return nil, invalidf("SDS %q is in state %s, not normal; only a normal SDS can enter maintenance", x.Name, x.State)
		}
		in[x.ID] = true
	}
	what := setNames(set)
	if fsName != "" {
		what = fmt.Sprintf("fault set %q (%s)", fsName, what)
	}
	relied := map[string]bool{}
	var noCopy, busy int
	var example string
	for _, pm := range m.maps {
		for pg, copies := range pm.PGs {
			touches := false
			for _, c := range copies {
				if in[c.SDSID] {
					touches = true
				}
			}
			if !touches {
				continue
			}
			// A complete copy that stays: ready, on a live SDS in state
			// normal outside the set, on a usable device.
			var keeper string
			allReady := true
			for _, c := range copies {
				if c.State != CopyReady {
					allReady = false
				}
				if in[c.SDSID] || c.State != CopyReady {
					continue
				}
				x, ok := m.sdsByID(c.SDSID)
				_, live := m.live[c.SDSID]
				d, dok := m.devices[c.DeviceID]
				if ok && live && x.State == SDSNormal && dok && (d.State == DeviceNormal || d.State == DeviceRemoving) && keeper == "" {
					keeper = c.SDSID
				}
			}
			if keeper == "" {
				noCopy++
				if example == "" {
					example = fmt.Sprintf("pool %s placement group %d", m.poolNames[pm.PoolID], pg)
				}
				continue
			}
			relied[keeper] = true
			if mode == MaintenanceInstant && !allReady {
				busy++
			}
		}
	}
	if noCopy > 0 {
		return nil, invalidf("%s cannot enter maintenance: %s would have no complete copy on a running SDS outside it (e.g. %s); "+
			"bring the partner SDSs up and let rebuilds finish (`cairnctl system info`), or put fewer SDSs into maintenance at once",
			what, plural(noCopy, "placement group"), example)
	}
	if mode == MaintenanceProtected && len(relied) > 0 {
		// Protected mode builds a second complete copy off the set before
		// anything leaves: that needs two running fault domains outside it.
		domains := map[string]bool{}
		for _, x := range m.sdss {
			if _, live := m.live[x.ID]; !live || in[x.ID] || x.State != SDSNormal {
				continue
			}
			fd := x.FaultSetID
			if fd == "" {
				fd = "sds:" + x.ID
			}
			domains[fd] = true
		}
		if len(domains) < 2 {
			return nil, invalidf("%s cannot enter protected maintenance: only %d running fault domain(s) would remain to hold two copies; "+
				"bring the other SDSs up (or out of maintenance) first, or use --mode instant", what, len(domains))
		}
	}
	if busy > 0 {
		return nil, invalidf("%s cannot enter instant maintenance: %s holding its data are still being rebuilt or resynced; "+
			"wait for rebuild to finish: cairnctl system info (or use --mode protected)", what, plural(busy, "placement group"))
	}
	out := make([]string, 0, len(relied))
	for id := range relied {
		out = append(out, id)
	}
	return out, nil
}
