package lio

import (
	"fmt"
	"maps"
	"slices"
)

// Simulate applies actions to st the way rtslib_apply.py applies them to
// the kernel, with the kernel's refusals (a backstore in use cannot be
// deleted, a mapping needs its TPG LUN). Tests use it to check that plans
// converge and to stand in for LIO.
func (st *State) Simulate(actions []Action) error {
	if st.Backstores == nil {
		st.Backstores = map[string]Backstore{}
	}
	for _, a := range actions {
		if err := st.simulate(a); err != nil {
			return fmt.Errorf("lio: simulate %s: %w", a.Op, err)
		}
	}
	return nil
}

func (st *State) simulate(a Action) error {
	t := st.Target
	needTarget := func() error {
		if t == nil || t.IQN != a.IQN {
			return fmt.Errorf("no target %s", a.IQN)
		}
		return nil
	}
	switch a.Op {
	case OpCreateBackstore:
		if _, ok := st.Backstores[a.Backstore.Name]; ok {
			return fmt.Errorf("backstore %s exists", a.Backstore.Name)
		}
		b := *a.Backstore
		b.Attributes = maps.Clone(b.Attributes)
		st.Backstores[b.Name] = b
	case OpConfigureBackstore:
		b, ok := st.Backstores[a.Name]
		if !ok {
			return fmt.Errorf("no backstore %s", a.Name)
		}
		b.Attributes = maps.Clone(a.Backstore.Attributes)
		st.Backstores[a.Name] = b
	case OpResizeBackstore:
		b, ok := st.Backstores[a.Name]
		if !ok {
			return fmt.Errorf("no backstore %s", a.Name)
		}
		b.Size = a.Size
		st.Backstores[a.Name] = b
	case OpDeleteBackstore:
		if t != nil && slices.Contains(slices.Collect(maps.Values(t.LUNs)), a.Name) {
			return fmt.Errorf("backstore %s still has a LUN", a.Name)
		}
		delete(st.Backstores, a.Name)
	case OpEnsureTarget:
		if t == nil {
			t = &Target{IQN: a.IQN, LUNs: map[int]string{}, ACLs: map[string]ACL{}}
			st.Target = t
		}
		t.Attributes = map[string]string{"generate_node_acls": "0"}
		t.Authentication = *a.Auth
		t.Enabled = true
	case OpAddPortal, OpRemovePortal:
		if err := needTarget(); err != nil {
			return err
		}
		has := slices.Contains(t.Portals, a.Portal)
		if a.Op == OpAddPortal {
			if has {
				return fmt.Errorf("portal %s exists", a.Portal)
			}
			t.Portals = append(t.Portals, a.Portal)
		} else {
			if !has {
				return fmt.Errorf("no portal %s", a.Portal)
			}
			t.Portals = slices.DeleteFunc(t.Portals, func(p string) bool { return p == a.Portal })
		}
	case OpAddLUN:
		if err := needTarget(); err != nil {
			return err
		}
		if _, ok := t.LUNs[a.LUN]; ok {
			return fmt.Errorf("LUN %d exists", a.LUN)
		}
		if _, ok := st.Backstores[a.Name]; !ok {
			return fmt.Errorf("no backstore %s", a.Name)
		}
		t.LUNs[a.LUN] = a.Name
	case OpRemoveLUN:
		if err := needTarget(); err != nil {
			return err
		}
		delete(t.LUNs, a.LUN)
		// the kernel removes the ACL mappings that point at the LUN
		for ini, acl := range t.ACLs {
			for ml, m := range acl.LUNs {
				if m.TPGLUN == a.LUN {
					delete(acl.LUNs, ml)
				}
			}
			t.ACLs[ini] = acl
		}
	case OpAddACL, OpSetACLAuth:
		if err := needTarget(); err != nil {
			return err
		}
		acl, ok := t.ACLs[a.ACL.Initiator]
		if ok == (a.Op == OpAddACL) {
			return fmt.Errorf("ACL %s: exists=%v", a.ACL.Initiator, ok)
		}
		if !ok {
			acl = ACL{Initiator: a.ACL.Initiator, LUNs: map[int]MappedLUN{}}
		}
		acl.CHAP, acl.Mutual = a.ACL.CHAP, a.ACL.Mutual
		t.ACLs[acl.Initiator] = acl
	case OpRemoveACL:
		if err := needTarget(); err != nil {
			return err
		}
		delete(t.ACLs, a.Initiator)
	case OpMapLUN, OpUnmapLUN:
		if err := needTarget(); err != nil {
			return err
		}
		acl, ok := t.ACLs[a.Initiator]
		if !ok {
			return fmt.Errorf("no ACL %s", a.Initiator)
		}
		delete(acl.LUNs, a.LUN)
		if a.Op == OpMapLUN {
			if _, ok := t.LUNs[a.Mapped.TPGLUN]; !ok {
				return fmt.Errorf("no TPG LUN %d", a.Mapped.TPGLUN)
			}
			acl.LUNs[a.LUN] = *a.Mapped
		}
	default:
		return fmt.Errorf("unknown op")
	}
	return nil
}
