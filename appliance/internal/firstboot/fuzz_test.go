package firstboot

import (
	"github.com/cairn-storage/cairn/appliance/contract"

	"regexp"
	"strings"
	"testing"
)

// Invariants for any input the parsers accept and contract.Validate passes: rendering cannot
// inject lines or shell syntax into the files first boot writes.
var envLineRE = regexp.MustCompile(`^(#.*|[A-Z_]+=[A-Za-z0-9.,_:/~+=-]*)$`)

func checkRendered(t *testing.T, props map[string]string) {
	s, err := contract.Validate(props)
	if err != nil {
		return
	}
	p := Render(s)
	for _, f := range p.Files {
		if strings.ContainsAny(f.Content, "\x00\r") {
			t.Fatalf("%s contains NUL or CR", f.Path)
		}
		switch f.Path {
		case "/etc/hostname":
			if strings.Count(f.Content, "\n") != 1 {
				t.Fatalf("hostname file has %d lines: %q", strings.Count(f.Content, "\n"), f.Content)
			}
		case EnvFile:
			for _, line := range strings.Split(strings.TrimSuffix(f.Content, "\n"), "\n") {
				if !envLineRE.MatchString(line) {
					t.Fatalf("env line %q is not a plain assignment", line)
				}
			}
		case JoinTokenFile:
			if strings.Count(f.Content, "\n") != 1 {
				t.Fatalf("token file has several lines")
			}
		}
		if strings.HasSuffix(f.Path, ".network") && strings.Count(f.Content, "[Match]") != 1 {
			t.Fatalf("%s has %d [Match] sections", f.Path, strings.Count(f.Content, "[Match]"))
		}
	}
}

func FuzzParseOVFEnv(f *testing.F) {
	f.Add(contract.EncodeOVFEnv(goodSettings()))
	f.Add([]byte(`<?xml version="1.0"?><!DOCTYPE l [<!ENTITY a "aa">]><Environment xmlns="http://schemas.dmtf.org/ovf/environment/1"/>`))
	f.Add([]byte(`<Environment xmlns="http://schemas.dmtf.org/ovf/environment/1" xmlns:oe="http://schemas.dmtf.org/ovf/environment/1"><PropertySection><Property oe:key="cairn.hostname" oe:value="a&#10;b"/></PropertySection></Environment>`))
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, doc []byte) {
		props, err := contract.ParseOVFEnv(doc)
		if err != nil {
			return
		}
		if len(props) == 0 || len(props) > contract.MaxSettings {
			t.Fatalf("accepted %d properties", len(props))
		}
		for k := range props {
			if !strings.HasPrefix(k, "cairn.") {
				t.Fatalf("non-cairn key %q returned", k)
			}
		}
		checkRendered(t, props)
	})
}

func FuzzParseUserData(f *testing.F) {
	ud, _ := EncodeUserData(goodSettings())
	f.Add(ud)
	f.Add([]byte(UserDataHeader + "\ncairn.hostname: 'svm1'\ncairn.roles: mdm\n"))
	f.Add([]byte(UserDataHeader + "\ncairn.hostname: |\n  x\n"))
	f.Add([]byte("#cloud-config\nruncmd: [reboot]\n"))
	f.Fuzz(func(t *testing.T, doc []byte) {
		props, err := ParseUserData(doc)
		if err != nil {
			return
		}
		for k, v := range props {
			if strings.ContainsAny(k+v, "\n") {
				t.Fatalf("multi-line key or value %q: %q", k, v)
			}
		}
		checkRendered(t, props)
	})
}

// FuzzValidate drives contract.Validate with arbitrary values for the keys that end up
// in files.
func FuzzValidate(f *testing.F) {
	g := goodSettings()
	f.Add(g[contract.KeyHostname], g[contract.KeyMgmtAddress], g[contract.KeyMgmtGateway], g[contract.KeyDNS], g[contract.KeyNTP], g[contract.KeyRoles],
		g[contract.KeyClusterName], g[contract.KeyJoinToken], g[contract.KeySSHKey], g[contract.KeyMDMMembers], g[contract.KeyGateways], g[contract.KeyTargetPortID], g[contract.KeyTargetPorts])
	f.Add("a\nb", "dhcp", "", "", "", "sds", "c", "tttttttttttttttt", "", "a=1.2.3.4", "", "1", "1")
	f.Add("x", "10.0.0.1/8", "10.0.0.2", "::1", "$(id)", "mdm,mdm", "c;d", "t t", "ssh-rsa AAAA", "x=10.0.0.1,x=10.0.0.1", "::1,a", "0", "1,,1")
	f.Add("svm1", "192.0.2.10/24", "", "", "", "mdm,target", "c", "", "", "svm1=192.0.2.10,b=[::1]:5", "192.0.2.10", "65535", "65535,1")
	f.Fuzz(func(t *testing.T, host, mgmt, gw, dns, ntp, roles, cluster, token, key, members, gateways, port, ports string) {
		checkRendered(t, map[string]string{
			contract.KeyHostname: host, contract.KeyMgmtAddress: mgmt, contract.KeyMgmtGateway: gw, contract.KeyDNS: dns, contract.KeyNTP: ntp,
			contract.KeyRoles: roles, contract.KeyClusterName: cluster, contract.KeyJoinToken: token, contract.KeySSHKey: key,
			contract.KeyMDMMembers: members, contract.KeyGateways: gateways, contract.KeyTargetPortID: port, contract.KeyTargetPorts: ports,
		})
	})
}
