// Package lio keeps the kernel's LIO iSCSI target configuration in line with
// the volumes Cairn maps: one `user:` (TCMU) backstore per volume, one target
// IQN per SVM with TPG 1, its portals, and one ACL per host initiator. It
// reads the current state from configfs, computes the difference as a list
// of actions (pure, unit-tested) and applies it through rtslib-fb.
package lio

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// BackstorePrefix marks the backstores Cairn owns; others are never touched.
// A backstore is named prefix + volume id (16 hex digits, no dash), so
// targets with different prefixes (two `cairn target` processes in one test
// guest, "cairn-" and "cairn-b-") never take each other's backstores.
const BackstorePrefix = "cairn-"

// Owns reports whether a backstore name belongs to the target using prefix.
func Owns(prefix, name string) bool {
	rest, ok := strings.CutPrefix(name, prefix)
	return ok && rest != "" && !strings.Contains(rest, "-")
}

// DevConfigPrefix starts the dev_config of every Cairn backstore: the kernel
// names its uio device "tcm-user/<hba>/<name>/<dev_config>".
const DevConfigPrefix = "cairn/"

// Backstore is one TCMU user backstore serving one volume.
type Backstore struct {
	Name   string `json:"name"`   // prefix + volume id
	Config string `json:"config"` // DevConfigPrefix + volume id
	Size   int64  `json:"size"`   // bytes
	// Serial is the volume's unit serial, set as the backstore's
	// vpd_unit_serial so LIO's own view matches what Cairn answers.
	Serial string `json:"serial"`
	// Attributes are the kernel attributes (attrib/<name>) Cairn sets on
	// the backstore: RequiredAttributes in a desired state, what configfs
	// shows for those names in a state read back.
	Attributes map[string]string `json:"attributes,omitempty"`
}

// RequiredAttributes are set on every Cairn backstore before a LUN exports
// it (rtslib_apply.py checks the kernel can, and says what to do if not):
//
//   - alua_support=0: LIO passes REPORT TARGET PORT GROUPS (and SET) to
//     Cairn, whose answer is identical on every SVM; LIO's own emulation
//     answers per SVM (TRANSPORT_FLAG_PASSTHROUGH_ALUA).
//   - emulate_pr=0: LIO refuses PERSISTENT RESERVE IN/OUT and RESERVE/
//     RELEASE(6/10) with INVALID COMMAND OPERATION CODE. Its emulation is
//     per SVM, so a reservation taken through one SVM would not fence
//     writes through another: no WSFC shared disks (docs/vsphere.md).
var RequiredAttributes = map[string]string{"alua_support": "0", "emulate_pr": "0"}

// BackstoreName is the backstore name for a volume id.
func BackstoreName(prefix, volumeID string) string { return prefix + volumeID }

// Credentials is a CHAP user name and secret.
type Credentials struct {
	User   string `json:"user"`
	Secret string `json:"secret"`
}

// ACL lets one initiator log in and see some LUNs.
type ACL struct {
	Initiator string      `json:"initiator"`
	CHAP      Credentials `json:"chap"`   // the initiator's CHAP secret (empty: none)
	Mutual    Credentials `json:"mutual"` // the target's secret for mutual CHAP (empty: none)
	// LUNs maps the LUN number the initiator sees to the TPG LUN; Cairn
	// uses the same number for both.
	LUNs map[int]MappedLUN `json:"luns"`
}

// MappedLUN is one LUN of an ACL.
type MappedLUN struct {
	TPGLUN   int  `json:"tpg_lun"`
	ReadOnly bool `json:"read_only"`
}

// Target is this SVM's iSCSI target: TPG 1 and what hangs below it.
type Target struct {
	IQN     string   `json:"iqn"`
	Portals []string `json:"portals"` // "ip:port", IPv6 as "[addr]:port"
	// Authentication requires CHAP from every initiator of the TPG.
	Authentication bool              `json:"authentication"`
	LUNs           map[int]string    `json:"luns"` // TPG LUN number -> backstore name
	ACLs           map[string]ACL    `json:"acls"` // by initiator IQN
	Enabled        bool              `json:"enabled"`
	Attributes     map[string]string `json:"-"` // as read; only checked keys matter
}

// State is the part of LIO's configuration that Cairn owns.
type State struct {
	Prefix     string               // names of owned backstores start with it
	Backstores map[string]Backstore // by name, only owned ones
	Target     *Target              // nil: our IQN does not exist
}

// Action is one step of a plan, executed in order by Applier. Exactly the
// fields its Op needs are set.
type Action struct {
	Op        string     `json:"op"`
	Backstore *Backstore `json:"backstore,omitempty"`
	Name      string     `json:"name,omitempty"`
	Size      int64      `json:"size,omitempty"`
	IQN       string     `json:"iqn,omitempty"`
	Auth      *bool      `json:"authentication,omitempty"`
	Portal    string     `json:"portal,omitempty"`
	LUN       int        `json:"lun"`
	ACL       *ACL       `json:"acl,omitempty"`
	Initiator string     `json:"initiator,omitempty"`
	Mapped    *MappedLUN `json:"mapped,omitempty"`
}

// Action operations.
const (
	OpCreateBackstore = "create_backstore"
	OpResizeBackstore = "resize_backstore"
	OpDeleteBackstore = "delete_backstore"
	// OpConfigureBackstore sets Backstore.Attributes on an existing
	// backstore (one made by an older Cairn, or restored from a saved
	// configuration without them).
	OpConfigureBackstore = "configure_backstore"
	OpEnsureTarget       = "ensure_target" // create IQN/TPG 1 if missing, set attributes, enable
	OpAddPortal          = "add_portal"
	OpRemovePortal       = "remove_portal"
	OpAddLUN             = "add_lun"
	OpRemoveLUN          = "remove_lun"
	OpAddACL             = "add_acl"      // with its CHAP settings, no LUNs
	OpSetACLAuth         = "set_acl_auth" // CHAP settings of an existing ACL
	OpRemoveACL          = "remove_acl"
	OpMapLUN             = "map_lun"
	OpUnmapLUN           = "unmap_lun"
)

// Plan is the difference between two states in two phases. Before holds
// every change that does not destroy a backstore; After deletes the
// backstores no LUN uses any more. Between the two the caller stops serving
// those backstores' rings: removing a LUN waits for its commands, so the
// rings must still be served while Before runs.
type Plan struct {
	Before []Action
	After  []Action
}

// Empty reports whether nothing needs to change.
func (p Plan) Empty() bool { return len(p.Before) == 0 && len(p.After) == 0 }

// Diff computes the actions that turn current into desired. desired.Target
// must be set. Order inside Before: backstores, target, portals, stale ACL
// mappings and ACLs, stale LUNs, new LUNs, new ACLs and mappings.
func Diff(current, desired State) (Plan, error) {
	var p Plan
	dt := desired.Target
	if dt == nil {
		return p, fmt.Errorf("lio: desired state has no target")
	}
	for _, name := range slices.Sorted(maps.Keys(desired.Backstores)) {
		b := desired.Backstores[name]
		if !Owns(desired.Prefix, name) || name != b.Name {
			return p, fmt.Errorf("lio: backstore %q: name must be %q+volume id", name, desired.Prefix)
		}
		if cur, ok := current.Backstores[name]; !ok {
			p.Before = append(p.Before, Action{Op: OpCreateBackstore, Backstore: &b})
		} else {
			if cur.Size != b.Size {
				p.Before = append(p.Before, Action{Op: OpResizeBackstore, Name: name, Size: b.Size})
			}
			for k, v := range b.Attributes {
				if cur.Attributes[k] != v {
					p.Before = append(p.Before, Action{Op: OpConfigureBackstore, Name: name, Backstore: &b})
					break
				}
			}
		}
	}
	for lun, bs := range dt.LUNs {
		if _, ok := desired.Backstores[bs]; !ok {
			return p, fmt.Errorf("lio: LUN %d uses backstore %q that is not in the desired state", lun, bs)
		}
	}
	ct := current.Target
	if ct == nil {
		ct = &Target{IQN: dt.IQN}
	}
	if current.Target == nil || !ct.Enabled || ct.Authentication != dt.Authentication ||
		ct.Attributes["generate_node_acls"] != "0" {
		auth := dt.Authentication
		p.Before = append(p.Before, Action{Op: OpEnsureTarget, IQN: dt.IQN, Auth: &auth})
	}
	for _, np := range sortedDiff(dt.Portals, ct.Portals) {
		p.Before = append(p.Before, Action{Op: OpAddPortal, IQN: dt.IQN, Portal: np})
	}
	for _, np := range sortedDiff(ct.Portals, dt.Portals) {
		p.Before = append(p.Before, Action{Op: OpRemovePortal, IQN: dt.IQN, Portal: np})
	}
	// A TPG LUN is kept when it still points at the same backstore.
	lunKept := func(lun int) bool {
		bs, ok := ct.LUNs[lun]
		return ok && dt.LUNs[lun] == bs
	}
	// Stale mappings and ACLs first, so no initiator keeps a path to a LUN
	// that is about to go.
	for _, ini := range slices.Sorted(maps.Keys(ct.ACLs)) {
		ca := ct.ACLs[ini]
		da, ok := dt.ACLs[ini]
		if !ok {
			p.Before = append(p.Before, Action{Op: OpRemoveACL, IQN: dt.IQN, Initiator: ini})
			continue
		}
		for _, ml := range slices.Sorted(maps.Keys(ca.LUNs)) {
			want, ok := da.LUNs[ml]
			if !ok || want != ca.LUNs[ml] || !lunKept(ca.LUNs[ml].TPGLUN) {
				p.Before = append(p.Before, Action{Op: OpUnmapLUN, IQN: dt.IQN, Initiator: ini, LUN: ml})
			}
		}
	}
	for _, lun := range slices.Sorted(maps.Keys(ct.LUNs)) {
		if !lunKept(lun) {
			p.Before = append(p.Before, Action{Op: OpRemoveLUN, IQN: dt.IQN, LUN: lun})
		}
	}
	for _, lun := range slices.Sorted(maps.Keys(dt.LUNs)) {
		if !lunKept(lun) {
			p.Before = append(p.Before, Action{Op: OpAddLUN, IQN: dt.IQN, LUN: lun, Name: dt.LUNs[lun]})
		}
	}
	for _, ini := range slices.Sorted(maps.Keys(dt.ACLs)) {
		da := dt.ACLs[ini]
		ca, ok := ct.ACLs[ini]
		if !ok {
			a := ACL{Initiator: ini, CHAP: da.CHAP, Mutual: da.Mutual}
			p.Before = append(p.Before, Action{Op: OpAddACL, IQN: dt.IQN, ACL: &a})
		} else if ca.CHAP != da.CHAP || ca.Mutual != da.Mutual {
			a := ACL{Initiator: ini, CHAP: da.CHAP, Mutual: da.Mutual}
			p.Before = append(p.Before, Action{Op: OpSetACLAuth, IQN: dt.IQN, ACL: &a})
		}
		for _, ml := range slices.Sorted(maps.Keys(da.LUNs)) {
			m := da.LUNs[ml]
			if _, ok := dt.LUNs[m.TPGLUN]; !ok {
				return p, fmt.Errorf("lio: ACL %s maps LUN %d to TPG LUN %d that does not exist", ini, ml, m.TPGLUN)
			}
			cur, had := ca.LUNs[ml]
			if !had || cur != m || !lunKept(m.TPGLUN) {
				p.Before = append(p.Before, Action{Op: OpMapLUN, IQN: dt.IQN, Initiator: ini, LUN: ml, Mapped: &m})
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(current.Backstores)) {
		if _, ok := desired.Backstores[name]; !ok {
			p.After = append(p.After, Action{Op: OpDeleteBackstore, Name: name})
		}
	}
	return p, nil
}

// sortedDiff returns the elements of a not in b, sorted.
func sortedDiff(a, b []string) []string {
	var out []string
	for _, x := range a {
		if !slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Export is one volume as the target exports it.
type Export struct {
	VolumeID string
	Size     int64
	Serial   string
	LUN      int // the LUN number every host sees it as
	Hosts    []HostAccess
}

// HostAccess is one initiator allowed to see an export.
type HostAccess struct {
	IQN      string
	CHAP     Credentials // empty: no CHAP for this host
	ReadOnly bool
}

// Desired builds the state LIO should have for exports on target iqn, with
// backstores named prefix + volume id.
// Mutual CHAP credentials (the target's own secret) apply to every host that
// uses CHAP. CHAP is per TPG in LIO: as soon as one host has credentials,
// every host must have them (ACLs without are refused at login).
func Desired(prefix, iqn string, portals []string, mutual Credentials, exports []Export) (State, error) {
	st := State{Prefix: prefix, Backstores: map[string]Backstore{}, Target: &Target{
		IQN: iqn, Portals: slices.Clone(portals), LUNs: map[int]string{}, ACLs: map[string]ACL{}, Enabled: true,
		Attributes: map[string]string{"generate_node_acls": "0"},
	}}
	for _, e := range exports {
		name := BackstoreName(prefix, e.VolumeID)
		if e.VolumeID == "" || strings.ContainsAny(e.VolumeID, "/:- \t\n") {
			return st, fmt.Errorf("lio: volume id %q cannot name a backstore", e.VolumeID)
		}
		if other, dup := st.Target.LUNs[e.LUN]; dup {
			return st, fmt.Errorf("lio: LUN %d assigned to both %s and %s", e.LUN, other, name)
		}
		if e.LUN < 0 || e.LUN > 16383 {
			return st, fmt.Errorf("lio: LUN %d of volume %s out of range 0..16383", e.LUN, e.VolumeID)
		}
		st.Backstores[name] = Backstore{Name: name, Config: DevConfigPrefix + e.VolumeID, Size: e.Size, Serial: e.Serial,
			Attributes: maps.Clone(RequiredAttributes)}
		st.Target.LUNs[e.LUN] = name
		for _, h := range e.Hosts {
			a, ok := st.Target.ACLs[h.IQN]
			if !ok {
				a = ACL{Initiator: h.IQN, CHAP: h.CHAP, LUNs: map[int]MappedLUN{}}
				if h.CHAP.User != "" {
					a.Mutual = mutual
					st.Target.Authentication = true
				}
			}
			a.LUNs[e.LUN] = MappedLUN{TPGLUN: e.LUN, ReadOnly: h.ReadOnly}
			st.Target.ACLs[h.IQN] = a
		}
	}
	return st, nil
}
