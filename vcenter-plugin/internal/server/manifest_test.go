package server_test

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/cairn-storage/cairn/vcenter-plugin/internal/server"
)

// The vSphere Client SDK's remote plugin manifest schema (manifestVersion
// 1.1.0) is not published as a file we can fetch here, so its constraints
// are written down as this test: allowed properties per object (the schema
// sets additionalProperties false everywhere), required ones, and that
// every key and URI resolves.
var manifestSchema = map[string][]string{
	"":                            {"manifestVersion", "requirements", "configuration", "global", "objects", "definitions"},
	"requirements":                {"plugin.api.version"},
	"configuration":               {"nameKey", "icon"},
	"configuration.icon":          {"name"},
	"global":                      {"view"},
	"global.view":                 {"navigationId", "uri", "navigationVisible"},
	"objects":                     {"VirtualMachine", "HostSystem", "ClusterComputeResource", "Datastore", "Network", "Datacenter", "Folder", "DistributedVirtualSwitch", "DistributedVirtualPortgroup", "VirtualApp", "ResourcePool"},
	"objects.*":                   {"summary", "monitor", "configure", "menu"},
	"objects.*.summary":           {"view"},
	"objects.*.summary.view":      {"uri", "size"},
	"objects.*.summary.view.size": {"widthSpan", "heightSpan"},
	"objects.*.monitor":           {"views"},
	"objects.*.configure":         {"views"},
	"objects.*.*.views[]":         {"navigationId", "labelKey", "uri"},
	"definitions":                 {"iconSpriteSheet", "i18n"},
	"definitions.iconSpriteSheet": {"uri", "definitions"},
	"definitions.iconSpriteSheet.definitions.*": {"x", "y"},
	"definitions.i18n":                          {"locales", "definitions"},
}

var manifestRequired = map[string][]string{
	"":                 {"manifestVersion", "requirements", "configuration"},
	"requirements":     {"plugin.api.version"},
	"configuration":    {"nameKey"},
	"definitions.i18n": {"locales", "definitions"},
}

// schemaPath turns a concrete path into the pattern manifestSchema uses.
func schemaPath(path string) string {
	parts := strings.Split(path, ".")
	switch {
	case len(parts) >= 2 && parts[0] == "objects":
		parts[1] = "*"
		if len(parts) == 4 && strings.HasSuffix(parts[3], "[]") {
			parts[2] = "*"
		}
	case len(parts) == 4 && parts[0] == "definitions" && parts[1] == "iconSpriteSheet":
		parts[3] = "*"
	}
	return strings.Join(parts, ".")
}

func checkObject(t *testing.T, path string, v map[string]any) {
	t.Helper()
	if path == "definitions.i18n.definitions" || path == "definitions.iconSpriteSheet.definitions" {
		for k, sub := range v {
			if m, ok := sub.(map[string]any); ok && path == "definitions.iconSpriteSheet.definitions" {
				checkObject(t, path+"."+k, m)
			}
		}
		return
	}
	if strings.HasPrefix(path, "definitions.i18n.definitions.") {
		return
	}
	allowed, ok := manifestSchema[schemaPath(path)]
	if !ok {
		t.Errorf("%s: object not in the 1.1.0 schema", path)
		return
	}
	for k, sub := range v {
		if !contains(allowed, k) {
			t.Errorf("%s: property %q not allowed by the 1.1.0 schema (allowed: %v)", path, k, allowed)
		}
		child := k
		if path != "" {
			child = path + "." + k
		}
		switch x := sub.(type) {
		case map[string]any:
			checkObject(t, child, x)
		case []any:
			for _, e := range x {
				if m, ok := e.(map[string]any); ok {
					checkObject(t, child+"[]", m)
				}
			}
		}
	}
	for _, r := range manifestRequired[path] {
		if _, ok := v[r]; !ok {
			t.Errorf("%s: required property %q missing", path, r)
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func TestManifestSchema(t *testing.T) {
	// Through JSON, as the vSphere Client reads it.
	b, err := json.Marshal(server.Manifest())
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	checkObject(t, "", m)
	if m["manifestVersion"] != "1.1.0" {
		t.Errorf("manifestVersion %v", m["manifestVersion"])
	}

	// Every labelKey/nameKey is defined, in every declared locale.
	i18n := m["definitions"].(map[string]any)["i18n"].(map[string]any)
	defs := i18n["definitions"].(map[string]any)
	var locales []string
	for _, l := range i18n["locales"].([]any) {
		locales = append(locales, l.(string))
	}
	keys := regexp.MustCompile(`"(?:labelKey|nameKey)":"([^"]+)"`).FindAllStringSubmatch(string(b), -1)
	if len(keys) < 4 {
		t.Fatalf("only %d localized keys found", len(keys))
	}
	for _, k := range keys {
		d, ok := defs[k[1]].(map[string]any)
		if !ok {
			t.Errorf("key %s has no definition in definitions.i18n.definitions", k[1])
			continue
		}
		for _, l := range locales {
			if s, _ := d[l].(string); s == "" {
				t.Errorf("key %s has no %s string", k[1], l)
			}
		}
	}

	// Every view URI is a route the UI serves (ui/src/app/plugin-views.json,
	// which the UI's router is built from), under its entry index.html.
	raw, err := os.ReadFile("../../../ui/src/app/plugin-views.json")
	if err != nil {
		t.Fatalf("the UI's view list: %v", err)
	}
	var ui struct {
		Views map[string]any `json:"views"`
	}
	if err := json.Unmarshal(raw, &ui); err != nil {
		t.Fatal(err)
	}
	uris := regexp.MustCompile(`"uri":"([^"]+)"`).FindAllStringSubmatch(string(b), -1)
	ids := map[string]bool{}
	for _, u := range uris {
		if strings.HasPrefix(u[1], "assets/") {
			continue
		}
		route, ok := strings.CutPrefix(u[1], "index.html#/")
		if !ok || ui.Views[route] == nil {
			t.Errorf("view URI %s is not index.html#/<a route of the UI>", u[1])
		}
		ids[route] = true
	}
	if len(ids) != len(ui.Views) {
		t.Errorf("manifest declares %d views, the UI serves %d", len(ids), len(ui.Views))
	}
	for _, n := range regexp.MustCompile(`"navigationId":"([^"]+)"`).FindAllStringSubmatch(string(b), -1) {
		if !regexp.MustCompile(`^[A-Za-z0-9._-]+$`).MatchString(n[1]) {
			t.Errorf("navigationId %q", n[1])
		}
	}
}
