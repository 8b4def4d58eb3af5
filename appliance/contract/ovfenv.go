package contract

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strings"
)

// The OVF environment (DMTF DSP0243, "OVF environment" 1.x) is the XML document vSphere
// hands to the guest through the com.vmware.guestInfo transport; the guest reads it with
// `vmtoolsd --cmd 'info-get guestinfo.ovfEnv'`. The part Cairn reads:
//
//	<Environment xmlns="http://schemas.dmtf.org/ovf/environment/1"
//	             xmlns:oe="http://schemas.dmtf.org/ovf/environment/1" ...>
//	  <PlatformSection>...</PlatformSection>
//	  <PropertySection>
//	    <Property oe:key="cairn.hostname" oe:value="svm-esx01"/>
//	    ...
//	  </PropertySection>
//	  <ve:EthernetAdapterSection>...</ve:EthernetAdapterSection>
//	</Environment>
//
// Everything else is skipped. The document comes from whoever can edit the VM's vApp
// options, so it is parsed as untrusted input: size, depth and token count are bounded,
// DTDs are refused outright (no entity can be declared, so none can expand), and
// undeclared entities are errors (Strict mode).

const ovfEnvNS = "http://schemas.dmtf.org/ovf/environment/1"

const (
	maxOVFEnvBytes  = 256 << 10 // real environments are a few KB
	maxOVFEnvDepth  = 16
	maxOVFEnvTokens = 20000
)

// ErrNoSettings means a source was reachable but holds no Cairn settings.
var ErrNoSettings = errors.New("no Cairn settings found")

// ParseOVFEnv extracts the property key/value pairs from an OVF environment document.
// It returns the cairn.* properties only (vSphere may pass others); a document without
// any returns ErrNoSettings.
func ParseOVFEnv(doc []byte) (map[string]string, error) {
	if len(doc) > maxOVFEnvBytes {
		return nil, fmt.Errorf("OVF environment is %d bytes, larger than the %d accepted", len(doc), maxOVFEnvBytes)
	}
	if len(bytes.TrimSpace(doc)) == 0 {
		return nil, fmt.Errorf("OVF environment is empty: %w", ErrNoSettings)
	}
	d := xml.NewDecoder(bytes.NewReader(doc))
	d.Strict = true
	d.Entity = nil // only the five predefined XML entities
	d.CharsetReader = func(label string, input io.Reader) (io.Reader, error) {
		return nil, fmt.Errorf("charset %q not supported: the OVF environment must be UTF-8", label)
	}

	props := map[string]string{}
	var stack []string // local names of open elements
	seenRoot := false
	for tokens := 0; ; tokens++ {
		if tokens > maxOVFEnvTokens {
			return nil, fmt.Errorf("OVF environment has more than %d XML tokens", maxOVFEnvTokens)
		}
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("OVF environment is not well-formed XML: %w", err)
		}
		switch t := tok.(type) {
		case xml.Directive:
			return nil, errors.New("OVF environment contains a DTD or other <!...> directive, which is refused")
		case xml.StartElement:
			if len(stack) == 0 {
				if seenRoot {
					return nil, errors.New("OVF environment has more than one root element")
				}
				seenRoot = true
				if t.Name.Local != "Environment" || t.Name.Space != ovfEnvNS {
					return nil, fmt.Errorf("OVF environment root is <%s> in namespace %q, want <Environment> in %q", Clip(t.Name.Local), Clip(t.Name.Space), ovfEnvNS)
				}
			}
			stack = append(stack, t.Name.Local)
			if len(stack) > maxOVFEnvDepth {
				return nil, fmt.Errorf("OVF environment nests deeper than %d elements", maxOVFEnvDepth)
			}
			if len(stack) == 3 && stack[1] == "PropertySection" && t.Name.Local == "Property" && t.Name.Space == ovfEnvNS {
				key, value, err := propertyAttrs(t)
				if err != nil {
					return nil, err
				}
				if !strings.HasPrefix(key, "cairn.") {
					continue
				}
				if _, dup := props[key]; dup {
					return nil, fmt.Errorf("OVF environment sets property %q twice", Clip(key))
				}
				if len(props) >= MaxSettings {
					return nil, fmt.Errorf("OVF environment has more than %d cairn.* properties", MaxSettings)
				}
				props[key] = value
			}
		case xml.EndElement:
			stack = stack[:len(stack)-1]
		}
	}
	if !seenRoot {
		return nil, errors.New("OVF environment has no root element")
	}
	if len(props) == 0 {
		return nil, fmt.Errorf("OVF environment has no cairn.* properties: %w", ErrNoSettings)
	}
	return props, nil
}

func propertyAttrs(t xml.StartElement) (key, value string, err error) {
	var haveKey, haveValue bool
	for _, a := range t.Attr {
		if a.Name.Space != ovfEnvNS && a.Name.Space != "" {
			continue
		}
		switch a.Name.Local {
		case "key":
			key, haveKey = a.Value, true
		case "value":
			value, haveValue = a.Value, true
		}
	}
	if !haveKey || key == "" {
		return "", "", errors.New("OVF environment has a <Property> without oe:key")
	}
	if !haveValue {
		return "", "", fmt.Errorf("OVF environment property %q has no oe:value", Clip(key))
	}
	return key, value, nil
}

// EncodeOVFEnv writes an OVF environment document holding props, in the shape vSphere
// produces. Tests and the qemu boot test use it to stand in for vSphere.
func EncodeOVFEnv(props map[string]string) []byte {
	var b bytes.Buffer
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?>` + "\n")
	b.WriteString(`<Environment xmlns="` + ovfEnvNS + `" xmlns:oe="` + ovfEnvNS + `" xmlns:ve="http://www.vmware.com/schema/ovfenv" oe:id="">` + "\n")
	b.WriteString("  <PlatformSection><Kind>VMware ESXi</Kind><Version>8.0.0</Version><Vendor>VMware, Inc.</Vendor><Locale>en</Locale></PlatformSection>\n")
	b.WriteString("  <PropertySection>\n")
	for _, k := range sortedKeys(props) {
		b.WriteString(`    <Property oe:key="`)
		xml.EscapeText(&b, []byte(k))
		b.WriteString(`" oe:value="`)
		xml.EscapeText(&b, []byte(props[k]))
		b.WriteString("\"/>\n")
	}
	b.WriteString("  </PropertySection>\n</Environment>\n")
	return b.Bytes()
}
