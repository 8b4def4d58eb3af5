package contract

import (
	"errors"
	"maps"
	"strings"
	"testing"
)

// vSphereEnv is shaped like what ESXi 8 passes in guestinfo.ovfEnv.
const vSphereEnv = `<?xml version="1.0" encoding="UTF-8"?>
<Environment
     xmlns="http://schemas.dmtf.org/ovf/environment/1"
     xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"
     xmlns:oe="http://schemas.dmtf.org/ovf/environment/1"
     xmlns:ve="http://www.vmware.com/schema/ovfenv"
     oe:id=""
     ve:vCenterId="vm-1042">
   <PlatformSection>
      <Kind>VMware ESXi</Kind>
      <Version>8.0.2</Version>
      <Vendor>VMware, Inc.</Vendor>
      <Locale>en</Locale>
   </PlatformSection>
   <PropertySection>
         <Property oe:key="cairn.cluster.join_token" oe:value="cj1.0123456789abcdef"/>
         <Property oe:key="cairn.cluster.mdm_members" oe:value="svm-esx01=192.0.2.11,svm-esx02=192.0.2.12,svm-esx03=192.0.2.13"/>
         <Property oe:key="cairn.cluster.name" oe:value="prod"/>
         <Property oe:key="cairn.hostname" oe:value="svm-esx01"/>
         <Property oe:key="cairn.mgmt.address" oe:value="dhcp"/>
         <Property oe:key="cairn.roles" oe:value="mdm,sds,target"/>
         <Property oe:key="cairn.ssh.authorized_key" oe:value="ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIMusA5/KUSY+1FXP3mKoSCoib8YRCmz4mDu6Ey3cNF2m a&amp;b &lt;c&gt;"/>
         <Property oe:key="vendor.other" oe:value="ignored"/>
   </PropertySection>
   <ve:EthernetAdapterSection>
      <ve:Adapter ve:mac="00:50:56:8f:12:34" ve:network="VM Network" ve:unitNumber="7"/>
   </ve:EthernetAdapterSection>
</Environment>
`

func TestParseOVFEnvVSphere(t *testing.T) {
	props, err := ParseOVFEnv([]byte(vSphereEnv))
	if err != nil {
		t.Fatal(err)
	}
	if len(props) != 7 || props[KeyHostname] != "svm-esx01" || props[KeyRoles] != "mdm,sds,target" {
		t.Errorf("props %v", props)
	}
	if _, ok := props["vendor.other"]; ok {
		t.Error("non-cairn property not dropped")
	}
	if !strings.HasSuffix(props[KeySSHKey], " a&b <c>") {
		t.Errorf("entities not decoded: %q", props[KeySSHKey])
	}
	s, err := Validate(props)
	if err != nil {
		t.Fatal(err)
	}
	if s.Hostname != "svm-esx01" || !s.Mgmt.DHCP {
		t.Errorf("settings %+v", s)
	}
}

func TestOVFEnvRoundTrip(t *testing.T) {
	in := goodSettings()
	in[KeyClusterName] = `quote" amp& lt< apos' nl` // not valid as a setting, but must survive XML
	out, err := ParseOVFEnv(EncodeOVFEnv(in))
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(in, out) {
		t.Errorf("round trip:\n in %v\nout %v", in, out)
	}
}

func TestParseOVFEnvRejects(t *testing.T) {
	env := func(props string) string {
		return `<Environment xmlns="http://schemas.dmtf.org/ovf/environment/1" xmlns:oe="http://schemas.dmtf.org/ovf/environment/1"><PropertySection>` + props + `</PropertySection></Environment>`
	}
	billionLaughs := `<?xml version="1.0"?>
<!DOCTYPE lolz [
 <!ENTITY lol "lol">
 <!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
 <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
]>` + env(`<Property oe:key="cairn.hostname" oe:value="&lol3;"/>`)
	external := `<?xml version="1.0"?><!DOCTYPE e [<!ENTITY x SYSTEM "file:///etc/shadow">]>` + env(`<Property oe:key="cairn.hostname" oe:value="&x;"/>`)
	cases := []struct{ name, doc, want string }{
		{"billion laughs", billionLaughs, "DTD"},
		{"external entity", external, "DTD"},
		{"undeclared entity", env(`<Property oe:key="cairn.hostname" oe:value="&x;"/>`), "well-formed"},
		{"not xml", "hostname=svm1", "no root element"},
		{"truncated", env(`<Property oe:key="cairn.hostname" oe:value="svm1"/>`)[:90], "well-formed"},
		{"wrong root", `<Envelope xmlns="http://schemas.dmtf.org/ovf/envelope/1"/>`, "want <Environment>"},
		{"no namespace", `<Environment><PropertySection/></Environment>`, "want <Environment>"},
		{"duplicate", env(`<Property oe:key="cairn.hostname" oe:value="a"/><Property oe:key="cairn.hostname" oe:value="b"/>`), "twice"},
		{"no key", env(`<Property oe:value="a"/>`), "without oe:key"},
		{"no value", env(`<Property oe:key="cairn.hostname"/>`), "no oe:value"},
		{"charset", `<?xml version="1.0" encoding="ISO-8859-1"?>` + env(""), "charset"},
		{"too deep", env(strings.Repeat("<a>", 40) + strings.Repeat("</a>", 40)), "deeper"},
		{"too big", env(`<Property oe:key="cairn.hostname" oe:value="` + strings.Repeat("a", maxOVFEnvBytes) + `"/>`), "larger than"},
		{"too many tokens", env(strings.Repeat("<x/>", maxOVFEnvTokens)), "tokens"},
		{"two roots", env("") + env(""), "more than one root"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			props, err := ParseOVFEnv([]byte(c.doc))
			if err == nil {
				t.Fatalf("accepted: %v", props)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q does not contain %q", err, c.want)
			}
		})
	}
}

func TestParseOVFEnvNoSettings(t *testing.T) {
	for _, doc := range []string{"", "  \n", `<Environment xmlns="http://schemas.dmtf.org/ovf/environment/1"><PlatformSection/></Environment>`} {
		if _, err := ParseOVFEnv([]byte(doc)); !errors.Is(err, ErrNoSettings) {
			t.Errorf("%q: got %v, want ErrNoSettings", doc, err)
		}
	}
}
