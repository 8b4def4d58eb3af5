// Tests of the placement map's copy encoding: the ready state's name and the
// older maps that left it out.

package model_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/cairn-storage/cairn/appliance/internal/model"
)

func TestCopyStateDecodesOldAndNewReady(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"sds":"a","dev":"d"}`, model.CopyReady},            // before the name: left out
		{`{"sds":"a","dev":"d","state":""}`, model.CopyReady}, // or empty
		{`{"sds":"a","dev":"d","state":"ready"}`, model.CopyReady},
		{`{"sds":"a","dev":"d","state":"rebuild","since":7}`, model.CopyRebuild},
		{`{"sds":"a","dev":"d","state":"away"}`, model.CopyAway},
		{`{"sds":"a","dev":"d","state":"resync"}`, model.CopyResync},
	} {
		var c model.CopyRef
		if err := json.Unmarshal([]byte(tc.in), &c); err != nil {
			t.Fatalf("%s: %v", tc.in, err)
		}
		if c.State != tc.want || c.SDSID != "a" || c.DeviceID != "d" {
			t.Errorf("%s decoded as %+v, want state %q", tc.in, c, tc.want)
		}
	}
	var c model.CopyRef
	if err := json.Unmarshal([]byte(`{"sds":1}`), &c); err == nil {
		t.Error("a copy with a numeric sds decoded without error")
	}
}

func TestCopyStateWritesReadyByName(t *testing.T) {
	m := model.PlacementMap{PoolID: "p", Epoch: 3, PGCount: 1, PGs: [][]model.CopyRef{{
		{SDSID: "a", DeviceID: "d1", State: model.CopyReady},
		{SDSID: "b", DeviceID: "d2", State: model.CopyRebuild, Since: 3},
	}}}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `{"sds":"a","dev":"d1","state":"ready"}`) {
		t.Errorf("ready copy not written by name: %s", b)
	}
	var back model.PlacementMap
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.PGs[0][0] != m.PGs[0][0] || back.PGs[0][1] != m.PGs[0][1] {
		t.Errorf("round trip: %+v, want %+v", back.PGs, m.PGs)
	}
}
