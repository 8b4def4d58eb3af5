package gateway

import (
	"bytes"
	"encoding/json"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/cairn-storage/cairn/appliance/internal/model"
)

// requestTypes are every body the API decodes.
func requestTypes() []func() any {
	return []func() any{
		func() any { return new(loginRequest) }, func() any { return new(bootstrapRequest) },
		func() any { return new(model.PDSpec) }, func() any { return new(model.FaultSetSpec) },
		func() any { return new(model.SDSSpec) }, func() any { return new(model.DeviceSpec) },
		func() any { return new(model.PoolSpec) }, func() any { return new(model.VolumeSpec) },
		func() any { return new(model.HostSpec) }, func() any { return new(model.UserSpec) },
		func() any { return new(model.UserUpdate) }, func() any { return new(model.MapSpec) },
		func() any { return new(unmapRequest) }, func() any { return new(model.VolumeUpdate) },
		func() any { return new(model.NameUpdate) }, func() any { return new(model.HostUpdate) },
		func() any { return new(model.PoolUpdate) }, func() any { return new(model.SDSUpdate) },
		func() any { return new(addMemberRequest) }, func() any { return new(moveLeaderRequest) },
		func() any { return new(maintenanceRequest) }, func() any { return new(upgradeOrderRequest) },
		func() any { return new(joinTokenRequest) },
	}
}

// FuzzDecode: decodeJSON never panics, accepts only one JSON object whose
// fields all belong to the target, and its errors are one readable line.
func FuzzDecode(f *testing.F) {
	for _, seed := range []string{
		`{"name":"v1","pool":"p","size":8589934592,"thin":false}`,
		`{"username":"admin","password":"x"}`,
		`{"name":"h","type":"iscsi","iqn":"iqn.1998-01.com.vmware:h"}`,
		`{"size":1e3}`, `{"size":-1}`, `{"size":"8G"}`, `{"name": }`, `{"name":"x"`, `{"nmae":"x"}`,
		`[]`, ``, `   `, `null`, `{"name":"x"} {}`, `{"name":"\u00e9\ud800"}`, "{\"name\":\"x\"}\n",
		`{"spare_percent":null}`, `{"force":true,"force":false}`, `{"name":"x",}`, "\xff{}",
		`{"Name":"case"}`, `{"size":99999999999999999999999}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 4096 {
			return
		}
		for _, mk := range requestTypes() {
			v := mk()
			err := decodeJSON(bytes.NewReader(data), v)
			if err != nil {
				msg := err.Error()
				if msg == "" || strings.Contains(msg, "\n") || !utf8.ValidString(msg) && utf8.Valid(data) {
					t.Fatalf("unreadable error %q for %q", msg, data)
				}
				continue
			}
			// Accepted: it was one object with known fields only, so
			// encoding and decoding again yields the same value.
			b, err := json.Marshal(v)
			if err != nil {
				t.Fatalf("re-encode %T: %v", v, err)
			}
			w := mk()
			if err := decodeJSON(bytes.NewReader(b), w); err != nil {
				t.Fatalf("re-decode %s into %T: %v", b, w, err)
			}
			if !reflect.DeepEqual(v, w) {
				t.Fatalf("round trip of %q changed %#v to %#v", data, v, w)
			}
		}
	})
}

func TestDecodeMessages(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"{\n  \"name\": \"x\",\n  \"pool\": ,\n}", "malformed JSON at line 3, column 11"},
		{`{"size": true}`, `field "size" at line 1, column 14 (byte 13): expected an integer, got JSON bool`},
		{`{"thin": "yes"}`, `field "thin" at line 1, column 15 (byte 14): expected true or false, got JSON string`},
		{`{"colour": 1}`, `unknown field "colour"; this request accepts: bandwidth_limit, iops_limit, name, pool, size, thin`},
	} {
		err := decodeJSON(strings.NewReader(tc.in), new(model.VolumeSpec))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: got %v, want %q", tc.in, err, tc.want)
		}
	}
}

// FuzzQueryParsers: the event filter and If-Match parsers never panic, and
// every refusal names the parameter at fault.
func FuzzQueryParsers(f *testing.F) {
	for _, seed := range []string{"after=00000000000004d2&severity=warning", "limit=1001", "severity=loud", "after=zz", "object=v1&kind=audit", "x=1", "limit=-1", "after=ffffffffffffffff"} {
		f.Add(seed, `"12"`)
	}
	f.Add("", "W/\"7\"")
	f.Add("", "*")
	f.Add("", "\"-1\"")
	f.Fuzz(func(t *testing.T, query, ifMatch string) {
		r := httptest.NewRequest("GET", "/api/v1/events", nil)
		r.URL.RawQuery = query
		c := &call{r: r}
		if rev, err := parseIfMatch(ifMatch); (err != nil && model.FieldOf(err) != "If-Match") || rev < 0 {
			t.Errorf("If-Match %q: %d %v", ifMatch, rev, err)
		}
		if _, limit, err := parseEventFilter(c, true); err != nil {
			if model.FieldOf(err) == "" {
				t.Errorf("query %q: refusal %q names no field", query, err)
			}
		} else if limit < 1 || limit > eventPageMax {
			t.Errorf("query %q: limit %d out of bounds", query, limit)
		}
	})
}
