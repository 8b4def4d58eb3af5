package ova

import (
	"archive/tar"
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Layout of an OVA (OVF 1.0, DSP0243 section 5.3; what ovftool and vSphere expect):
//
//	member 1  NAME.ovf   the descriptor
//	member 2  NAME.mf    manifest, one "SHA256(file)= hex" line per other member
//	member 3+ the files of References, in References order (vSphere streams the
//	          archive and reads the disks in that order)
//
// Every header is POSIX ustar (magic "ustar\0", version "00"): no PAX or GNU extension
// headers, plain file names without directories or "./".

// File is a member to put into an OVA after the descriptor and manifest.
type File struct {
	Name string // name inside the archive
	Path string // file on disk
}

// Build writes an OVA to out: descriptor (named descName), a SHA256 manifest, then
// files. mtime stamps every member, so equal inputs give equal archives.
func Build(out, descName string, descriptor []byte, files []File, mtime time.Time) error {
	base := strings.TrimSuffix(descName, ".ovf")
	if base == descName || strings.Contains(descName, "/") {
		return fmt.Errorf("ova: descriptor name %q must be a plain NAME.ovf", descName)
	}
	var mf bytes.Buffer
	fmt.Fprintf(&mf, "SHA256(%s)= %x\n", descName, sha256.Sum256(descriptor))
	for _, f := range files {
		sum, err := sha256File(f.Path)
		if err != nil {
			return fmt.Errorf("ova: %w", err)
		}
		fmt.Fprintf(&mf, "SHA256(%s)= %s\n", f.Name, sum)
	}

	tmp := out + ".tmp"
	o, err := os.Create(tmp)
	if err != nil {
		return fmt.Errorf("ova: %w", err)
	}
	defer os.Remove(tmp) // no-op after the rename
	bw := bufio.NewWriterSize(o, 1<<20)
	tw := tar.NewWriter(bw)
	hdr := func(name string, size int64) *tar.Header {
		return &tar.Header{Name: name, Size: size, Mode: 0o644, ModTime: mtime.Truncate(time.Second),
			Typeflag: tar.TypeReg, Format: tar.FormatUSTAR, Uname: "root", Gname: "root"}
	}
	write := func(name string, r io.Reader, size int64) error {
		if err := tw.WriteHeader(hdr(name, size)); err != nil {
			return fmt.Errorf("ova: %s: %w", name, err)
		}
		if _, err := io.Copy(tw, r); err != nil {
			return fmt.Errorf("ova: %s: %w", name, err)
		}
		return nil
	}
	err = write(descName, bytes.NewReader(descriptor), int64(len(descriptor)))
	if err == nil {
		err = write(base+".mf", bytes.NewReader(mf.Bytes()), int64(mf.Len()))
	}
	for _, f := range files {
		if err != nil {
			break
		}
		var in *os.File
		if in, err = os.Open(f.Path); err != nil {
			break
		}
		var fi os.FileInfo
		if fi, err = in.Stat(); err == nil {
			err = write(f.Name, in, fi.Size())
		}
		in.Close()
	}
	if err == nil {
		err = tw.Close()
	}
	if err == nil {
		err = bw.Flush()
	}
	if err == nil {
		err = o.Sync()
	}
	if cerr := o.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("ova: write %s: %w", out, err)
	}
	return os.Rename(tmp, out)
}

func sha256File(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("hash %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// Member is one file found in an OVA.
type Member struct {
	Name   string
	Size   int64
	SHA256 string
}

// Report is the outcome of Check. The OVA is good when Problems is empty.
type Report struct {
	Members    []Member
	Properties []string // vApp property keys of the descriptor
	Disks      []DiskInfo
	Problems   []string
}

// DiskInfo describes one referenced VMDK.
type DiskInfo struct {
	Name       string
	CreateType string
	Capacity   int64 // bytes, from the sparse header
}

func (r *Report) bad(format string, args ...any) {
	r.Problems = append(r.Problems, fmt.Sprintf(format, args...))
}

// Limits that keep the checker bounded on hostile archives.
const (
	maxMembers        = 64
	maxDescriptorSize = 4 << 20
	maxManifestSize   = 64 << 10
	headKeep          = 64 << 10
)

// Check validates an OVA: ustar headers and checksums, member order, manifest format and
// hashes, References sizes, streamOptimized VMDK header and trailer, disk capacity, and
// that every vApp property has a label and a description. It returns an error only when
// the file cannot be read; format problems go into Report.Problems.
func Check(path string) (*Report, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r := &Report{}
	br := bufio.NewReaderSize(f, 1<<20)

	type content struct {
		head, tail []byte
		small      []byte // whole content for descriptor and manifest
	}
	contents := map[string]*content{}
	block := make([]byte, 512)
	for {
		if _, err := io.ReadFull(br, block); err != nil {
			r.bad("archive ends without the two zero blocks that close a tar (truncated?)")
			break
		}
		if bytes.Equal(block, make([]byte, 512)) {
			break // end of archive
		}
		if len(r.Members) >= maxMembers {
			r.bad("more than %d members", maxMembers)
			return r, nil
		}
		name, size, typ, problems := parseUstarHeader(block)
		for _, p := range problems {
			r.bad("member %d (%q): %s", len(r.Members)+1, name, p)
		}
		if size < 0 {
			return r, nil // cannot find the next header
		}
		if typ != '0' && typ != 0 {
			r.bad("member %q has tar type %q: only regular files belong in an OVA (PAX/GNU extension headers are not ustar)", name, typ)
		}
		if strings.Contains(name, "/") {
			r.bad("member %q has a directory or ./ prefix: OVA members are plain file names", name)
		}
		c := &content{}
		h := sha256.New()
		keepAll := strings.HasSuffix(name, ".ovf") || strings.HasSuffix(name, ".mf")
		var tail []byte
		lr := io.LimitReader(br, size)
		buf := make([]byte, 256<<10)
		var n int64
		for {
			k, err := lr.Read(buf)
			if k > 0 {
				chunk := buf[:k]
				h.Write(chunk)
				if len(c.head) < headKeep {
					c.head = append(c.head, chunk[:min(len(chunk), headKeep-len(c.head))]...)
				}
				if keepAll && n+int64(k) <= maxDescriptorSize {
					c.small = append(c.small, chunk...)
				}
				tail = append(tail, chunk...)
				if len(tail) > 4096 {
					tail = append(tail[:0], tail[len(tail)-4096:]...)
				}
				n += int64(k)
			}
			if err == io.EOF {
				break
			}
			if err != nil {
				return nil, fmt.Errorf("read %s: %w", path, err)
			}
		}
		c.tail = tail
		if n != size {
			r.bad("member %q is truncated: %d of %d bytes", name, n, size)
			return r, nil
		}
		if pad := (512 - size%512) % 512; pad > 0 {
			if _, err := io.CopyN(io.Discard, br, pad); err != nil {
				r.bad("member %q: missing padding (truncated archive)", name)
				return r, nil
			}
		}
		if _, dup := contents[name]; dup {
			r.bad("member %q appears twice", name)
		}
		contents[name] = c
		r.Members = append(r.Members, Member{Name: name, Size: size, SHA256: hex.EncodeToString(h.Sum(nil))})
	}
	if len(r.Members) == 0 {
		r.bad("empty archive")
		return r, nil
	}

	first := r.Members[0].Name
	if !strings.HasSuffix(first, ".ovf") {
		r.bad("first member is %q: the OVF descriptor must come first", first)
		for _, m := range r.Members {
			if strings.HasSuffix(m.Name, ".ovf") {
				first = m.Name
				break
			}
		}
	}
	desc, ok := contents[first]
	if !ok || !strings.HasSuffix(first, ".ovf") {
		r.bad("no .ovf descriptor in the archive")
		return r, nil
	}
	env, err := parseEnvelope(desc.small)
	if err != nil {
		r.bad("descriptor %s: %v", first, err)
		return r, nil
	}

	// Expected order: .ovf, .mf, [.cert], then References in order.
	want := []string{first}
	mfName := strings.TrimSuffix(first, ".ovf") + ".mf"
	if _, ok := contents[mfName]; ok {
		want = append(want, mfName)
	} else {
		r.bad("no manifest %s", mfName)
	}
	if cert := strings.TrimSuffix(first, ".ovf") + ".cert"; contents[cert] != nil {
		want = append(want, cert)
	}
	for _, ref := range env.References {
		want = append(want, ref.Href)
	}
	var got []string
	for _, m := range r.Members {
		got = append(got, m.Name)
	}
	if strings.Join(got, "\x00") != strings.Join(want, "\x00") {
		r.bad("member order is %v, want %v (descriptor, manifest, then References order)", got, want)
	}

	sizes := map[string]int64{}
	for _, m := range r.Members {
		sizes[m.Name] = m.Size
	}
	for _, ref := range env.References {
		sz, ok := sizes[ref.Href]
		switch {
		case !ok:
			r.bad("referenced file %q is missing from the archive", ref.Href)
		case ref.Size != "" && ref.Size != strconv.FormatInt(sz, 10):
			r.bad("%s is %d bytes but References says ovf:size=%s", ref.Href, sz, ref.Size)
		}
	}

	if mf := contents[mfName]; mf != nil {
		checkManifest(r, mf.small, mfName)
	}

	disks := map[string]ovfDisk{}
	for _, d := range env.Disks {
		disks[d.FileRef] = d
	}
	for _, ref := range env.References {
		c := contents[ref.Href]
		d, isDisk := disks[ref.ID]
		if c == nil || !isDisk {
			continue
		}
		h, err := ParseVMDKHeader(c.head)
		if err != nil {
			r.bad("%s: %v", ref.Href, err)
			continue
		}
		info := DiskInfo{Name: ref.Href, CreateType: h.CreateType, Capacity: int64(h.CapacitySectors) * sector}
		r.Disks = append(r.Disks, info)
		for _, p := range h.CheckStreamOptimized() {
			r.bad("%s: %s", ref.Href, p)
		}
		for _, p := range h.checkStreamEnd(c.tail, sizes[ref.Href]) {
			r.bad("%s: %s", ref.Href, p)
		}
		if !strings.HasSuffix(d.Format, "#streamOptimized") {
			r.bad("disk %s: ovf:format %q does not declare streamOptimized", d.DiskID, d.Format)
		}
		if capBytes, err := diskCapacityBytes(d); err != nil {
			r.bad("disk %s: %v", d.DiskID, err)
		} else if capBytes != info.Capacity {
			r.bad("disk %s: ovf:capacity %d bytes, but %s holds %d bytes", d.DiskID, capBytes, ref.Href, info.Capacity)
		}
	}

	if env.Transport == "" || !strings.Contains(env.Transport, "com.vmware.guestInfo") {
		r.bad("VirtualHardwareSection ovf:transport is %q: vApp properties reach the guest only with com.vmware.guestInfo", env.Transport)
	}
	for _, p := range env.Properties {
		r.Properties = append(r.Properties, p.Key)
		if strings.TrimSpace(p.Label) == "" || strings.TrimSpace(p.Description) == "" {
			r.bad("vApp property %q lacks a Label or Description", p.Key)
		}
	}
	return r, nil
}

var manifestLineRE = regexp.MustCompile(`^(SHA1|SHA256|SHA512)\(([^()/]+)\)= ([0-9a-f]+)$`)

func checkManifest(r *Report, mf []byte, mfName string) {
	if len(mf) > maxManifestSize {
		r.bad("manifest is larger than %d bytes", maxManifestSize)
		return
	}
	sums := map[string]string{}
	for _, m := range r.Members {
		sums[m.Name] = m.SHA256
	}
	listed := map[string]bool{}
	for i, line := range strings.Split(strings.TrimRight(string(mf), "\n"), "\n") {
		m := manifestLineRE.FindStringSubmatch(strings.TrimRight(line, "\r"))
		if m == nil {
			r.bad("manifest line %d is not \"SHA256(file)= hex\": %q", i+1, line)
			continue
		}
		alg, name, sum := m[1], m[2], m[3]
		if alg != "SHA256" {
			r.bad("manifest line %d uses %s: Cairn OVAs use SHA256", i+1, alg)
			continue
		}
		if listed[name] {
			r.bad("manifest lists %s twice", name)
		}
		listed[name] = true
		real, ok := sums[name]
		switch {
		case !ok:
			r.bad("manifest lists %s, which is not in the archive", name)
		case real != sum:
			r.bad("manifest SHA256 of %s is %s, the file hashes to %s", name, sum, real)
		}
	}
	for _, m := range r.Members {
		if m.Name != mfName && !strings.HasSuffix(m.Name, ".cert") && !listed[m.Name] {
			r.bad("manifest does not list %s", m.Name)
		}
	}
}

// parseUstarHeader decodes one 512-byte header and reports how it departs from ustar.
// size is -1 when it cannot be read (the archive cannot be walked further).
func parseUstarHeader(b []byte) (name string, size int64, typ byte, problems []string) {
	cstr := func(f []byte) string {
		if i := bytes.IndexByte(f, 0); i >= 0 {
			f = f[:i]
		}
		return string(f)
	}
	name = cstr(b[0:100])
	if prefix := cstr(b[345:500]); prefix != "" {
		name = prefix + "/" + name
	}
	typ = b[156]
	if string(b[257:263]) != "ustar\x00" || string(b[263:265]) != "00" {
		problems = append(problems, fmt.Sprintf("header magic %q version %q: not POSIX ustar (GNU or old tar format?)", b[257:263], b[263:265]))
	}
	parseOctal := func(f []byte) (int64, error) {
		s := strings.TrimRight(strings.TrimLeft(string(f), " "), " \x00")
		if s == "" {
			return 0, nil
		}
		return strconv.ParseInt(s, 8, 64)
	}
	sum, err := parseOctal(b[148:156])
	if err != nil {
		problems = append(problems, "unreadable header checksum")
	} else {
		var calc int64
		for i, c := range b {
			if i >= 148 && i < 156 {
				c = ' '
			}
			calc += int64(c)
		}
		if calc != sum {
			problems = append(problems, fmt.Sprintf("header checksum %d, computed %d (corrupt header)", sum, calc))
		}
	}
	size, err = parseOctal(b[124:136])
	if err != nil || size < 0 {
		problems = append(problems, "size field is not octal (base-256 sizes are a GNU extension)")
		size = -1
	}
	return name, size, typ, problems
}

type ovfRef struct {
	ID, Href, Size string
}

type ovfDisk struct {
	DiskID, FileRef, Format, Capacity, Units string
}

type ovfProperty struct {
	Key, Label, Description string
}

type envelope struct {
	References []ovfRef
	Disks      []ovfDisk
	Transport  string
	Properties []ovfProperty
}

const ovfNS = "http://schemas.dmtf.org/ovf/envelope/1"

// parseEnvelope reads the parts of an OVF descriptor the checker needs.
func parseEnvelope(doc []byte) (*envelope, error) {
	var raw struct {
		XMLName    xml.Name `xml:"Envelope"`
		References struct {
			Files []struct {
				ID   string `xml:"id,attr"`
				Href string `xml:"href,attr"`
				Size string `xml:"size,attr"`
			} `xml:"File"`
		} `xml:"References"`
		DiskSection struct {
			Disks []struct {
				DiskID   string `xml:"diskId,attr"`
				FileRef  string `xml:"fileRef,attr"`
				Format   string `xml:"format,attr"`
				Capacity string `xml:"capacity,attr"`
				Units    string `xml:"capacityAllocationUnits,attr"`
			} `xml:"Disk"`
		} `xml:"DiskSection"`
		VirtualSystem struct {
			Hardware struct {
				Transport string `xml:"transport,attr"`
			} `xml:"VirtualHardwareSection"`
			Products []struct {
				Properties []struct {
					Key         string `xml:"key,attr"`
					Label       string `xml:"Label"`
					Description string `xml:"Description"`
				} `xml:"Property"`
			} `xml:"ProductSection"`
		} `xml:"VirtualSystem"`
	}
	d := xml.NewDecoder(bytes.NewReader(doc))
	d.Strict = true
	if err := d.Decode(&raw); err != nil {
		return nil, fmt.Errorf("not a readable OVF envelope: %w", err)
	}
	if raw.XMLName.Space != ovfNS {
		return nil, fmt.Errorf("root element namespace %q, want %q", raw.XMLName.Space, ovfNS)
	}
	e := &envelope{Transport: raw.VirtualSystem.Hardware.Transport}
	for _, f := range raw.References.Files {
		if f.Href == "" || strings.ContainsAny(f.Href, "/\\") || filepath.Base(f.Href) != f.Href {
			return nil, fmt.Errorf("References names %q: want a plain file name", f.Href)
		}
		e.References = append(e.References, ovfRef{f.ID, f.Href, f.Size})
	}
	for _, d := range raw.DiskSection.Disks {
		e.Disks = append(e.Disks, ovfDisk{d.DiskID, d.FileRef, d.Format, d.Capacity, d.Units})
	}
	for _, p := range raw.VirtualSystem.Products {
		for _, q := range p.Properties {
			e.Properties = append(e.Properties, ovfProperty{q.Key, q.Label, q.Description})
		}
	}
	return e, nil
}

// diskCapacityBytes applies ovf:capacityAllocationUnits ("byte", "byte * 2^20", ...).
func diskCapacityBytes(d ovfDisk) (int64, error) {
	c, err := strconv.ParseInt(d.Capacity, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("ovf:capacity %q is not a number", d.Capacity)
	}
	units := strings.ReplaceAll(d.Units, " ", "")
	switch units {
	case "", "byte":
		return c, nil
	}
	if exp, ok := strings.CutPrefix(units, "byte*2^"); ok {
		if n, err := strconv.Atoi(exp); err == nil && n >= 0 && n <= 40 {
			return c << n, nil
		}
	}
	return 0, errors.New("unsupported ovf:capacityAllocationUnits " + strconv.Quote(d.Units))
}
