// Package ovfdesc writes the OVF 1.0 descriptor of the Cairn SVM appliance: virtual
// hardware, the OS disk, two networks and the vApp properties first boot reads.
package ovfdesc

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"strings"
	"text/template"

	"github.com/cairn-storage/cairn/appliance/contract"
)

// Property is one vApp property (ovf:ProductSection/ovf:Property), as the deployment
// contract defines it (appliance/contract, imported through go.mod's replace): the
// OVA offers exactly the settings first boot understands and the deploy engine sets.
type Property = contract.Property

// Properties returns the appliance's vApp properties in descriptor order.
func Properties() []Property { return contract.Properties() }

// Params describe one appliance build.
type Params struct {
	Name        string // VM and VirtualSystem name, e.g. cairn-svm
	Version     string // product version shown in vSphere
	DiskFile    string // file name of the streamOptimized VMDK inside the OVA
	DiskSize    int64  // size of that file in bytes (ovf:size)
	Capacity    int64  // virtual size of the OS disk in bytes
	CPUs        int
	MemoryMiB   int
	OSType      string // vSphere guest id, e.g. debian11_64Guest, rockylinux_64Guest
	OSID        int    // CIM operating system id (96 = Debian 64-bit, 80 = RHEL 64-bit)
	HWVersion   string // virtual hardware family, e.g. vmx-14 (ESXi 6.7 and later)
	ProductURL  string
	Description string
}

// Defaults are the shipping values: 2 vCPU and 2 GiB are enough for an SVM.
func Defaults() Params {
	return Params{
		Name:       "cairn-svm",
		Version:    "dev",
		DiskFile:   "cairn-svm-disk1.vmdk",
		CPUs:       2,
		MemoryMiB:  2048,
		OSType:     "debian11_64Guest", // known to ESXi 7.0 and 8.0 (debian12_64Guest is 8.0 only)
		OSID:       96,
		HWVersion:  "vmx-14",
		ProductURL: "https://github.com/cairn-storage/cairn",
		Description: "Cairn storage VM (SVM): one per ESXi host. Pools the host's local disks " +
			"into mirrored shared block storage and serves it back over iSCSI.",
	}
}

func (p Params) validate() error {
	var errs []string
	if p.Name == "" || strings.ContainsAny(p.Name, "/\\ ") {
		errs = append(errs, "name must be non-empty without slashes or spaces")
	}
	if p.DiskFile == "" || strings.ContainsAny(p.DiskFile, "/\\") {
		errs = append(errs, "disk file must be a plain file name")
	}
	if p.DiskSize <= 0 || p.Capacity <= 0 {
		errs = append(errs, "disk size and capacity must be positive")
	}
	if p.Capacity%512 != 0 {
		errs = append(errs, "capacity must be a multiple of 512")
	}
	if p.CPUs < 1 || p.MemoryMiB < 256 {
		errs = append(errs, "need at least 1 CPU and 256 MiB")
	}
	if len(errs) > 0 {
		return fmt.Errorf("ovf descriptor: %s", strings.Join(errs, "; "))
	}
	return nil
}

// Generate returns the descriptor. Every text from Params and the contract is
// XML-escaped by the template's x function.
func Generate(p Params) ([]byte, error) {
	if err := p.validate(); err != nil {
		return nil, err
	}
	var b bytes.Buffer
	err := tmpl.Execute(&b, struct {
		Params
		Properties []Property
	}{p, Properties()})
	if err != nil {
		return nil, fmt.Errorf("ovf descriptor: %w", err)
	}
	return b.Bytes(), nil
}

func xmlEscape(v any) string {
	var b bytes.Buffer
	xml.EscapeText(&b, []byte(fmt.Sprint(v)))
	return b.String()
}

var tmpl = template.Must(template.New("ovf").Funcs(template.FuncMap{
	"x": xmlEscape,
	// newCategory reports whether property i starts a new Category group.
	"newCategory": func(ps []Property, i int) bool { return i == 0 || ps[i-1].Category != ps[i].Category },
}).Parse(descriptorTemplate))

// The descriptor. Instance IDs: 1 CPU, 2 memory, 3 SCSI controller 0 (OS disk), 4 SCSI
// controller 1 (data disks: RDMs and passthrough targets the deployer adds; empty
// here), 5 OS disk, 6-7 NICs. Both controllers are paravirtual (VirtualSCSI = PVSCSI).
const descriptorTemplate = `<?xml version="1.0" encoding="UTF-8"?>
<Envelope vmw:buildId="cairn-{{x .Version}}" xmlns="http://schemas.dmtf.org/ovf/envelope/1"
    xmlns:cim="http://schemas.dmtf.org/wbem/wscim/1/common"
    xmlns:ovf="http://schemas.dmtf.org/ovf/envelope/1"
    xmlns:rasd="http://schemas.dmtf.org/wbem/wscim/1/cim-schema/2/CIM_ResourceAllocationSettingData"
    xmlns:vmw="http://www.vmware.com/schema/ovf"
    xmlns:vssd="http://schemas.dmtf.org/wbem/wscim/1/cim-schema/2/CIM_VirtualSystemSettingData"
    xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">
  <References>
    <File ovf:href="{{x .DiskFile}}" ovf:id="file1" ovf:size="{{.DiskSize}}"/>
  </References>
  <DiskSection>
    <Info>Virtual disk information</Info>
    <Disk ovf:capacity="{{.Capacity}}" ovf:capacityAllocationUnits="byte" ovf:diskId="vmdisk1" ovf:fileRef="file1" ovf:format="http://www.vmware.com/interfaces/specifications/vmdk.html#streamOptimized"/>
  </DiskSection>
  <NetworkSection>
    <Info>The networks the SVM connects to</Info>
    <Network ovf:name="Management">
      <Description>Management network: gateway API, MDM (etcd), SSH (eth0)</Description>
    </Network>
    <Network ovf:name="Data">
      <Description>Data network: SDS traffic and iSCSI to the ESXi hosts (eth1)</Description>
    </Network>
  </NetworkSection>
  <VirtualSystem ovf:id="{{x .Name}}">
    <Info>Cairn storage VM</Info>
    <Name>{{x .Name}}</Name>
    <AnnotationSection>
      <Info>Description</Info>
      <Annotation>{{x .Description}}</Annotation>
    </AnnotationSection>
    <OperatingSystemSection ovf:id="{{.OSID}}" vmw:osType="{{x .OSType}}">
      <Info>The kind of installed guest operating system</Info>
    </OperatingSystemSection>
    <VirtualHardwareSection ovf:transport="com.vmware.guestInfo">
      <Info>Virtual hardware requirements</Info>
      <System>
        <vssd:ElementName>Virtual Hardware Family</vssd:ElementName>
        <vssd:InstanceID>0</vssd:InstanceID>
        <vssd:VirtualSystemIdentifier>{{x .Name}}</vssd:VirtualSystemIdentifier>
        <vssd:VirtualSystemType>{{x .HWVersion}}</vssd:VirtualSystemType>
      </System>
      <Item>
        <rasd:AllocationUnits>hertz * 10^6</rasd:AllocationUnits>
        <rasd:Description>Number of Virtual CPUs</rasd:Description>
        <rasd:ElementName>{{.CPUs}} virtual CPU(s)</rasd:ElementName>
        <rasd:InstanceID>1</rasd:InstanceID>
        <rasd:ResourceType>3</rasd:ResourceType>
        <rasd:VirtualQuantity>{{.CPUs}}</rasd:VirtualQuantity>
      </Item>
      <Item>
        <rasd:AllocationUnits>byte * 2^20</rasd:AllocationUnits>
        <rasd:Description>Memory Size</rasd:Description>
        <rasd:ElementName>{{.MemoryMiB}}MB of memory</rasd:ElementName>
        <rasd:InstanceID>2</rasd:InstanceID>
        <rasd:ResourceType>4</rasd:ResourceType>
        <rasd:VirtualQuantity>{{.MemoryMiB}}</rasd:VirtualQuantity>
      </Item>
      <Item>
        <rasd:Address>0</rasd:Address>
        <rasd:Description>SCSI Controller for the OS disk</rasd:Description>
        <rasd:ElementName>SCSI controller 0</rasd:ElementName>
        <rasd:InstanceID>3</rasd:InstanceID>
        <rasd:ResourceSubType>VirtualSCSI</rasd:ResourceSubType>
        <rasd:ResourceType>6</rasd:ResourceType>
      </Item>
      <Item>
        <rasd:Address>1</rasd:Address>
        <rasd:Description>SCSI Controller for data disks (RDM, passthrough)</rasd:Description>
        <rasd:ElementName>SCSI controller 1</rasd:ElementName>
        <rasd:InstanceID>4</rasd:InstanceID>
        <rasd:ResourceSubType>VirtualSCSI</rasd:ResourceSubType>
        <rasd:ResourceType>6</rasd:ResourceType>
      </Item>
      <Item>
        <rasd:AddressOnParent>0</rasd:AddressOnParent>
        <rasd:ElementName>Hard disk 1</rasd:ElementName>
        <rasd:HostResource>ovf:/disk/vmdisk1</rasd:HostResource>
        <rasd:InstanceID>5</rasd:InstanceID>
        <rasd:Parent>3</rasd:Parent>
        <rasd:ResourceType>17</rasd:ResourceType>
      </Item>
      <Item>
        <rasd:AddressOnParent>7</rasd:AddressOnParent>
        <rasd:AutomaticAllocation>true</rasd:AutomaticAllocation>
        <rasd:Connection>Management</rasd:Connection>
        <rasd:Description>VMXNET3 adapter on the management network</rasd:Description>
        <rasd:ElementName>Network adapter 1</rasd:ElementName>
        <rasd:InstanceID>6</rasd:InstanceID>
        <rasd:ResourceSubType>VmxNet3</rasd:ResourceSubType>
        <rasd:ResourceType>10</rasd:ResourceType>
      </Item>
      <Item>
        <rasd:AddressOnParent>8</rasd:AddressOnParent>
        <rasd:AutomaticAllocation>true</rasd:AutomaticAllocation>
        <rasd:Connection>Data</rasd:Connection>
        <rasd:Description>VMXNET3 adapter on the data network</rasd:Description>
        <rasd:ElementName>Network adapter 2</rasd:ElementName>
        <rasd:InstanceID>7</rasd:InstanceID>
        <rasd:ResourceSubType>VmxNet3</rasd:ResourceSubType>
        <rasd:ResourceType>10</rasd:ResourceType>
      </Item>
      <vmw:Config ovf:required="false" vmw:key="tools.syncTimeWithHost" vmw:value="false"/>
      <vmw:Config ovf:required="false" vmw:key="tools.toolsUpgradePolicy" vmw:value="manual"/>
      <vmw:ExtraConfig ovf:required="false" vmw:key="disk.EnableUUID" vmw:value="TRUE"/>
    </VirtualHardwareSection>
    <ProductSection ovf:required="false">
      <Info>Cairn SVM deployment settings (read by cairn-firstboot)</Info>
      <Product>Cairn storage VM</Product>
      <Vendor>Cairn project</Vendor>
      <Version>{{x .Version}}</Version>
      <FullVersion>{{x .Version}}</FullVersion>
      <ProductUrl>{{x .ProductURL}}</ProductUrl>
{{- range $i, $p := .Properties}}
{{- if newCategory $.Properties $i}}
      <Category>{{x $p.Category}}</Category>
{{- end}}
      <Property ovf:key="{{x $p.Key}}" ovf:type="{{x $p.Type}}" ovf:userConfigurable="true" ovf:value="{{x $p.Default}}"{{if $p.Qualifiers}} ovf:qualifiers="{{x $p.Qualifiers}}"{{end}}{{if $p.Password}} ovf:password="true"{{end}}>
        <Label>{{x $p.Label}}</Label>
        <Description>{{x $p.Description}}</Description>
      </Property>
{{- end}}
    </ProductSection>
  </VirtualSystem>
</Envelope>
`
