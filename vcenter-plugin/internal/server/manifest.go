package server

import (
	"context"
	"fmt"
	"time"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/cairn-storage/cairn/vcenter-plugin/internal/progress"
)

// ExtensionKey identifies the plugin in vCenter's ExtensionManager.
const ExtensionKey = "com.cairn.vcenter"

// Version of the plugin (manifest and extension).
var Version = "0.1.0"

// Views are the routes of the UI the manifest points at, relative to the
// manifest (index.html is the UI's entry; the UI uses hash routing so a
// view's URI names an asset that exists whatever path vCenter's reverse
// proxy serves it under). The UI declares the same routes in
// ui/src/app/plugin-views.json; a test checks both agree.
var Views = struct {
	Global, ClusterMonitor, ClusterConfigure, HostSummary, HostConfigure string
}{
	Global:           "index.html#/global",
	ClusterMonitor:   "index.html#/cluster/monitor",
	ClusterConfigure: "index.html#/cluster/configure",
	HostSummary:      "index.html#/host/summary",
	HostConfigure:    "index.html#/host/configure",
}

// Manifest is plugin.json, the vSphere Client remote plugin manifest
// (manifestVersion 1.1.0): a global view and views on clusters and hosts.
// URIs are relative to the manifest's location (<public>/ui/). The 1.1.0
// schema allows no properties beyond its own: localized strings live in
// definitions.i18n.definitions, keyed by the labelKey/nameKey that use them.
func Manifest() map[string]any {
	view := func(id, label, uri string) map[string]any {
		return map[string]any{"navigationId": id, "labelKey": label, "uri": uri}
	}
	return map[string]any{
		"manifestVersion": "1.1.0",
		"requirements":    map[string]any{"plugin.api.version": "1.1.0"},
		"configuration":   map[string]any{"nameKey": "plugin.name", "icon": map[string]any{"name": "main"}},
		"global": map[string]any{
			"view": map[string]any{"navigationId": "cairn.global", "uri": Views.Global, "navigationVisible": true},
		},
		"objects": map[string]any{
			"ClusterComputeResource": map[string]any{
				"configure": map[string]any{"views": []any{view("cairn.cluster.configure", "cluster.configure.label", Views.ClusterConfigure)}},
				"monitor":   map[string]any{"views": []any{view("cairn.cluster.monitor", "cluster.monitor.label", Views.ClusterMonitor)}},
			},
			"HostSystem": map[string]any{
				"summary":   map[string]any{"view": map[string]any{"uri": Views.HostSummary, "size": map[string]any{"widthSpan": 1, "heightSpan": 1}}},
				"configure": map[string]any{"views": []any{view("cairn.host.configure", "host.configure.label", Views.HostConfigure)}},
			},
		},
		"definitions": map[string]any{
			"iconSpriteSheet": map[string]any{"uri": "assets/sprites.png", "definitions": map[string]any{"main": map[string]any{"x": 0, "y": 0}}},
			"i18n": map[string]any{
				"locales": []string{"en-US"},
				"definitions": map[string]any{
					"plugin.name":             map[string]string{"en-US": "Cairn"},
					"cluster.configure.label": map[string]string{"en-US": "Cairn storage"},
					"cluster.monitor.label":   map[string]string{"en-US": "Cairn"},
					"host.configure.label":    map[string]string{"en-US": "Cairn SVM"},
				},
			},
		},
	}
}

// ServerTypeManifest is the extension server type vCenter (7.0 U2+) reads
// a remote plugin's manifest from; the server's URL is plugin.json itself.
const ServerTypeManifest = "MANIFEST_SERVER"

// Extension is the registration descriptor the installer (or
// RegisterExtension) gives vCenter: the client entry names the plugin and
// its manifest; the server entry is the manifest server, with the full URL
// of plugin.json, the certificate's SHA-256 thumbprint and the certificate
// itself (PEM; vCenter 8.0.2+ pins it, older ones use the thumbprint).
func Extension(publicURL string, cert *Certificate) types.Extension {
	desc := &types.Description{Label: "Cairn", Summary: "Cairn software-defined storage: deploy, datastores, rolling maintenance"}
	tasks := []types.ExtensionTaskTypeInfo{{TaskID: progress.TaskDeploy}, {TaskID: progress.TaskMaintenance}, {TaskID: progress.TaskDatastore}}
	manifest := publicURL + "/ui/plugin.json"
	return types.Extension{
		Description:            desc,
		Key:                    ExtensionKey,
		Company:                "Cairn",
		Type:                   "",
		Version:                Version,
		ShownInSolutionManager: types.NewBool(true),
		LastHeartbeatTime:      time.Now().UTC(),
		Client: []types.ExtensionClientInfo{{Version: Version, Description: desc, Company: "Cairn",
			Type: "vsphere-client-remote", Url: manifest}},
		Server: []types.ExtensionServerInfo{{Url: manifest, Description: desc, Company: "Cairn", Type: ServerTypeManifest,
			AdminEmail: []string{"noreply@cairn.invalid"}, ServerThumbprint: cert.SHA256, ServerCertificate: cert.PEM}},
		TaskList:      tasks,
		PrivilegeList: privilegeList(),
		ResourceList:  privilegeResources(),
	}
}

// privilegeList is the extension's privileges (rights.go), in group
// PrivilegeGroup.
func privilegeList() []types.ExtensionPrivilegeInfo {
	var out []types.ExtensionPrivilegeInfo
	for _, p := range Privileges {
		out = append(out, types.ExtensionPrivilegeInfo{PrivID: p.ID, PrivGroupName: PrivilegeGroup})
	}
	return out
}

// privilegeResources are the labels the vSphere Client's role editor
// shows for the group and its privileges (module "privilege", keys
// <id>.label and <id>.summary).
func privilegeResources() []types.ExtensionResourceInfo {
	data := []types.KeyValue{{Key: PrivilegeGroup + ".label", Value: "Cairn"}, {Key: PrivilegeGroup + ".summary", Value: "Cairn software-defined storage"}}
	for _, p := range Privileges {
		data = append(data, types.KeyValue{Key: p.ID + ".label", Value: p.Label}, types.KeyValue{Key: p.ID + ".summary", Value: p.Summary})
	}
	return []types.ExtensionResourceInfo{{Locale: "en", Module: "privilege", Data: data}}
}

// Descriptor is the extension registration descriptor as the plugin
// serves it (GET /api/v1/extension), for the installer (cairn-install
// registers it with pyVmomi). Format version 2: version 1 had server_url
// .../ui/ of type HTTPS and no certificate; version 2 adds server_type and
// server_certificate and server_url is the manifest's full URL.
type Descriptor struct {
	Version       int    `json:"descriptor_version"`
	Key           string `json:"key"`
	PluginVersion string `json:"plugin_version"`
	Company       string `json:"company"`
	Label         string `json:"label"`
	Summary       string `json:"summary"`
	ClientType    string `json:"client_type"` // vsphere-client-remote
	ClientURL     string `json:"client_url"`  // the plugin.json manifest
	ServerType    string `json:"server_type"` // MANIFEST_SERVER
	ServerURL     string `json:"server_url"`  // the plugin.json manifest, too
	// ServerThumbprint is the SHA-1 thumbprint, only for vCenters older
	// than 8.0 that do not take SHA-256; register ServerSHA256 and
	// ServerCertificate on any current vCenter.
	ServerThumbprint  string   `json:"server_thumbprint"`
	ServerSHA256      string   `json:"server_thumbprint_sha256"`
	ServerCertificate string   `json:"server_certificate"` // PEM
	TaskTypes         []string `json:"task_types"`
	// Privileges the extension defines (group "Cairn", labels for the
	// role editor); an installer that does not know the field registers
	// none, and then no one holds them: register with a current
	// cairn-install.
	Privileges []Privilege `json:"privileges,omitempty"`
}

// NewDescriptor describes the plugin served at publicURL.
func NewDescriptor(publicURL string, cert *Certificate) Descriptor {
	ext := Extension(publicURL, cert)
	d := Descriptor{Version: 2, Key: ext.Key, PluginVersion: ext.Version, Company: ext.Company,
		Label: ext.Description.GetDescription().Label, Summary: ext.Description.GetDescription().Summary,
		ClientType: ext.Client[0].Type, ClientURL: ext.Client[0].Url, ServerType: ext.Server[0].Type, ServerURL: ext.Server[0].Url,
		ServerThumbprint: cert.SHA1, ServerSHA256: cert.SHA256, ServerCertificate: cert.PEM}
	for _, t := range ext.TaskList {
		d.TaskTypes = append(d.TaskTypes, t.TaskID)
	}
	d.Privileges = Privileges
	return d
}

// RegisterExtension registers (or updates) the plugin in vCenter.
func RegisterExtension(ctx context.Context, c *vim25.Client, ext types.Extension) error {
	m := object.NewExtensionManager(c)
	have, err := m.Find(ctx, ext.Key)
	if err != nil {
		return fmt.Errorf("look up extension %s: %w", ext.Key, err)
	}
	if have != nil {
		return m.Update(ctx, ext)
	}
	return m.Register(ctx, ext)
}
