// Package update owns getting a new Cairn version onto an SVM: the update
// bundle (its format, writer and verifying reader), installing a bundle's
// binaries beside the running ones and switching to them with a health check
// and an automatic roll back (Installer), the bundles, orders and states kept
// in etcd for delivery through the gateway (store.go), and the SVM's updater
// loop that carries an order out (Updater). docs/architecture.md, "Upgrade",
// tells the whole story.
package update

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"
)

// Bundle format 1 is a gzip'd tar (ustar or PAX headers) of regular files
// only, at the top level (no directories, paths, links or devices):
//
//	manifest.json  {"format":1,"version":"X.Y.Z","files":{"cairn":"<sha256 hex>","cairnctl":"<sha256 hex>"}}
//	cairn          the cairn binary of that version
//	cairnctl       the cairnctl binary of that version
//
// Every file the manifest names is present exactly once with that SHA-256,
// and nothing else is. The bundle is at most MaxBundleSize bytes as stored
// and its files together at most MaxBundleSize bytes unpacked; the manifest
// at most MaxManifestSize. A later format adds a file or a field with a new
// number; a reader refuses a format it does not know.
const (
	Format          = 1
	ManifestName    = "manifest.json"
	MaxBundleSize   = 256 << 20
	MaxManifestSize = 64 << 10
)

// Binaries are the files of a bundle, the programs /usr/local/bin holds.
var Binaries = []string{"cairn", "cairnctl"}

// ErrInvalid marks a bundle that is not a valid bundle of this format.
var ErrInvalid = errors.New("invalid update bundle")

// Manifest is manifest.json.
type Manifest struct {
	Format  int               `json:"format"`
	Version string            `json:"version"`
	Files   map[string]string `json:"files"` // name -> SHA-256, lower-case hex
}

// Bundle is a verified bundle.
type Bundle struct {
	Manifest Manifest
	Files    map[string][]byte
	SHA256   string // of the bundle as stored (the gzip stream)
	Size     int64
}

var versionRE = regexp.MustCompile(`^[0-9]{1,6}\.[0-9]{1,6}\.[0-9]{1,6}$`)

// ValidVersion says whether v is a release number MAJOR.MINOR.PATCH (what
// buildinfo carries and what names a version's directory on an SVM).
func ValidVersion(v string) bool { return versionRE.MatchString(v) }

func invalid(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, a...))
}

// VersionOf runs `binary version` and returns the release it prints.
func VersionOf(binary string) (string, error) {
	var out bytes.Buffer
	cmd := exec.Command(binary, "version")
	cmd.Stdout = &out
	cmd.Stderr = io.Discard
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		return "", fmt.Errorf("run %s version: %w", binary, err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			return "", fmt.Errorf("%s version: %w", binary, err)
		}
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		<-done
		return "", fmt.Errorf("%s version did not answer in 30 s", binary)
	}
	v := strings.TrimSpace(out.String())
	if !ValidVersion(v) {
		return "", fmt.Errorf("%s version printed %q, not a release number MAJOR.MINOR.PATCH", binary, v)
	}
	return v, nil
}

// Write writes the bundle of the binaries in dir (cairn, cairnctl) to w;
// its version is what dir/cairn says it is.
func Write(w io.Writer, dir string) (Manifest, error) {
	m := Manifest{Format: Format, Files: map[string]string{}}
	v, err := VersionOf(filepath.Join(dir, "cairn"))
	if err != nil {
		return m, err
	}
	m.Version = v
	data := map[string][]byte{}
	for _, name := range Binaries {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return m, fmt.Errorf("bundle needs %s in %s: %w", name, dir, err)
		}
		sum := sha256.Sum256(b)
		m.Files[name], data[name] = hex.EncodeToString(sum[:]), b
	}
	mj, err := json.Marshal(m)
	if err != nil {
		return m, err
	}
	zw := gzip.NewWriter(w)
	tw := tar.NewWriter(zw)
	add := func(name string, b []byte, mode int64) error {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(b)), ModTime: time.Unix(0, 0), Format: tar.FormatPAX}); err != nil {
			return err
		}
		_, err := tw.Write(b)
		return err
	}
	if err := add(ManifestName, mj, 0o644); err != nil {
		return m, err
	}
	for _, name := range Binaries {
		if err := add(name, data[name], 0o755); err != nil {
			return m, err
		}
	}
	if err := tw.Close(); err != nil {
		return m, err
	}
	return m, zw.Close()
}

// Read reads and verifies a bundle from r: it reads at most MaxBundleSize+1
// bytes of r and unpacks at most MaxBundleSize bytes. Any error wraps
// ErrInvalid, except a failure of r itself.
func Read(r io.Reader) (*Bundle, error) {
	raw, err := io.ReadAll(io.LimitReader(r, MaxBundleSize+1))
	if err != nil {
		return nil, fmt.Errorf("read update bundle: %w", err)
	}
	return Parse(raw)
}

// Parse verifies the bundle raw (see Read).
func Parse(raw []byte) (*Bundle, error) {
	if len(raw) > MaxBundleSize {
		return nil, invalid("larger than %d MiB", MaxBundleSize>>20)
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		return nil, invalid("not gzip: %v", err)
	}
	zr.Multistream(false)
	tr := tar.NewReader(zr)
	var manifest []byte
	files := map[string][]byte{}
	var unpacked int64
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, invalid("tar: %v", err)
		}
		if h.Typeflag != tar.TypeReg {
			return nil, invalid("%q is not a regular file (type %q): a bundle holds regular files only", h.Name, h.Typeflag)
		}
		if h.Name != ManifestName && !isBinary(h.Name) {
			return nil, invalid("unexpected file %q: a bundle holds %s and %s only", h.Name, ManifestName, strings.Join(Binaries, ", "))
		}
		if _, dup := files[h.Name]; dup || (h.Name == ManifestName && manifest != nil) {
			return nil, invalid("%q twice", h.Name)
		}
		limit := int64(MaxBundleSize) - unpacked
		if h.Name == ManifestName {
			limit = MaxManifestSize
		}
		if h.Size < 0 || h.Size > limit {
			return nil, invalid("%q is %d bytes, over the bound of %d", h.Name, h.Size, limit)
		}
		b, err := io.ReadAll(io.LimitReader(tr, h.Size+1))
		if err != nil {
			return nil, invalid("read %q: %v", h.Name, err)
		}
		if int64(len(b)) != h.Size {
			return nil, invalid("%q: %d bytes, its header says %d", h.Name, len(b), h.Size)
		}
		unpacked += h.Size
		if h.Name == ManifestName {
			manifest = b
		} else {
			files[h.Name] = b
		}
	}
	if manifest == nil {
		return nil, invalid("no %s", ManifestName)
	}
	var m Manifest
	dec := json.NewDecoder(bytes.NewReader(manifest))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return nil, invalid("%s: %v", ManifestName, err)
	}
	if m.Format != Format {
		return nil, invalid("format %d; this Cairn reads format %d (a newer bundle needs a newer Cairn to install it: upgrade through the versions between)", m.Format, Format)
	}
	if !ValidVersion(m.Version) {
		return nil, invalid("version %q is not a release number MAJOR.MINOR.PATCH", m.Version)
	}
	if len(m.Files) != len(Binaries) {
		return nil, invalid("manifest lists %d files; want exactly %s", len(m.Files), strings.Join(Binaries, ", "))
	}
	for _, name := range Binaries {
		want, ok := m.Files[name]
		if !ok {
			return nil, invalid("manifest does not list %s", name)
		}
		b, ok := files[name]
		if !ok {
			return nil, invalid("%s is listed but missing", name)
		}
		sum := sha256.Sum256(b)
		if got := hex.EncodeToString(sum[:]); got != want {
			return nil, invalid("%s: SHA-256 %s, the manifest says %s (the bundle is damaged)", name, got, want)
		}
	}
	sum := sha256.Sum256(raw)
	return &Bundle{Manifest: m, Files: files, SHA256: hex.EncodeToString(sum[:]), Size: int64(len(raw))}, nil
}

func isBinary(name string) bool {
	i := sort.SearchStrings(Binaries, name)
	return i < len(Binaries) && Binaries[i] == name
}
