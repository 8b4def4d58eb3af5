package gateway

import "testing"

func TestRebuildSettingsAPI(t *testing.T) {
	e := newEnv(t)
	e.cluster()
	a := e.admin
	op := e.user("op", "operator")

	if p := e.ok(200, "GET", "/api/v1/pools/p", a, ""); p["rebuild_policy"] != "unlimited" {
		t.Errorf("default policy %v", p["rebuild_policy"])
	}
	e.failsWith(400, CodeNoChange, "", "the request changes nothing", "PATCH", "/api/v1/pools/p", a, `{}`)
	e.fails(400, `rebuild_policy "turbo": use one of unlimited, limit-concurrent-io, favor-app-io`, "PATCH", "/api/v1/pools/p", a, `{"rebuild_policy":"turbo"}`)
	e.fails(400, "needs rebuild_max_io", "PATCH", "/api/v1/pools/p", a, `{"rebuild_policy":"limit-concurrent-io"}`)
	e.fails(400, "rebuild_max_io 100 must be between 1 and 64", "PATCH", "/api/v1/pools/p", a, `{"rebuild_policy":"limit-concurrent-io","rebuild_max_io":100}`)
	e.fails(400, "rebuild_max_io", "PATCH", "/api/v1/pools/p", a, `{"rebuild_policy":"unlimited","rebuild_max_io":"two"}`)
	e.failsWith(400, CodeInvalid, "spare_percent", "spare_percent 95 must be between 0 and 90", "PATCH", "/api/v1/pools/p", a, `{"spare_percent":95}`)
	e.fails(404, `pool "q" not found`, "PATCH", "/api/v1/pools/q", a, `{"rebuild_policy":"unlimited"}`)
	e.fails(403, "admin", "PATCH", "/api/v1/pools/p", op, `{"rebuild_policy":"unlimited"}`)
	p := e.ok(200, "PATCH", "/api/v1/pools/p", a, `{"rebuild_policy":"limit-concurrent-io","rebuild_max_io":3}`)
	if p["rebuild_policy"] != "limit-concurrent-io" || p["rebuild_max_io"] != 3.0 || p["name"] != "p" || p["protection_domain_name"] != "pd1" {
		t.Errorf("PATCH answer %v", p)
	}
	if p := e.ok(200, "GET", "/api/v1/pools/p", a, ""); p["rebuild_policy"] != "limit-concurrent-io" || p["rebuild_max_io"] != 3.0 {
		t.Errorf("after PATCH: %v", p)
	}

	e.failsWith(400, CodeNoChange, "", "give at least one of name, rebuild_mbps", "PATCH", "/api/v1/sds/a", a, `{}`)
	e.fails(400, "rebuild_mbps -1 must be between 0 (no cap) and 100000", "PATCH", "/api/v1/sds/a", a, `{"rebuild_mbps":-1}`)
	e.fails(400, "address", "PATCH", "/api/v1/sds/a", a, `{"address":"127.0.0.1:1"}`)
	e.fails(403, "admin", "PATCH", "/api/v1/sds/a", op, `{"rebuild_mbps":10}`)
	x := e.ok(200, "PATCH", "/api/v1/sds/a", a, `{"rebuild_mbps":20}`)
	if x["rebuild_mbps"] != 20.0 || x["name"] != "a" || x["state"] != "normal" {
		t.Errorf("PATCH answer %v", x)
	}
	if x := e.ok(200, "GET", "/api/v1/sds/b", a, ""); x["rebuild_mbps"] != 0.0 {
		t.Errorf("another SDS: %v", x["rebuild_mbps"])
	}
}
