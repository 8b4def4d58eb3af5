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

// Manifest is plugin.json, the vSphere Client remote plugin manifest
// (manifestVersion 1.1.0): a global view and views on clusters and hosts.
// URIs are relative to the manifest's location (<public>/ui/).
func Manifest() map[string]any {
	view := func(id, label, uri string) map[string]any {
		return map[string]any{"navigationId": id, "labelKey": label, "uri": uri}
	}
	return map[string]any{
		"manifestVersion": "1.1.0",
		"requirements":    map[string]any{"plugin.api.version": "1.1.0"},
		"configuration":   map[string]any{"nameKey": "plugin.name", "icon": map[string]any{"name": "main"}},
		"global": map[string]any{
			"view": map[string]any{"navigationId": "cairn.global", "uri": "index.html#/global", "navigationVisible": true},
		},
		"objects": map[string]any{
			"ClusterComputeResource": map[string]any{
				"configure": map[string]any{"views": []any{view("cairn.cluster.configure", "cluster.configure.label", "index.html#/cluster/configure")}},
				"monitor":   map[string]any{"views": []any{view("cairn.cluster.monitor", "cluster.monitor.label", "index.html#/cluster/monitor")}},
			},
			"HostSystem": map[string]any{
				"summary":   map[string]any{"view": map[string]any{"uri": "index.html#/host/summary", "size": map[string]any{"widthSpan": 1, "heightSpan": 1}}},
				"configure": map[string]any{"views": []any{view("cairn.host.configure", "host.configure.label", "index.html#/host/configure")}},
			},
		},
		"definitions": map[string]any{
			"iconSpriteSheet": map[string]any{"uri": "assets/sprites.png", "definitions": map[string]any{"main": map[string]any{"x": 0, "y": 0}}},
			"i18n": map[string]any{
				"locales": []string{"en-US"},
				"definedResources": map[string]any{
					"plugin.name":             map[string]string{"en-US": "Cairn"},
					"cluster.configure.label": map[string]string{"en-US": "Cairn storage"},
					"cluster.monitor.label":   map[string]string{"en-US": "Cairn"},
					"host.configure.label":    map[string]string{"en-US": "Cairn SVM"},
				},
			},
		},
	}
}

// Extension is the registration descriptor the installer (or
// RegisterExtension) gives vCenter: where the manifest is (client) and
// which server, with which certificate thumbprint, serves it.
func Extension(publicURL string, cert *Certificate) types.Extension {
	desc := &types.Description{Label: "Cairn", Summary: "Cairn software-defined storage: deploy, datastores, rolling maintenance"}
	tasks := []types.ExtensionTaskTypeInfo{{TaskID: progress.TaskDeploy}, {TaskID: progress.TaskMaintenance}, {TaskID: progress.TaskDatastore}}
	return types.Extension{
		Description:            desc,
		Key:                    ExtensionKey,
		Company:                "Cairn",
		Type:                   "",
		Version:                Version,
		ShownInSolutionManager: types.NewBool(true),
		LastHeartbeatTime:      time.Now().UTC(),
		Client: []types.ExtensionClientInfo{{Version: Version, Description: desc, Company: "Cairn",
			Type: "vsphere-client-remote", Url: publicURL + "/ui/plugin.json"}},
		Server: []types.ExtensionServerInfo{{Url: publicURL + "/ui/", Description: desc, Company: "Cairn", Type: "HTTPS",
			AdminEmail: []string{"noreply@cairn.invalid"}, ServerThumbprint: cert.SHA1}},
		TaskList: tasks,
	}
}

// Descriptor is the extension registration descriptor as the plugin
// serves it (GET /api/v1/extension), for the installer (cairn-install
// registers it with pyVmomi). Format version 1.
type Descriptor struct {
	Version          int      `json:"descriptor_version"`
	Key              string   `json:"key"`
	PluginVersion    string   `json:"plugin_version"`
	Company          string   `json:"company"`
	Label            string   `json:"label"`
	Summary          string   `json:"summary"`
	ClientType       string   `json:"client_type"` // vsphere-client-remote
	ClientURL        string   `json:"client_url"`  // the plugin.json manifest
	ServerURL        string   `json:"server_url"`
	ServerThumbprint string   `json:"server_thumbprint"` // SHA-1, colon hex
	ServerSHA256     string   `json:"server_thumbprint_sha256"`
	TaskTypes        []string `json:"task_types"`
}

// NewDescriptor describes the plugin served at publicURL.
func NewDescriptor(publicURL string, cert *Certificate) Descriptor {
	ext := Extension(publicURL, cert)
	d := Descriptor{Version: 1, Key: ext.Key, PluginVersion: ext.Version, Company: ext.Company,
		Label: ext.Description.GetDescription().Label, Summary: ext.Description.GetDescription().Summary,
		ClientType: ext.Client[0].Type, ClientURL: ext.Client[0].Url, ServerURL: ext.Server[0].Url,
		ServerThumbprint: cert.SHA1, ServerSHA256: cert.SHA256}
	for _, t := range ext.TaskList {
		d.TaskTypes = append(d.TaskTypes, t.TaskID)
	}
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
