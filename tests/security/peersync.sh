#!/usr/bin/env bash
# Peer sync for real (part of make test-security; runs alone too): an "svm"
# network namespace (eth0 management 192.0.2.10/24, eth1 data 198.51.100.10/24)
# loads the ruleset the real `cairn firstboot` derives from its seed, runs its MDM
# (`cairn mdm`, etcd on 192.0.2.10:2379), a listener on the SDS port and
# `cairn peersync`. A new SVM (svm9: 192.0.2.20, 198.51.100.20), unknown to the
# seed, is refused; once its record is in the model (/cairn/v1/svm/svm9, as the
# system's expansion writes it) peersync reloads the firewall and svm9 reaches etcd
# and the SDS port while a stranger still does not; once the record is deleted (the
# host removed) svm9 is refused again. The ruleset file follows (a reboot keeps it).
# Needs root, iproute2, nftables, python3, go (or appliance/bin/cairn).
set -euo pipefail

# shellcheck source=netns.sh
. "$(dirname "${BASH_SOURCE[0]}")/netns.sh"
netns_test cairn-ps "the peer sync test" PEERSYNC_KEEP
netns_cairn

# svm1 of a three-SVM system: svm2 (.11) is in its settings, svm9 (.20) is not.
mkdir -p "$W/seed"
cat >"$W/seed/user-data" <<EOF
#cairn-config v1
cairn.hostname: svm1
cairn.mgmt.address: 192.0.2.10/24
cairn.data.address: 198.51.100.10/24
cairn.roles: mdm,sds
cairn.cluster.name: ps
cairn.cluster.mdm_members: svm1=192.0.2.10
cairn.cluster.join_token: peersync-test-token-0123
cairn.cluster.svms: 192.0.2.10,198.51.100.10,192.0.2.11,198.51.100.11
EOF
"$CAIRN" firstboot --seed "$W/seed" --dry-run --vmtoolsd - --no-seed-disk >"$W/plan" 2>&1 ||
	{ cat "$W/plan"; echo "FAIL cairn firstboot refused the seed"; exit 1; }
awk '/^--- \/etc\/nftables.conf /{on=1; next} /^--- /{on=0} on' "$W/plan" >"$W/nftables.conf"
grep -q 'policy drop' "$W/nftables.conf" || { cat "$W/plan"; echo "FAIL first boot wrote no /etc/nftables.conf"; exit 1; }
# What first boot keeps for peersync is the validated settings: the seed's user-data.
# (The dry run's output above: grep -q on a pipe would stop its writer with SIGPIPE.)
grep -q '^--- /etc/cairn/settings (600' "$W/plan" ||
	{ echo "FAIL first boot keeps no /etc/cairn/settings for peersync"; exit 1; }

for ns in "$SVM" "$MGMT" "$DATA"; do ip netns add "$ns"; ip -n "$ns" link set lo up; done
ip -n "$SVM" link add eth0 type veth peer name m0 netns "$MGMT"
ip -n "$SVM" link add eth1 type veth peer name d0 netns "$DATA"
ip -n "$SVM" addr add 192.0.2.10/24 dev eth0
ip -n "$SVM" addr add 198.51.100.10/24 dev eth1
for a in 11 20 99; do ip -n "$MGMT" addr add "192.0.2.$a/24" dev m0; done
for a in 20 21; do ip -n "$DATA" addr add "198.51.100.$a/24" dev d0; done
ip -n "$SVM" link set eth0 up; ip -n "$SVM" link set eth1 up
ip -n "$MGMT" link set m0 up; ip -n "$DATA" link set d0 up
ip netns exec "$SVM" nft -f "$W/nftables.conf" || { cat -n "$W/nftables.conf"; echo "FAIL nft refuses the generated ruleset"; exit 1; }

t0=$(date +%s.%N)
ip netns exec "$SVM" "$CAIRN" mdm --name svm1 --data-dir "$W/mdm" --client-url http://192.0.2.10:2379 \
	--peer-url http://192.0.2.10:2380 >"$W/mdm.log" 2>&1 &
echo $! >"$W/mdm.pid"
listen "$SVM" listen 7100

# kv put|del KEY [VALUE]: etcd's JSON gateway, from inside the SVM (loopback path).
cat >"$W/kv.py" <<'EOF'
import base64, json, sys, urllib.request
op, key = sys.argv[1], sys.argv[2]
b = lambda s: base64.b64encode(s.encode()).decode()
body = {"key": b(key)}
if op == "put":
    body["value"] = b(sys.argv[3])
path = {"put": "/v3/kv/put", "del": "/v3/kv/deleterange", "get": "/v3/kv/range"}[op]
req = urllib.request.Request("http://192.0.2.10:2379" + path, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
out = json.load(urllib.request.urlopen(req, timeout=5))
if op == "get":
    for kv in out.get("kvs", []):
        print(base64.b64decode(kv["value"]).decode())
EOF
kv() { ip netns exec "$SVM" python3 "$W/kv.py" "$@"; }
for _ in $(seq 1 100); do kv get /cairn/v1/system >/dev/null 2>&1 && break; sleep 0.2; done
kv get /cairn/v1/system >/dev/null 2>&1 || { tail "$W/mdm.log"; echo "FAIL the MDM did not start"; exit 1; }

ip netns exec "$SVM" "$CAIRN" peersync --mdm http://192.0.2.10:2379 --settings "$W/seed/user-data" \
	--ruleset "$W/nftables.conf" --known "$W/known" >"$W/peersync.log" 2>&1 &
echo $! >"$W/peersync.pid"
for _ in $(seq 1 100); do [ -n "$(kv get /cairn/v1/svm/svm1 2>/dev/null)" ] && break; sleep 0.2; done
if kv get /cairn/v1/svm/svm1 | grep -q '"addresses":\["192.0.2.10","198.51.100.10"\]'; then
	ok "peersync recorded svm1 in the model: $(kv get /cairn/v1/svm/svm1)"
else
	bad "no record of svm1 in the model; peersync's log:"; cat "$W/peersync.log"
fi

# admitted ADDR: the loaded etcd rule names ADDR (waits up to 30 s for want=yes|no).
admitted() {
	local want=$1 addr=$2 i has
	for ((i = 0; i < 150; i++)); do
		has=no
		ip netns exec "$SVM" nft list chain inet cairn input | grep 'dport 2379' | grep -qw "$addr" && has=yes
		[ "$has" = "$want" ] && return 0
		sleep 0.2
	done
	return 1
}
S=192.0.2.10 D=198.51.100.10

expect "$MGMT" \
	"192.0.2.11 $S 2379 open   etcd from svm2 (in the settings)" \
	"192.0.2.20 $S 2379 closed etcd from svm9 before it is in the model" \
	"192.0.2.20 $S 7100 closed SDS port from svm9's management address before"
expect "$DATA" \
	"198.51.100.20 $D 7100 closed SDS port from svm9's data address before"

kv put /cairn/v1/svm/svm9 '{"name":"svm9","addresses":["192.0.2.20","198.51.100.20"],"roles":["sds"]}'
t_add=$(date +%s.%N)
if admitted yes 192.0.2.20; then
	ok "peersync admitted svm9 within $(python3 -c "print(round($(date +%s.%N)-$t_add,1))") s of its record"
else
	bad "svm9 not admitted 30 s after its record; peersync's log:"; cat "$W/peersync.log"
fi
expect "$MGMT" \
	"192.0.2.20 $S 2379 open   etcd from svm9 once the model has it" \
	"192.0.2.20 $S 7100 open   SDS port from svm9 once the model has it" \
	"192.0.2.11 $S 2379 open   etcd from svm2 still" \
	"192.0.2.99 $S 2379 closed etcd from a stranger" \
	"192.0.2.99 $S 7100 closed SDS port from a stranger"
expect "$DATA" \
	"198.51.100.20 $D 7100 open   SDS port from svm9's data address" \
	"198.51.100.21 $D 7100 closed SDS port from a stranger on the data network"
if grep -qw 192.0.2.20 "$W/nftables.conf" && grep -q 'policy drop' "$W/nftables.conf"; then
	ok "the ruleset file admits svm9 too (a reboot keeps it)"
else
	bad "the ruleset file does not follow the loaded ruleset"
fi

kv del /cairn/v1/svm/svm9
if admitted no 192.0.2.20; then ok "svm9's record deleted: peersync took it out"; else bad "svm9 still admitted 30 s after its record was deleted"; fi
expect "$MGMT" \
	"192.0.2.20 $S 2379 closed etcd from svm9 after its removal" \
	"192.0.2.20 $S 7100 closed SDS port from svm9 after its removal" \
	"192.0.2.11 $S 2379 open   etcd from svm2 (in the settings) still"
expect "$DATA" \
	"198.51.100.20 $D 7100 closed SDS port from svm9's data address after its removal"
if ! grep -qw 192.0.2.20 "$W/nftables.conf"; then ok "the ruleset file no longer admits svm9"; else bad "the ruleset file still admits svm9"; fi

# One log line per change, no more (the record of svm1 changes nothing).
n=$(grep -c 'firewall updated' "$W/peersync.log" || true)
if [ "$n" -eq 2 ]; then ok "peersync logged each of the 2 changes once"; else bad "peersync logged $n firewall updates for 2 changes:"; cat "$W/peersync.log"; fi

echo "peersync: $passed passed, $failed failed in $(python3 -c "print(round($(date +%s.%N)-$t0,1))") s"
[ "$failed" -eq 0 ]
