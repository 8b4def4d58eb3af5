#!/usr/bin/env bash
# The site playbook's cluster configuration (playbooks/tasks/configure.yml) against real
# daemons on this machine, without guests: an MDM, a gateway and three SDSs on loopback
# addresses 127.77.0.11-13 (the playbook's fixed ports 7100/8443), the inventory the site
# playbook would get, the configuration run twice (the second changes nothing), then the
# volume it created served over NBD (nbdinfo, nbdcopy write + read back). The qemu test
# (run.sh) covers the roles that install the daemons.
#
# Env: CAIRN_BIN (daemons and cairnctl, default appliance/bin).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
BIN=${CAIRN_BIN:-$ROOT/appliance/bin}
VENV=$ROOT/.venv
die() { echo "configure-local: $*" >&2; exit 1; }
say() { echo "[$(date +%H:%M:%S)] $*"; }
[ -x "$BIN/cairn" ] && [ -x "$BIN/cairnctl" ] || die "no cairn/cairnctl in $BIN: run make build"
[ -x "$VENV/bin/ansible-playbook" ] || die "no ansible-playbook in $VENV: run scripts/pydeps.sh"
T0=$(date +%s)
D=$(mktemp -d /tmp/cairn-configure-local.XXXXXX)
pids=()
cleanup() {
	local rc=$? p
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	[ $rc = 0 ] && rm -rf "$D"
	[ $rc = 0 ] || echo "configure-local: FAILED (logs in $D)" >&2
}
trap cleanup EXIT
wait_port() { for _ in $(seq 1 300); do (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null && return 0; sleep 0.1; done; die "nothing listens on $1:$2 (logs in $D)"; }
A=127.77.0
export CAIRN_MDM=http://$A.11:2379
"$BIN/cairn" mdm --name node1 --data-dir "$D/mdm" --client-url "http://$A.11:2379" --peer-url "http://$A.11:2380" >"$D/mdm.log" 2>&1 &
pids+=($!)
wait_port $A.11 2379
"$BIN/cairn" gateway --listen "$A.11:8443" --state-dir "$D/gateway" >"$D/gateway.log" 2>&1 &
pids+=($!)
for n in 1 2 3; do
	"$BIN/cairn" sds --name "node$n" --listen "$A.1$n:7100" --state-dir "$D/sds$n" >"$D/sds$n.log" 2>&1 &
	pids+=($!)
	truncate -s 4G "$D/node$n-data1.img"
done
wait_port $A.11 8443
for _ in $(seq 1 100); do [ -s "$D/gateway/admin-password" ] && break; sleep 0.1; done

cat >"$D/inventory.yml" <<YAML
all:
  vars:
    ansible_connection: local
    ansible_python_interpreter: $VENV/bin/python
    cairn_system_name: configure-local
    cairn_gateway_state_dir: $D/gateway
    cairn_volumes: [{name: vol1, size_gb: 1, hosts: [node1]}]
  hosts:
    node1: {cairn_address: $A.11, cairn_sds_devices: [{path: $D/node1-data1.img}]}
    node2: {cairn_address: $A.12, cairn_sds_devices: [{path: $D/node2-data1.img}]}
    node3: {cairn_address: $A.13, cairn_sds_devices: [{path: $D/node3-data1.img}]}
  children:
    cairn_mdm: {hosts: {node1: {}}}
    cairn_sds: {hosts: {node1: {}, node2: {}, node3: {}}}
    cairn_gateway: {hosts: {node1: {}}}
    cairn_nbd: {hosts: {node1: {}}}
YAML
cat >"$D/configure.yml" <<YAML
- name: Cluster configuration, as in the site playbook
  hosts: "{{ groups['cairn_gateway'][0] }}"
  gather_facts: false
  tasks:
    - name: Configure
      ansible.builtin.include_tasks: $ROOT/ansible/ansible_collections/cairn/storage/playbooks/tasks/configure.yml
YAML
export PATH=$BIN:$PATH CAIRNCTL_CONFIG=$D/cairnctl.json ANSIBLE_COLLECTIONS_PATH=$ROOT/ansible ANSIBLE_NOCOLOR=1 \
	ANSIBLE_LOCALHOST_WARNING=False ANSIBLE_LOCAL_TEMP=$D/tmp
for run in first second; do
	"$VENV/bin/ansible-playbook" -i "$D/inventory.yml" "$D/configure.yml" >"$D/$run.log" 2>&1 ||
		{ grep -E 'fatal|FAILED|msg' "$D/$run.log" | tail -10 >&2; die "configuration ($run run) failed"; }
	say "$run run: $(sed -n 's/^node1 *: //p' "$D/$run.log")"
done
grep -q '^node1 .*changed=0 ' "$D/second.log" || die "the second run changed something (see $D/second.log)"
"$BIN/cairnctl" system info >/dev/null
"$BIN/cairn" nbd --host node1 --listen "$A.11:10809" --tls off --allow-plain-loopback >"$D/nbd.log" 2>&1 &
pids+=($!)
wait_port $A.11 10809
URI=nbd://$A.11:10809/vol1
[ "$(nbdinfo --size "$URI")" = 1073741824 ] || die "vol1 over NBD is not 1 GiB"
head -c 4194304 /dev/urandom >"$D/pattern"
nbdcopy "$D/pattern" "$URI"
got=$({ nbdcopy "$URI" - 2>/dev/null || true; } | head -c 4194304 | sha256sum)
[ "$got" = "$(sha256sum <"$D/pattern")" ] || die "vol1 does not read back what was written over NBD"
say "vol1 (made by the configuration) serves 1 GiB over NBD; written data reads back"
echo "configure-local: 3 passed, 0 failed in $(($(date +%s) - T0)) s"
