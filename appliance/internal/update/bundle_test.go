package update

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeBuild writes a "build" whose cairn is a script answering `version`
// with v and failing anything else (what a broken build looks like).
func fakeBuild(t testing.TB, v string) string {
	t.Helper()
	dir := t.TempDir()
	script := "#!/bin/sh\n[ \"$1\" = version ] && { echo " + v + "; exit 0; }\necho broken build >&2\nexit 1\n"
	for _, n := range Binaries {
		if err := os.WriteFile(filepath.Join(dir, n), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// bundleOf is the bundle of the build in dir: the one its own `cairn
// bundle` wrote there (buildCairn), or written here.
func bundleOf(t testing.TB, dir string) []byte {
	t.Helper()
	if raw, err := os.ReadFile(filepath.Join(dir, "bundle.tgz")); err == nil {
		return raw
	}
	var buf bytes.Buffer
	if _, err := Write(&buf, dir); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// A written bundle reads back: manifest, files, checksum of the whole.
func TestBundleRoundTrip(t *testing.T) {
	raw := bundleOf(t, fakeBuild(t, "3.4.5"))
	b, err := Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(raw)
	if b.Manifest.Version != "3.4.5" || b.Manifest.Format != Format || len(b.Files) != 2 ||
		b.SHA256 != hex.EncodeToString(sum[:]) || b.Size != int64(len(raw)) {
		t.Fatalf("bundle: %+v", b.Manifest)
	}
	if !strings.Contains(string(b.Files["cairn"]), "echo 3.4.5") {
		t.Fatal("cairn's content is not the build's")
	}
	// A build whose cairn does not answer a release is refused.
	if _, err := Write(&bytes.Buffer{}, fakeBuild(t, "dev")); err == nil || !strings.Contains(err.Error(), "not a release number") {
		t.Fatalf("bundle of a build answering 'dev': %v", err)
	}
}

type entry struct {
	name string
	typ  byte
	data []byte
	link string
}

func tarGz(t testing.TB, es []entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, e := range es {
		typ := e.typ
		if typ == 0 {
			typ = tar.TypeReg
		}
		h := &tar.Header{Name: e.name, Typeflag: typ, Mode: 0o755, Linkname: e.link}
		if typ == tar.TypeReg {
			h.Size = int64(len(e.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		tw.Write(e.data)
	}
	tw.Close()
	zw.Close()
	return buf.Bytes()
}

func manifestOf(v string, files map[string][]byte) []byte {
	m := Manifest{Format: Format, Version: v, Files: map[string]string{}}
	for n, b := range files {
		s := sha256.Sum256(b)
		m.Files[n] = hex.EncodeToString(s[:])
	}
	j, _ := json.Marshal(m)
	return j
}

// Every way a bundle can be wrong is refused with ErrInvalid and a reason.
func TestBundleRefused(t *testing.T) {
	c, cc := []byte("cairn"), []byte("cairnctl")
	good := manifestOf("1.2.3", map[string][]byte{"cairn": c, "cairnctl": cc})
	cases := map[string]struct {
		raw  []byte
		want string
	}{
		"not gzip":    {[]byte("hello"), "not gzip"},
		"no manifest": {tarGz(t, []entry{{name: "cairn", data: c}, {name: "cairnctl", data: cc}}), "no manifest.json"},
		"path":        {tarGz(t, []entry{{name: ManifestName, data: good}, {name: "bin/cairn", data: c}}), "unexpected file"},
		"dot dot":     {tarGz(t, []entry{{name: ManifestName, data: good}, {name: "../cairn", data: c}}), "unexpected file"},
		"symlink":     {tarGz(t, []entry{{name: ManifestName, data: good}, {name: "cairn", typ: tar.TypeSymlink, link: "/etc/passwd"}}), "not a regular file"},
		"device":      {tarGz(t, []entry{{name: ManifestName, data: good}, {name: "cairn", typ: tar.TypeChar}}), "not a regular file"},
		"directory":   {tarGz(t, []entry{{name: "x/", typ: tar.TypeDir}}), "not a regular file"},
		"extra file":  {tarGz(t, []entry{{name: ManifestName, data: good}, {name: "cairn", data: c}, {name: "cairnctl", data: cc}, {name: "evil", data: c}}), "unexpected file"},
		"twice":       {tarGz(t, []entry{{name: ManifestName, data: good}, {name: "cairn", data: c}, {name: "cairn", data: c}}), "twice"},
		"missing":     {tarGz(t, []entry{{name: ManifestName, data: good}, {name: "cairn", data: c}}), "listed but missing"},
		"checksum":    {tarGz(t, []entry{{name: ManifestName, data: good}, {name: "cairn", data: []byte("evil")}, {name: "cairnctl", data: cc}}), "damaged"},
		"version": {tarGz(t, []entry{{name: ManifestName, data: manifestOf("1.2.3; rm -rf /", map[string][]byte{"cairn": c, "cairnctl": cc})},
			{name: "cairn", data: c}, {name: "cairnctl", data: cc}}), "not a release number"},
		"format": {tarGz(t, []entry{{name: ManifestName, data: bytes.Replace(good, []byte(`"format":1`), []byte(`"format":2`), 1)},
			{name: "cairn", data: c}, {name: "cairnctl", data: cc}}), "format 2"},
		"unlisted": {tarGz(t, []entry{{name: ManifestName, data: manifestOf("1.2.3", map[string][]byte{"cairn": c})},
			{name: "cairn", data: c}}), "lists 1 files"},
		"big manifest": {tarGz(t, []entry{{name: ManifestName, data: make([]byte, MaxManifestSize+1)}}), "over the bound"},
	}
	for name, tc := range cases {
		_, err := Parse(tc.raw)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want ErrInvalid saying %q", name, err, tc.want)
		}
	}
	// Over the size bound, before anything is unpacked.
	if _, err := Read(bytes.NewReader(make([]byte, MaxBundleSize+10))); !errors.Is(err, ErrInvalid) {
		t.Errorf("a bundle over %d bytes: %v", MaxBundleSize, err)
	}
}

// The bundle reader is the parser of what arrives at the gateway (POST
// /upgrade/bundles) and at every SVM from etcd: any input is refused or
// verified, never a panic, and what it accepts holds exactly the listed
// files with their checksums.
func FuzzParseBundle(f *testing.F) {
	c, cc := []byte("cairn"), []byte("cairnctl")
	f.Add(tarGz(f, []entry{{name: ManifestName, data: manifestOf("1.2.3", map[string][]byte{"cairn": c, "cairnctl": cc})},
		{name: "cairn", data: c}, {name: "cairnctl", data: cc}}))
	f.Add(tarGz(f, []entry{{name: "cairn", typ: tar.TypeSymlink, link: "x"}}))
	f.Add([]byte{0x1f, 0x8b})
	f.Fuzz(func(t *testing.T, raw []byte) {
		b, err := Parse(raw)
		if err != nil {
			return
		}
		if !ValidVersion(b.Manifest.Version) || len(b.Files) != len(Binaries) {
			t.Fatalf("accepted %+v", b.Manifest)
		}
		for n, data := range b.Files {
			s := sha256.Sum256(data)
			if b.Manifest.Files[n] != hex.EncodeToString(s[:]) {
				t.Fatalf("accepted %s with a wrong checksum", n)
			}
		}
	})
}
