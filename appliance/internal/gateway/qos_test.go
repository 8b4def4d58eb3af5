package gateway

import (
	"maps"
	"testing"

	"github.com/cairn-storage/cairn/appliance/internal/model"
)

// qosOf reads a volume's own and effective limits.
func qosOf(t *testing.T, v map[string]any) (iops, bw, effIOPS, effBW float64) {
	t.Helper()
	get := func(k string) float64 {
		x, ok := v[k].(float64)
		if !ok {
			t.Fatalf("volume view has no %s: %v", k, v)
		}
		return x
	}
	return get("iops_limit"), get("bandwidth_limit"), get("effective_iops_limit"), get("effective_bandwidth_limit")
}

func TestVolumeQoSAPI(t *testing.T) {
	e := newEnv(t)
	e.cluster()
	a := e.admin
	op := e.user("op", model.RoleOperator)
	mon := e.user("mon", model.RoleMonitor)
	e.device(a, `{"name":"b1","sds":"b","pool":"p","path":"/var/lib/cairn/b1.img"}`)

	// Bad values are refused on create, and nothing is created.
	e.fails(400, "iops_limit -1 must be 0 (unlimited) or 1 to 10000000", "POST", "/api/v1/volumes", op, `{"name":"v1","pool":"p","size":8589934592,"iops_limit":-1}`)
	e.fails(400, "bandwidth_limit 1000 must be 0 (unlimited) or 65536", "POST", "/api/v1/volumes", op, `{"name":"v1","pool":"p","size":8589934592,"bandwidth_limit":1000}`)
	e.fails(400, `field "iops_limit"`, "POST", "/api/v1/volumes", op, `{"name":"v1","pool":"p","size":8589934592,"iops_limit":"fast"}`)

	// Set on create.
	v := e.ok(201, "POST", "/api/v1/volumes", op, `{"name":"v1","pool":"p","size":8589934592,"iops_limit":2000,"bandwidth_limit":104857600}`)
	if i, b, ei, eb := qosOf(t, v); i != 2000 || b != 100<<20 || ei != 2000 || eb != 100<<20 {
		t.Fatalf("created with limits: %v %v %v %v", i, b, ei, eb)
	}
	// Live change of one field keeps the other.
	v = e.ok(200, "PATCH", "/api/v1/volumes/v1", op, `{"iops_limit":500}`)
	if i, b, _, _ := qosOf(t, v); i != 500 || b != 100<<20 {
		t.Fatalf("after PATCH iops_limit 500: %v %v", i, b)
	}
	// The same values again: 200, etcd unchanged.
	before := e.state()
	e.ok(200, "PATCH", "/api/v1/volumes/v1", op, `{"iops_limit":500}`)
	if after := e.state(); !maps.Equal(before, after) {
		t.Errorf("a PATCH to the current limits wrote to etcd: %s", diffKeys(before, after))
	}
	// Refused changes change nothing: a bad limit, a bad limit beside a
	// good size, a good limit beside a bad size, a monitor.
	e.fails(400, "iops_limit 20000000 must be", "PATCH", "/api/v1/volumes/v1", op, `{"iops_limit":20000000}`)
	e.fails(400, "bandwidth_limit -5 must be", "PATCH", "/api/v1/volumes/v1", op, `{"size":17179869184,"bandwidth_limit":-5}`)
	e.fails(400, "can only grow", "PATCH", "/api/v1/volumes/v1", op, `{"size":1073741824,"iops_limit":100}`)
	e.failsWith(400, CodeNoChange, "", "the request changes nothing", "PATCH", "/api/v1/volumes/v1", op, `{}`)
	e.fails(403, "needs role operator", "PATCH", "/api/v1/volumes/v1", mon, `{"iops_limit":0}`)
	// Unset: 0 is unlimited (ScaleIO could not unset a limit).
	v = e.ok(200, "PATCH", "/api/v1/volumes/v1", op, `{"iops_limit":0,"bandwidth_limit":0}`)
	if i, b, ei, eb := qosOf(t, v); i != 0 || b != 0 || ei != 0 || eb != 0 {
		t.Fatalf("after unsetting: %v %v %v %v", i, b, ei, eb)
	}
	stored, err := e.srvStore().GetVolume(t.Context(), "v1")
	if err != nil || stored.QoSLimits != (model.QoSLimits{}) {
		t.Fatalf("stored limits after unset: %+v %v", stored.QoSLimits, err)
	}

	// Per-mapping limits: set in the map request, changed by mapping
	// again, refused when bad.
	e.ok(201, "POST", "/api/v1/hosts", op, `{"name":"kvm1","type":"nbd"}`)
	e.fails(400, "iops_limit -3 must be", "POST", "/api/v1/volumes/v1/map", op, `{"host":"kvm1","iops_limit":-3}`)
	m := e.ok(200, "POST", "/api/v1/volumes/v1/map", op, `{"host":"kvm1","iops_limit":300}`)
	if mp := m["mappings"].([]any)[0].(map[string]any); mp["iops_limit"] != float64(300) || mp["bandwidth_limit"] != float64(0) {
		t.Fatalf("mapping %v", mp)
	}
	m = e.ok(200, "POST", "/api/v1/volumes/v1/map", op, `{"host":"kvm1","iops_limit":0,"bandwidth_limit":1048576}`)
	if mp := m["mappings"].([]any)[0].(map[string]any); mp["iops_limit"] != float64(0) || mp["bandwidth_limit"] != float64(1<<20) {
		t.Fatalf("mapping after a live change %v", mp)
	}
	e.fails(409, "unmap it first", "POST", "/api/v1/volumes/v1/map", op, `{"host":"kvm1","read_only":true}`)
}

func TestPoolQoSDerivation(t *testing.T) {
	e := newEnv(t)
	e.cluster()
	a := e.admin
	op := e.user("op", model.RoleOperator)
	e.device(a, `{"name":"b1","sds":"b","pool":"p","path":"/var/lib/cairn/b1.img"}`)
	e.fails(400, "qos_iops_per_gib -1 must be 0 (off)", "PATCH", "/api/v1/pools/p", a, `{"qos_iops_per_gib":-1}`)
	e.fails(400, "qos_bandwidth_per_gib 2147483648 must be", "PATCH", "/api/v1/pools/p", a, `{"qos_bandwidth_per_gib":2147483648}`)
	e.fails(400, "qos_iops_per_gib 2000000 must be", "POST", "/api/v1/pools", a, `{"name":"p2","protection_domain":"pd1","qos_iops_per_gib":2000000}`)
	// ScaleIO-style: IOPS and bandwidth grow with the size.
	p := e.ok(200, "PATCH", "/api/v1/pools/p", a, `{"qos_iops_per_gib":50,"qos_bandwidth_per_gib":262144}`)
	if p["qos_iops_per_gib"] != float64(50) || p["qos_bandwidth_per_gib"] != float64(262144) {
		t.Fatalf("pool %v", p)
	}
	v := e.ok(201, "POST", "/api/v1/volumes", op, `{"name":"v1","pool":"p","size":8589934592}`)
	if i, b, ei, eb := qosOf(t, v); i != 0 || b != 0 || ei != 8*50 || eb != 8*262144 {
		t.Fatalf("8 GiB volume under the rule: own %v %v, effective %v %v", i, b, ei, eb)
	}
	// Recalculated on resize.
	v = e.ok(200, "PATCH", "/api/v1/volumes/v1", op, `{"size":17179869184}`)
	if _, _, ei, eb := qosOf(t, v); ei != 16*50 || eb != 16*262144 {
		t.Fatalf("after growing to 16 GiB: effective %v %v", ei, eb)
	}
	// A volume's own limit wins over the rule; unsetting it brings the
	// rule back.
	v = e.ok(200, "PATCH", "/api/v1/volumes/v1", op, `{"iops_limit":100}`)
	if _, _, ei, eb := qosOf(t, v); ei != 100 || eb != 16*262144 {
		t.Fatalf("own iops limit under the rule: effective %v %v", ei, eb)
	}
	v = e.ok(200, "PATCH", "/api/v1/volumes/v1", op, `{"iops_limit":0}`)
	if _, _, ei, _ := qosOf(t, v); ei != 16*50 {
		t.Fatalf("own limit unset: effective %v, want the rule's %d", ei, 16*50)
	}
	// Changing the rule changes every volume's effective limits; 0 turns
	// it off.
	e.ok(200, "PATCH", "/api/v1/pools/p", a, `{"qos_iops_per_gib":0}`)
	v = e.ok(200, "GET", "/api/v1/volumes/v1", op, "")
	if _, _, ei, eb := qosOf(t, v); ei != 0 || eb != 16*262144 {
		t.Fatalf("rule off for IOPS: effective %v %v", ei, eb)
	}
	// Rebuild settings and the QoS rule in one PATCH.
	p = e.ok(200, "PATCH", "/api/v1/pools/p", a, `{"rebuild_policy":"favor-app-io","qos_bandwidth_per_gib":0}`)
	if p["rebuild_policy"] != "favor-app-io" || p["qos_bandwidth_per_gib"] != float64(0) {
		t.Fatalf("pool %v", p)
	}
}

func (e *env) srvStore() *model.Store { return e.srv.store }
