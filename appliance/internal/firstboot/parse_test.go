package firstboot

import (
	"github.com/cairn-storage/cairn/appliance/contract"

	"errors"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseUserData(t *testing.T) {
	doc := UserDataHeader + "\r\n" +
		"# comment\n\n" +
		"cairn.hostname: svm1\n" +
		"cairn.roles: 'mdm, sds'\n" +
		`cairn.ssh.authorized_key: "ssh-ed25519 AAAA x@y"` + "\n" +
		"cairn.dns:\n"
	got, err := ParseUserData([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{contract.KeyHostname: "svm1", contract.KeyRoles: "mdm, sds", contract.KeySSHKey: "ssh-ed25519 AAAA x@y", contract.KeyDNS: ""}
	if !maps.Equal(got, want) {
		t.Errorf("got %v want %v", got, want)
	}
}

func TestParseUserDataRejects(t *testing.T) {
	h := UserDataHeader + "\n"
	cases := []struct{ name, doc, want string }{
		{"cloud-config", "#cloud-config\nhostname: x\n", "must start with"},
		{"script", "#!/bin/sh\nreboot\n", "must start with"},
		{"no header", "cairn.hostname: x\n", "must start with"},
		{"indented", h + "cairn.hostname: x\n  nested: y\n", "indented"},
		{"no colon", h + "cairn.hostname x\n", "expected"},
		{"no space", h + "cairn.hostname:x\n", "expected a space"},
		{"duplicate", h + "cairn.hostname: a\ncairn.hostname: b\n", "twice"},
		{"unknown", h + "runcmd: reboot\n", "unknown key"},
		{"block scalar", h + "cairn.ssh.authorized_key: |\n", "not supported"},
		{"flow", h + "cairn.roles: [mdm, sds]\n", "not supported"},
		{"anchor", h + "cairn.roles: &a mdm\n", "not supported"},
		{"unterminated", h + "cairn.roles: \"mdm\n", "unterminated"},
		{"too many lines", h + strings.Repeat("#\n", maxSeedLines+1), "more than"},
		{"line too long", h + "cairn.hostname: " + strings.Repeat("a", contract.MaxValueLen+300) + "\n", "too long"},
		{"too big", h + strings.Repeat("#", maxSeedFileBytes), "larger than"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParseUserData([]byte(c.doc))
			if err == nil {
				t.Fatalf("accepted: %v", got)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q does not contain %q", err, c.want)
			}
		})
	}
}

func TestReadSeedDirWithMetaData(t *testing.T) {
	dir := t.TempDir()
	must(t, os.WriteFile(filepath.Join(dir, "meta-data"), []byte("instance-id: i-123\nlocal-hostname: svm-meta\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(dir, "user-data"), []byte(UserDataHeader+"\ncairn.cluster.name: c1\n"), 0o644))
	seed, err := ReadSeed(dir)
	if err != nil {
		t.Fatal(err)
	}
	if seed.InstanceID != "i-123" || seed.Settings[contract.KeyHostname] != "svm-meta" || seed.Settings[contract.KeyClusterName] != "c1" {
		t.Errorf("seed %+v", seed)
	}
	// user-data wins over meta-data.
	must(t, os.WriteFile(filepath.Join(dir, "user-data"), []byte(UserDataHeader+"\ncairn.hostname: svm-user\n"), 0o644))
	if seed, err = ReadSeed(dir); err != nil || seed.Settings[contract.KeyHostname] != "svm-user" {
		t.Errorf("got %v, %v", seed, err)
	}
	// A single file works too.
	if seed, err = ReadSeed(filepath.Join(dir, "user-data")); err != nil || seed.Settings[contract.KeyHostname] != "svm-user" {
		t.Errorf("file seed: %v, %v", seed, err)
	}
	// No user-data: no settings.
	must(t, os.Remove(filepath.Join(dir, "user-data")))
	if _, err := ReadSeed(dir); !errors.Is(err, contract.ErrNoSettings) {
		t.Errorf("got %v, want ErrNoSettings", err)
	}
}

func TestUserDataRoundTrip(t *testing.T) {
	in := goodSettings()
	doc, err := EncodeUserData(in)
	if err != nil {
		t.Fatal(err)
	}
	out, err := ParseUserData(doc)
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(in, out) {
		t.Errorf("round trip:\n in %v\nout %v", in, out)
	}
	if _, err := EncodeUserData(map[string]string{contract.KeyHostname: "a\nb"}); err == nil {
		t.Error("encoded a newline")
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
