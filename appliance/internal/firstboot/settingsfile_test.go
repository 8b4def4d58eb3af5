package firstboot

import (
	"reflect"
	"strings"
	"testing"

	"github.com/cairn-storage/cairn/appliance/contract"
)

// TestSettingsFileRoundTrip: what first boot keeps for cairn peersync reads back
// (ParseUserData, Validate) as the settings it applied, even when the SSH key's
// comment holds both quote characters (the comment is dropped), without the
// one-time bootstrap token.
func TestSettingsFileRoundTrip(t *testing.T) {
	raw := goodSettings()
	raw[contract.KeySSHKey] = strings.Fields(testSSHKey)[0] + " " + strings.Fields(testSSHKey)[1] + ` it's "mine"`
	raw[contract.KeyJoinToken] = "cj1.settings-file-token-0123456789"
	want, err := contract.Validate(raw)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := SettingsFileContent(raw)
	if err != nil {
		t.Fatalf("SettingsFileContent: %v", err)
	}
	back, err := ParseUserData([]byte(doc))
	if err != nil {
		t.Fatalf("ParseUserData of the settings file: %v\n%s", err, doc)
	}
	got, err := contract.Validate(back)
	if err != nil {
		t.Fatalf("Validate of the settings file: %v", err)
	}
	if strings.Contains(doc, raw[contract.KeyJoinToken]) {
		t.Fatal("the settings file keeps the bootstrap token")
	}
	want.SSHKey = strings.Join(strings.Fields(want.SSHKey)[:2], " ")
	want.JoinToken = TokenNotKept
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("settings read back differ:\n got  %+v\n want %+v", got, want)
	}
}
