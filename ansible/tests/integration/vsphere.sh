#!/usr/bin/env bash
# The vSphere deployment playbook (cairn.storage.vsphere_deploy) against the real plugin
# server in its -demo mode: govmomi's simulated vCenter (4 hosts) and the plugin's real
# deploy engine; the storage side there is the plugin's in-memory stand-in for a Cairn
# cluster (the e2e suite covers real daemons). The plan is the one the wizard downloads:
# POST /api/v1/plan/suggest, saved to a file. Checks: the playbook deploys (job succeeded),
# a second run resumes and succeeds, a broken plan fails with the server's problems.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
VENV=$ROOT/.venv
say() { echo "[$(date +%H:%M:%S)] $*"; }
die() { echo "vsphere: $*" >&2; exit 1; }
T0=$(date +%s)
DIR=$(mktemp -d /tmp/cairn-ansible-vsphere.XXXXXX)
PID=
cleanup() {
	local rc=$?
	[ -z "$PID" ] || { kill "$PID" 2>/dev/null; wait "$PID" 2>/dev/null || true; }
	[ $rc = 0 ] && [ "${KEEP:-0}" != 1 ] && rm -rf "$DIR"
	[ $rc = 0 ] || echo "vsphere: FAILED (logs in $DIR)" >&2
}
trap cleanup EXIT

say "building the plugin server"
(cd "$ROOT/vcenter-plugin" && nice go build -o "$DIR/bin/" ./cmd/cairn-plugin) || die "go build ./cmd/cairn-plugin failed"
PORT=$(python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])')
"$DIR/bin/cairn-plugin" -demo -listen "127.0.0.1:$PORT" >"$DIR/plugin.log" 2>&1 &
PID=$!
for _ in $(seq 1 300); do grep -q 'simulated vCenter' "$DIR/plugin.log" && break; kill -0 "$PID" || die "the plugin server exited: $(tail -5 "$DIR/plugin.log")"; sleep 0.2; done
grep -q 'simulated vCenter' "$DIR/plugin.log" || die "the plugin server did not start in 60 s"
CERT=$(sed -n 's/^ *certificate: \(.*\) (SHA-256.*/\1/p' "$DIR/plugin.log")
# The demo prints the user and the file that holds its generated password (0600).
VC_USER=$(sed -n 's/.*sign in to the UI as \(\S*\) with the password in .*/\1/p' "$DIR/plugin.log")
VC_PASS_FILE=$(sed -n 's/.*sign in to the UI as \S* with the password in \(\S*\).*/\1/p' "$DIR/plugin.log")
[ -n "$VC_USER" ] && [ -r "$VC_PASS_FILE" ] || die "the plugin server's demo did not say who to sign in as: $(tail -5 "$DIR/plugin.log")"
VC_PASS=$(cat "$VC_PASS_FILE")
URL=https://127.0.0.1:$PORT

say "the plan the wizard downloads (POST /api/v1/plan/suggest)"
curl -sf --cacert "$CERT" -c "$DIR/cookies" -H 'Content-Type: application/json' \
	-d "{\"username\":\"$VC_USER\",\"password\":\"$VC_PASS\"}" "$URL/api/v1/session" >/dev/null || die "login to the plugin server failed"
curl -sf --cacert "$CERT" -b "$DIR/cookies" -H 'Content-Type: application/json' \
	-d '{"datacenter":"DC0","system":"lab","template":"cairn-svm","svm_cidr":"10.20.0.0/24","iscsi_cidr":"10.30.0.0/24"}' \
	"$URL/api/v1/plan/suggest" >"$DIR/plan.json" || die "plan/suggest failed"

export ANSIBLE_COLLECTIONS_PATH=$ROOT/ansible ANSIBLE_NOCOLOR=1 ANSIBLE_LOCALHOST_WARNING=False \
	ANSIBLE_INVENTORY_UNPARSED_WARNING=False ANSIBLE_LOCAL_TEMP=$DIR/tmp
play() {
	"$VENV/bin/ansible-playbook" cairn.storage.vsphere_deploy -e "ansible_python_interpreter=$VENV/bin/python" \
		-e "cairn_plugin_url=$URL" -e "cairn_plugin_ca_file=$CERT" -e "cairn_vcenter_user=$VC_USER" \
		-e "cairn_vcenter_password=$VC_PASS" -e cairn_deploy_timeout=600 "$@"
}
say "deploying with the playbook"
play -e "cairn_plan_file=$DIR/plan.json" >"$DIR/deploy1.log" 2>&1 || { tail -20 "$DIR/deploy1.log" >&2; die "the deployment playbook failed"; }
grep -q 'Cairn system lab is deployed' "$DIR/deploy1.log" || die "the playbook did not report the deployment"
grep -q "$VC_PASS" "$DIR/deploy1.log" && die "the vCenter password appears in the playbook output"
say "ok: deployed"
play -e "cairn_plan_file=$DIR/plan.json" >"$DIR/deploy2.log" 2>&1 || { tail -20 "$DIR/deploy2.log" >&2; die "the second (resume) run failed"; }
say "ok: a second run resumes and succeeds"
python3 -c 'import json,sys; p=json.load(open(sys.argv[1])); p["hosts"]=p["hosts"][:1]; json.dump(p, open(sys.argv[2], "w"))' "$DIR/plan.json" "$DIR/bad-plan.json"
if play -e "cairn_plan_file=$DIR/bad-plan.json" >"$DIR/bad.log" 2>&1; then die "a plan without SVMs was accepted"; fi
grep -q 'is not valid: .*MDM members: use 3 or 5' "$DIR/bad.log" || { tail -20 "$DIR/bad.log" >&2; die "the broken plan did not fail with the server's problems"; }
say "ok: a broken plan fails with: $(grep -o 'is not valid: [^"]*' "$DIR/bad.log" | head -1 | cut -c1-200)"
echo "vsphere: 3 passed, 0 failed in $(($(date +%s) - T0)) s"
