#!/usr/bin/env bash
# Integration tests of the cairn.storage modules against a real local cluster
# (tests/lib/cluster.sh: 3 MDMs, 3 SDSs each in a fault set of its own, a gateway, NBD): every
# module's create/update/delete (crud.yml); an MDM member added through the module, started
# with `cairn mdm --join`, promoted and removed (mdm-add.yml, mdm-join.yml); a declared state (converge.yml) applied with --check (the etcd revision of the
# model must not move), for real, and again (changed=0 on every task); --check --diff of a
# change shows it; bad input fails with the gateway's message and changes nothing.
#
# Env: CAIRN_BIN (the daemons, default appliance/bin), KEEP=1 (leave the cluster running).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
VENV=$ROOT/.venv
now() { date +%s; }
say() { echo "[$(date +%H:%M:%S)] $*"; }
die() { echo "integration: $*" >&2; exit 1; }

[ -x "$VENV/bin/ansible-playbook" ] || die "no ansible-playbook in $VENV: run scripts/pydeps.sh"
"$VENV/bin/python" -c 'import cairn' 2>/dev/null ||
	die "the cairn Python client is not installed in $VENV (installer/ in the repository): run scripts/pydeps.sh"
CAIRN=${CAIRN_BIN:-$ROOT/appliance/bin}/cairn
[ -x "$CAIRN" ] || die "no cairn binary in ${CAIRN_BIN:-$ROOT/appliance/bin}: run make build"

T0=$(now)
STATE=$(mktemp -d /tmp/cairn-ansible-it.XXXXXX)
cleanup() {
	local rc=$?
	if [ "${KEEP:-0}" = 1 ]; then
		say "cluster left running: $ROOT/tests/lib/cluster.sh stop $STATE"
	else
		"$ROOT/tests/lib/cluster.sh" stop "$STATE" >/dev/null 2>&1 || true
		[ $rc = 0 ] && rm -rf "$STATE"
	fi
	[ $rc = 0 ] || echo "integration: FAILED (cluster logs and playbook output in $STATE)" >&2
}
trap cleanup EXIT

say "starting a local cluster"
"$ROOT/tests/lib/cluster.sh" start "$STATE" --sds 3 --devices-per-sds 1 --device-size 8G --volume-size 1GiB --fault-sets >"$STATE/cluster.log" 2>&1 ||
	{ tail -20 "$STATE/cluster.log" >&2; die "the cluster did not start"; }
# shellcheck disable=SC1091
source "$STATE/ports.env"
export CAIRN_GATEWAYS=127.0.0.1:$GW_PORT CAIRN_USERNAME=admin CAIRN_CA_FILE=$STATE/gateway/cert.pem
CAIRN_PASSWORD=$(cat "$STATE/gateway/admin-password")
export CAIRN_PASSWORD
MDM_URL=https://127.0.0.1:$MDM1_CLIENT
# etcd authenticates every client: a read-only client certificate of the cluster.
# shellcheck source=../../../tests/lib/common.sh
. "$ROOT/tests/lib/common.sh"
MDM_PKI=$(pki_dir "$STATE" client ansible-test)
truncate -s 4G "$STATE/extra.img"
export CAIRN_TEST_EXTRA_DEVICE=$STATE/extra.img
export ANSIBLE_COLLECTIONS_PATH=$ROOT/ansible ANSIBLE_NOCOLOR=1 ANSIBLE_RETRY_FILES_ENABLED=False \
	ANSIBLE_LOCALHOST_WARNING=False ANSIBLE_INVENTORY_UNPARSED_WARNING=False ANSIBLE_LOCAL_TEMP=$STATE/tmp
PLAY=("$VENV/bin/ansible-playbook" -e "ansible_python_interpreter=$VENV/bin/python")
revision() { "$VENV/bin/python" "$HERE/model_revision.py" "$MDM_URL" "$MDM_PKI"; }
recap() { sed -n 's/^localhost *: //p' "$1"; }
changed_of() { recap "$1" | sed -n 's/.*changed=\([0-9]*\).*/\1/p'; }

pass=0
ok() { pass=$((pass + 1)); say "ok: $*"; }

say "crud.yml: each module's create/update/delete"
t=$(now)
"${PLAY[@]}" "$HERE/crud.yml" >"$STATE/crud.log" 2>&1 || { grep -E 'FAILED|fatal|msg' "$STATE/crud.log" | tail -20 >&2; die "crud.yml failed (log $STATE/crud.log)"; }
ok "crud.yml ($(recap "$STATE/crud.log")) in $(($(now) - t)) s"

say "MDM membership: add mdm4 through the module, start it with --join, wait for its promotion, remove it"
t=$(now)
mapfile -t MDM4 < <(free_ports 2)
MDM4_PEER=https://127.0.0.1:${MDM4[1]}
"${PLAY[@]}" -e "mdm4_peer=$MDM4_PEER" -e "out=$STATE/mdm4.initial-cluster" "$HERE/mdm-add.yml" >"$STATE/mdm-add.log" 2>&1 ||
	{ grep -E 'FAILED|fatal|msg' "$STATE/mdm-add.log" | tail -20 >&2; die "mdm-add.yml failed (log $STATE/mdm-add.log)"; }
# The member's own certificate, as cluster.sh gives the others; it stops with the cluster
# (cluster.sh stop stops every pid file in $STATE/pids).
spawn "$STATE" mdm4 "$CAIRN" mdm --name mdm4 --data-dir "$STATE/mdm4" --tie-breaker \
	--pki "$(pki_dir "$STATE" mdm mdm4)" \
	--client-url "https://127.0.0.1:${MDM4[0]}" --peer-url "$MDM4_PEER" --join --initial-cluster "$(cat "$STATE/mdm4.initial-cluster")"
"${PLAY[@]}" -e "mdm4_peer=$MDM4_PEER" "$HERE/mdm-join.yml" >"$STATE/mdm-join.log" 2>&1 ||
	{ grep -E 'FAILED|fatal|msg' "$STATE/mdm-join.log" | tail -20 >&2; tail -5 "$STATE/logs/mdm4.log" >&2; die "mdm-join.yml failed (log $STATE/mdm-join.log, mdm4's log $STATE/logs/mdm4.log)"; }
stop_pidfiles 10 "$STATE/pids/mdm4.pid"
ok "MDM member mdm4 added, joined, promoted and removed ($(recap "$STATE/mdm-add.log" | sed 's/ *$//'); $(recap "$STATE/mdm-join.log" | sed 's/ *$//')) in $(($(now) - t)) s"

say "update bundles: made by cairn bundle, stored by the module"
t=$(now)
mkdir -m 700 "$STATE/ub"
"${PLAY[@]}" -e "dir=$STATE/ub" -e "cairn=$CAIRN" "$HERE/upgrade-bundle.yml" >"$STATE/upgrade-bundle.log" 2>&1 ||
	{ grep -E 'FAILED|fatal|msg' "$STATE/upgrade-bundle.log" | tail -20 >&2; die "upgrade-bundle.yml failed (log $STATE/upgrade-bundle.log)"; }
ok "upgrade_bundle: stored with its digest, again no change, check mode stores nothing, a rebuild replaces it, no bundle and a damaged one refused with the reason ($(recap "$STATE/upgrade-bundle.log" | sed 's/ *$//')) in $(($(now) - t)) s"

say "join tokens: made by the module, spent at a real join service with cairn pki join"
t=$(now)
mkdir -m 700 "$STATE/jt"
"${PLAY[@]}" -e "dir=$STATE/jt" "$HERE/join-token.yml" >"$STATE/join-token.log" 2>&1 ||
	{ grep -E 'FAILED|fatal|msg' "$STATE/join-token.log" | tail -20 >&2; die "join-token.yml failed (log $STATE/join-token.log)"; }
JOIN_PORT=$(free_ports 1)
spawn "$STATE" joinsvc env CAIRN_MDM="$MDM_URL" "$CAIRN" pki serve --ca "$STATE/pki/ca" \
	--pki "$(pki_dir "$STATE" mdm joinsvc)" --listen "127.0.0.1:$JOIN_PORT"
join() { # TOKEN-FILE NAME
	"$CAIRN" pki join --url "https://127.0.0.1:$JOIN_PORT" --token-file "$1" --role sds --name "$2" \
		--host 127.0.0.1 --out "$STATE/pki/$2" --wait 30s >"$STATE/join-$2.log" 2>&1
}
join "$STATE/jt/sds.token" joined1 || { cat "$STATE/join-joined1.log" >&2; die "the module's token did not get a certificate"; }
"$CAIRN" pki show --dir "$STATE/pki/joined1" | awk 'NR==2{exit !($1=="sds" && $2=="joined1")}' ||
	die "the certificate got with the module's token is not sds/joined1: $("$CAIRN" pki show --dir "$STATE/pki/joined1")"
if join "$STATE/jt/sds.token" joined2; then die "a spent token got a second certificate"; fi
if join "$STATE/jt/revoked.token" joined3; then die "a revoked token got a certificate"; fi
grep -q "token" "$STATE/join-joined2.log" || die "the refusal of a spent token does not say so: $(cat "$STATE/join-joined2.log")"
stop_pidfiles 10 "$STATE/pids/joinsvc.pid"
ok "join_token: token to a 0600 file (never in the result), none made twice or in check mode, revoked once; spent once at the join service, refused spent and revoked ($(recap "$STATE/join-token.log" | sed 's/ *$//')) in $(($(now) - t)) s"

r0=$(revision)
"${PLAY[@]}" --check "$HERE/converge.yml" >"$STATE/check.log" 2>&1 || { tail -20 "$STATE/check.log" >&2; die "converge.yml --check failed"; }
r1=$(revision)
[ "$r1" = "$r0" ] || die "--check moved the model's etcd revision from $r0 to $r1"
[ "$(changed_of "$STATE/check.log")" -gt 0 ] || die "--check of a state not yet applied reported no change"
ok "--check reports $(changed_of "$STATE/check.log") changes and leaves the model at etcd revision $r0"

"${PLAY[@]}" "$HERE/converge.yml" >"$STATE/apply1.log" 2>&1 || { tail -20 "$STATE/apply1.log" >&2; die "converge.yml failed"; }
r2=$(revision)
[ "$r2" -gt "$r1" ] || die "applying converge.yml did not move the model's etcd revision ($r1)"
[ "$(changed_of "$STATE/apply1.log")" = "$(changed_of "$STATE/check.log")" ] ||
	die "the real run changed $(changed_of "$STATE/apply1.log") tasks, --check predicted $(changed_of "$STATE/check.log")"
ok "first run: changed=$(changed_of "$STATE/apply1.log") (as --check predicted), revision $r1 -> $r2"

"${PLAY[@]}" "$HERE/converge.yml" >"$STATE/apply2.log" 2>&1 || { tail -20 "$STATE/apply2.log" >&2; die "converge.yml (second run) failed"; }
r3=$(revision)
[ "$(changed_of "$STATE/apply2.log")" = 0 ] || die "the second run reported changes: $(recap "$STATE/apply2.log")"
[ "$r3" = "$r2" ] || die "the second run moved the model's etcd revision ($r2 -> $r3)"
ok "second run: changed=0, revision still $r3"

"${PLAY[@]}" --check --diff -e volume_size=3GiB "$HERE/converge.yml" >"$STATE/diff.log" 2>&1 || { tail -20 "$STATE/diff.log" >&2; die "converge.yml --check --diff failed"; }
r4=$(revision)
[ "$r4" = "$r3" ] || die "--check --diff moved the model's etcd revision ($r3 -> $r4)"
grep -q -- '-  *"size": 1073741824' "$STATE/diff.log" && grep -q -- '+  *"size": 3221225472' "$STATE/diff.log" ||
	{ sed -n '/TASK \[Volume\]/,/TASK \[User\]/p' "$STATE/diff.log" >&2; die "--diff does not show the size going from 1 GiB to 3 GiB"; }
[ "$(changed_of "$STATE/diff.log")" = 1 ] || die "--check of a grown volume reported $(changed_of "$STATE/diff.log") changes, want 1"
ok "--check --diff shows the volume growing 1 GiB -> 3 GiB (one change), revision still $r4"

"${PLAY[@]}" "$HERE/bad-input.yml" >"$STATE/bad.log" 2>&1 || { grep -E 'FAILED|fatal|msg' "$STATE/bad.log" | tail -20 >&2; die "bad-input.yml failed"; }
r5=$(revision)
[ "$r5" = "$r4" ] || die "bad input moved the model's etcd revision ($r4 -> $r5)"
grep -o '"msg": "create volume vol-bad[^"]*"' "$STATE/bad.log" | head -1
ok "bad input fails with the gateway's status, code and message; revision still $r5"

echo "integration: $pass passed, 0 failed in $(($(now) - T0)) s"
