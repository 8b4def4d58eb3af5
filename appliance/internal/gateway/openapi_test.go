package gateway

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"
)

// TestOpenAPIMatchesRoutes: every served route is documented with its role,
// and every documented operation is served.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	var doc struct {
		OpenAPI string                                `json:"openapi"`
		Paths   map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(openapiDoc, &doc); err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	if doc.OpenAPI != "3.1.0" {
		t.Errorf("openapi version %q", doc.OpenAPI)
	}
	documented := map[string]string{} // "METHOD path" -> role
	for path, item := range doc.Paths {
		for method, raw := range item {
			if method == "parameters" {
				continue
			}
			var op struct {
				Role        string          `json:"x-cairn-role"`
				OperationID string          `json:"operationId"`
				RequestBody json.RawMessage `json:"requestBody"`
			}
			if err := json.Unmarshal(raw, &op); err != nil {
				t.Fatalf("%s %s: %v", method, path, err)
			}
			if op.OperationID == "" {
				t.Errorf("%s %s has no operationId", method, path)
			}
			documented[strings.ToUpper(method)+" "+path] = op.Role
		}
	}
	served := map[string]string{}
	for _, rt := range (&Server{}).apiRoutes() {
		role := rt.role
		if role == "" {
			role = "none"
		}
		served[rt.method+" "+rt.path] = role
	}
	var missing, extra []string
	for k, role := range served {
		doc, ok := documented[k]
		if !ok {
			missing = append(missing, k)
		} else if doc != role {
			t.Errorf("%s: served for role %s, documented as %s", k, role, doc)
		}
	}
	for k := range documented {
		if _, ok := served[k]; !ok {
			extra = append(extra, k)
		}
	}
	sort.Strings(missing)
	sort.Strings(extra)
	if len(missing) > 0 {
		t.Errorf("served but not in openapi.json: %v", missing)
	}
	if len(extra) > 0 {
		t.Errorf("in openapi.json but not served: %v", extra)
	}
}

// TestOpenAPIRefsResolve: every $ref points at a defined component.
func TestOpenAPIRefsResolve(t *testing.T) {
	var doc map[string]any
	if err := json.Unmarshal(openapiDoc, &doc); err != nil {
		t.Fatal(err)
	}
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			if ref, ok := x["$ref"].(string); ok {
				var cur any = doc
				for _, part := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
					m, _ := cur.(map[string]any)
					cur = m[part]
				}
				if cur == nil {
					t.Errorf("dangling $ref %s", ref)
				}
			}
			for _, c := range x {
				walk(c)
			}
		case []any:
			for _, c := range x {
				walk(c)
			}
		}
	}
	walk(doc)
}

// TestOpenAPIRequestSchemas: each request schema lists exactly the fields
// the gateway decodes (it refuses any other).
func TestOpenAPIRequestSchemas(t *testing.T) {
	schemas := schemaFields(t)
	types := map[string]any{}
	for _, mk := range requestTypes() {
		v := mk()
		name := strings.TrimPrefix(strings.TrimPrefix(reflectName(v), "model."), "gateway.")
		types[name] = v
	}
	alias := map[string]string{"loginRequest": "LoginRequest", "bootstrapRequest": "BootstrapRequest", "unmapRequest": "UnmapRequest",
		"MapSpec": "MapRequest", "maintenanceRequest": "MaintenanceRequest",
		"addMemberRequest": "AddMemberRequest", "moveLeaderRequest": "MoveLeaderRequest",
		"upgradeOrderRequest": "UpgradeOrderRequest", "joinTokenRequest": "JoinTokenRequest"}
	for goName, v := range types {
		schema := goName
		if a, ok := alias[goName]; ok {
			schema = a
		}
		got, ok := schemas[schema]
		if !ok {
			t.Errorf("no schema %s for request type %s", schema, goName)
			continue
		}
		if want := strings.Join(jsonFields(v), ","); got != want {
			t.Errorf("schema %s has fields %s; %s decodes %s", schema, got, goName, want)
		}
	}
}

func reflectName(v any) string { return strings.TrimPrefix(fmt.Sprintf("%T", v), "*") }

// TestOpenAPIResponseSchemas: each response schema lists exactly the fields
// the gateway writes.
func TestOpenAPIResponseSchemas(t *testing.T) {
	schemas := schemaFields(t)
	for schema, v := range map[string]any{
		"PD": pdView{}, "FaultSet": faultSetView{}, "SDS": sdsView{}, "Device": deviceView{}, "Pool": poolView{},
		"Volume": volumeView{}, "Host": hostView{}, "User": userView{}, "Capacity": capacityView{}, "Error": errorBody{},
		"Job": Job{}, "Event": Event{}, "Alert": Alert{}, "MDMMember": mdmMember{}, "ObjectRef": objectRef{},
		"Certificate": certificateView{}, "Versions": versionsView{},
		"Bundle": bundleView{}, "UpgradeSVM": upgradeSVMView{}, "JoinToken": joinTokenView{},
	} {
		got, ok := schemas[schema]
		if !ok {
			t.Errorf("no schema %s", schema)
			continue
		}
		if want := strings.Join(jsonFields(v), ","); got != want {
			t.Errorf("schema %s has fields %s; the gateway writes %s", schema, got, want)
		}
	}
}

// schemaFields returns each component schema's property names, sorted and
// joined with ",".
func schemaFields(t *testing.T) map[string]string {
	t.Helper()
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Properties map[string]json.RawMessage `json:"properties"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(openapiDoc, &doc); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for name, s := range doc.Components.Schemas {
		var props []string
		for p := range s.Properties {
			props = append(props, p)
		}
		sort.Strings(props)
		out[name] = strings.Join(props, ",")
	}
	return out
}
