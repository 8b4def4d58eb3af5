package firstboot

import (
	"github.com/cairn-storage/cairn/appliance/contract"
	"maps"
	"slices"

	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// NoCloud-style seed, format version 1. Where there is no vSphere (qemu, KVM, bare
// metal) the settings come from a directory — the root of a filesystem labelled CIDATA,
// as cloud-init's NoCloud datasource uses, or a path given with --seed — holding:
//
//	meta-data   flat "key: value" lines; Cairn reads local-hostname (fallback for
//	            cairn.hostname) and instance-id (recorded), and ignores other keys.
//	user-data   first line exactly "#cairn-config v1", then "key: value" lines with
//	            the keys of the vApp properties (cairn.hostname, cairn.roles, ...).
//
// Both are a strict subset of YAML: one "key: value" per line, '#' starts a comment line,
// blank lines are ignored, a value may be wrapped in matching single or double quotes
// (taken literally, no escapes). Nesting, lists, multi-line values and duplicate keys
// are errors. A --seed path may also name a single user-data file.

// UserDataHeader is the required first line of a Cairn user-data file.
const UserDataHeader = "#cairn-config v1"

const (
	maxSeedFileBytes = 64 << 10
	maxSeedLines     = 256
)

// SeedLabel is the filesystem label of a NoCloud seed disk.
const SeedLabel = "CIDATA"

// ParseUserData parses a Cairn user-data document (format above) into key/value pairs.
func ParseUserData(doc []byte) (map[string]string, error) {
	if len(doc) > maxSeedFileBytes {
		return nil, fmt.Errorf("user-data is %d bytes, larger than the %d accepted", len(doc), maxSeedFileBytes)
	}
	first, _, _ := bytes.Cut(doc, []byte("\n"))
	if strings.TrimRight(string(first), "\r ") != UserDataHeader {
		return nil, fmt.Errorf("user-data must start with the line %q (cloud-config and scripts are not supported)", UserDataHeader)
	}
	return parseFlat("user-data", doc, true)
}

// ParseMetaData parses a NoCloud meta-data document and returns its keys.
func ParseMetaData(doc []byte) (map[string]string, error) {
	if len(doc) > maxSeedFileBytes {
		return nil, fmt.Errorf("meta-data is %d bytes, larger than the %d accepted", len(doc), maxSeedFileBytes)
	}
	return parseFlat("meta-data", doc, false)
}

func parseFlat(name string, doc []byte, onlyCairn bool) (map[string]string, error) {
	out := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(doc))
	sc.Buffer(make([]byte, 0, 4096), contract.MaxValueLen+256)
	n := 0
	for sc.Scan() {
		n++
		if n > maxSeedLines {
			return nil, fmt.Errorf("%s has more than %d lines", name, maxSeedLines)
		}
		line := strings.TrimRight(sc.Text(), "\r")
		trimmed := strings.TrimSpace(line)
		if trimmed == "" || strings.HasPrefix(trimmed, "#") || (n == 1 && trimmed == "---") {
			continue
		}
		if line != strings.TrimLeft(line, " \t") {
			return nil, fmt.Errorf("%s line %d: indented line; only flat \"key: value\" lines are supported", name, n)
		}
		key, value, ok := strings.Cut(line, ":")
		key = strings.TrimSpace(key)
		if !ok || key == "" || strings.ContainsAny(key, " \t\"'") {
			return nil, fmt.Errorf("%s line %d: expected \"key: value\"", name, n)
		}
		if value != "" && value[0] != ' ' && value[0] != '\t' {
			return nil, fmt.Errorf("%s line %d: expected a space after %q", name, n, contract.Clip(key)+":")
		}
		value = strings.TrimSpace(value)
		if l := len(value); l >= 2 && (value[0] == '"' || value[0] == '\'') {
			if value[l-1] != value[0] {
				return nil, fmt.Errorf("%s line %d: unterminated quoted value", name, n)
			}
			value = value[1 : l-1]
		} else if strings.HasPrefix(value, "|") || strings.HasPrefix(value, ">") || strings.HasPrefix(value, "[") || strings.HasPrefix(value, "{") || strings.HasPrefix(value, "&") || strings.HasPrefix(value, "*") || strings.HasPrefix(value, "!") {
			return nil, fmt.Errorf("%s line %d: YAML block, flow, anchor and tag syntax is not supported; quote the value", name, n)
		}
		if onlyCairn && !strings.HasPrefix(key, "cairn.") {
			return nil, fmt.Errorf("%s line %d: unknown key %q (keys are the cairn.* settings)", name, n, contract.Clip(key))
		}
		if _, dup := out[key]; dup {
			return nil, fmt.Errorf("%s line %d: key %q given twice", name, n, contract.Clip(key))
		}
		if len(out) >= contract.MaxSettings {
			return nil, fmt.Errorf("%s has more than %d keys", name, contract.MaxSettings)
		}
		out[key] = value
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s line %d: %w", name, n+1, err)
	}
	return out, nil
}

// Seed is what a NoCloud seed provided.
type Seed struct {
	Settings   map[string]string
	InstanceID string
}

// ReadSeed reads a seed from path: a directory with user-data (and optionally
// meta-data), or a single user-data file. meta-data's local-hostname fills
// cairn.hostname when user-data leaves it out.
func ReadSeed(path string) (*Seed, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("seed %s: %w", path, err)
	}
	userPath, metaPath := path, ""
	if fi.IsDir() {
		userPath, metaPath = filepath.Join(path, "user-data"), filepath.Join(path, "meta-data")
	}
	ud, err := readBounded(userPath)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("seed %s has no user-data file: %w", path, contract.ErrNoSettings)
	}
	if err != nil {
		return nil, err
	}
	settings, err := ParseUserData(ud)
	if err != nil {
		return nil, fmt.Errorf("seed %s: %w", userPath, err)
	}
	seed := &Seed{Settings: settings}
	if metaPath != "" {
		md, err := readBounded(metaPath)
		switch {
		case errors.Is(err, os.ErrNotExist):
		case err != nil:
			return nil, err
		default:
			meta, err := ParseMetaData(md)
			if err != nil {
				return nil, fmt.Errorf("seed %s: %w", metaPath, err)
			}
			seed.InstanceID = meta["instance-id"]
			if h, ok := meta["local-hostname"]; ok {
				if _, set := settings[contract.KeyHostname]; !set {
					settings[contract.KeyHostname] = h
				}
			}
		}
	}
	return seed, nil
}

// readBounded reads at most maxSeedFileBytes+1 bytes, so a huge file is rejected by the
// parser's size check without being read whole.
func readBounded(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxSeedFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return b, nil
}

// EncodeUserData writes settings in the user-data format, for tests and tooling. A value
// holding both quote characters or a newline cannot be written in this format and is
// reported as an error.
func EncodeUserData(props map[string]string) ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(UserDataHeader + "\n")
	for _, k := range slices.Sorted(maps.Keys(props)) {
		v := props[k]
		q := `"`
		if strings.Contains(v, q) {
			q = "'"
		}
		if strings.Contains(v, q) || strings.ContainsAny(v, "\r\n") {
			return nil, fmt.Errorf("user-data: value of %s cannot be encoded (newline or both quote characters)", k)
		}
		fmt.Fprintf(&b, "%s: %s%s%s\n", k, q, v, q)
	}
	return b.Bytes(), nil
}
