package lio

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// ConfigfsRoot is where LIO's configfs tree is mounted.
const ConfigfsRoot = "/sys/kernel/config/target"

// ReadState reads the Cairn-owned part of LIO's configuration under root
// (ConfigfsRoot): the user backstores prefix owns (see Owns), and the iSCSI
// target iqn with its TPG 1. Reading configfs is cheap, so this runs on
// every sync; only changes go through rtslib.
func ReadState(root, iqn, prefix string) (State, error) {
	st := State{Prefix: prefix, Backstores: map[string]Backstore{}}
	hbas, err := filepath.Glob(filepath.Join(root, "core", "user_*"))
	if err != nil {
		return st, err
	}
	for _, hba := range hbas {
		ents, err := os.ReadDir(hba)
		if err != nil {
			return st, fmt.Errorf("lio: read %s: %w", hba, err)
		}
		for _, e := range ents {
			if !e.IsDir() || !Owns(prefix, e.Name()) {
				continue
			}
			dir := filepath.Join(hba, e.Name())
			b := Backstore{Name: e.Name()}
			info, err := os.ReadFile(filepath.Join(dir, "info"))
			if err != nil {
				return st, fmt.Errorf("lio: backstore %s: %w", dir, err)
			}
			b.Config, b.Size = parseUserInfo(string(info))
			b.Serial = readTrim(filepath.Join(dir, "wwn", "vpd_unit_serial"))
			b.Serial = strings.TrimSpace(strings.TrimPrefix(b.Serial, "T10 VPD Unit Serial Number:"))
			for name := range RequiredAttributes {
				if v, err := os.ReadFile(filepath.Join(dir, "attrib", name)); err == nil {
					if b.Attributes == nil {
						b.Attributes = map[string]string{}
					}
					b.Attributes[name] = strings.TrimSpace(string(v))
				}
			}
			st.Backstores[b.Name] = b
		}
	}
	tpg := filepath.Join(root, "iscsi", iqn, "tpgt_1")
	if _, err := os.Stat(tpg); errors.Is(err, os.ErrNotExist) {
		return st, nil
	} else if err != nil {
		return st, err
	}
	t := &Target{IQN: iqn, LUNs: map[int]string{}, ACLs: map[string]ACL{}, Attributes: map[string]string{}}
	t.Enabled = readTrim(filepath.Join(tpg, "enable")) == "1"
	for _, a := range []string{"authentication", "generate_node_acls", "demo_mode_write_protect", "cache_dynamic_acls"} {
		t.Attributes[a] = readTrim(filepath.Join(tpg, "attrib", a))
	}
	t.Authentication = t.Attributes["authentication"] == "1"
	nps, _ := os.ReadDir(filepath.Join(tpg, "np"))
	for _, np := range nps {
		if np.IsDir() {
			t.Portals = append(t.Portals, np.Name())
		}
	}
	luns, _ := os.ReadDir(filepath.Join(tpg, "lun"))
	for _, l := range luns {
		n, ok := lunNumber(l.Name())
		if !ok {
			continue
		}
		// lun_N holds one symlink to core/<hba>/<backstore>
		links, _ := os.ReadDir(filepath.Join(tpg, "lun", l.Name()))
		for _, ln := range links {
			if ln.Type()&os.ModeSymlink == 0 {
				continue
			}
			dest, err := os.Readlink(filepath.Join(tpg, "lun", l.Name(), ln.Name()))
			if err == nil {
				t.LUNs[n] = filepath.Base(dest)
			}
		}
		if _, ok := t.LUNs[n]; !ok {
			t.LUNs[n] = "" // a LUN without storage: removed by the next plan
		}
	}
	acls, _ := os.ReadDir(filepath.Join(tpg, "acls"))
	for _, a := range acls {
		if !a.IsDir() {
			continue
		}
		dir := filepath.Join(tpg, "acls", a.Name())
		acl := ACL{Initiator: a.Name(), LUNs: map[int]MappedLUN{}}
		acl.CHAP = Credentials{readTrim(filepath.Join(dir, "auth", "userid")), readTrim(filepath.Join(dir, "auth", "password"))}
		acl.Mutual = Credentials{readTrim(filepath.Join(dir, "auth", "userid_mutual")), readTrim(filepath.Join(dir, "auth", "password_mutual"))}
		mls, _ := os.ReadDir(dir)
		for _, ml := range mls {
			n, ok := lunNumber(ml.Name())
			if !ok {
				continue
			}
			m := MappedLUN{TPGLUN: -1, ReadOnly: readTrim(filepath.Join(dir, ml.Name(), "write_protect")) == "1"}
			links, _ := os.ReadDir(filepath.Join(dir, ml.Name()))
			for _, ln := range links {
				if ln.Type()&os.ModeSymlink == 0 {
					continue
				}
				if dest, err := os.Readlink(filepath.Join(dir, ml.Name(), ln.Name())); err == nil {
					if tl, ok := lunNumber(filepath.Base(dest)); ok {
						m.TPGLUN = tl
					}
				}
			}
			acl.LUNs[n] = m
		}
		t.ACLs[acl.Initiator] = acl
	}
	st.Target = t
	return st, nil
}

// parseUserInfo reads dev_config and size from a user backstore's info file:
// "Status: ... Config: cairn/x Size: 67108864 MaxDataAreaMB: ...".
func parseUserInfo(info string) (config string, size int64) {
	f := strings.Fields(info)
	for i := 0; i+1 < len(f); i++ {
		switch f[i] {
		case "Config:":
			config = f[i+1]
		case "Size:":
			size, _ = strconv.ParseInt(f[i+1], 10, 64)
		}
	}
	return config, size
}

func lunNumber(name string) (int, bool) {
	s, ok := strings.CutPrefix(name, "lun_")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	return n, err == nil && n >= 0
}

// readTrim returns a configfs attribute's value, "" when unreadable or
// unset (LIO shows unset CHAP names and secrets as "NULL").
func readTrim(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	v := strings.TrimSpace(string(b))
	if v == "NULL" {
		return ""
	}
	return v
}
