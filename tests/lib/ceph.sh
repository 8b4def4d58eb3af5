#!/bin/bash
# ceph.sh start|stop DIR - a one-host Ceph 16 cluster from Debian's packages,
# for the benchmarks: the ceph-rbd target (tests/bench/targets/ceph-rbd.sh) and
# the iSCSI guest's networked TCMU peer (tests/lio/bench-hook.sh, BENCH_RBD_PEER).
#
# start: 1 monitor, 1 manager, 3 BlueStore OSDs on zero-filled files, pool
# "rbd" with size 2 / min_size 1 (two copies, like Cairn), CRUSH failure
# domain = OSD (one host), 32 PGs, auth none, msgr2 on CEPH_ADDR only, logging
# off; an image rbd/bench of CEPH_IMAGE_MIB MiB; waits until every PG is
# active+clean. No systemd, no cephadm: each daemon runs in the foreground in a
# session of its own (common.sh's spawn), pid in DIR/pids. Prints
#   conf DIR/ceph.conf
#   pid NAME PID        (ceph-mon, ceph-mgr, ceph-osd.0 ... 2)
# On failure it says why (the logs are in DIR/log), stops what it started and
# exits non-zero.
# stop: stops the daemons by their recorded pids (newest first, as the
# monitor must outlive its OSDs to hear them go) and removes DIR; idempotent.
#
# Why zero-filled OSD files: BlueStore on a sparse file turns every first 4k
# allocation into a filesystem extent allocation plus a journal commit at the
# next fdatasync, which is a property of the test set-up, not of Ceph.
#
# Env: CEPH_IMAGE_MIB (required for start), CEPH_ADDR (127.0.0.1: every daemon
# binds and advertises it; a client reaches the cluster only at that address),
# CEPH_NETNS (unset: the current network namespace; else daemons and CLI run in
# that namespace, which must hold CEPH_ADDR), CEPH_OSD_MIB (3072),
# CEPH_OSD_MEMORY_MIB (1024), CEPH_PORT_MIN/MAX (16800/17300: the daemons'
# ports; the monitor's is picked free below them when CEPH_NETNS is unset,
# else it is 3300, msgr2's own, in a namespace of its own).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# free_port, spawn, stop_pidfiles, wait_for, pid_alive
# shellcheck source=common.sh
. "$HERE/common.sh"
PYTHON=${PYTHON:-$(command -v /usr/bin/python3 || command -v python3)}
cmd=${1:-} C=${2:-}
[ -n "$cmd" ] && [ -n "$C" ] || { echo "usage: ceph.sh start|stop DIR" >&2; exit 2; }
ADDR=${CEPH_ADDR:-127.0.0.1}
NS=${CEPH_NETNS:-}
OSD_MIB=${CEPH_OSD_MIB:-3072}
DAEMONS="ceph-osd.2 ceph-osd.1 ceph-osd.0 ceph-mgr ceph-mon"   # stop order
log() { echo "[ceph $(date +%H:%M:%S)] $*" >&2; }

# in_ns CMD...: CMD in the cluster's network namespace.
in_ns() { if [ -n "$NS" ]; then ip netns exec "$NS" "$@"; else "$@"; fi; }
# ceph_cmd ARGS...: the ceph CLI, bounded (a CLI with no monitor waits forever).
ceph_cmd() { CEPH_CONF=$C/ceph.conf in_ns timeout -k 5 30 ceph --connect-timeout 10 "$@"; }

all_osds_up() {
  [ "$(ceph_cmd osd stat -f json | "$PYTHON" -c 'import json,sys; print(json.load(sys.stdin)["num_up_osds"])')" = 3 ]
}

pgs_clean() {
  ceph_cmd pg stat -f json | "$PYTHON" -c '
import json, sys
d = json.load(sys.stdin)["pg_summary"]
s = {x["name"]: x["num"] for x in d["num_pg_by_state"]}
sys.exit(0 if d["num_pgs"] and s.get("active+clean") == d["num_pgs"] else 1)'
}

# run_daemon NAME CMD...: spawn a daemon (in the namespace), its output in
# DIR/logs/NAME.log.
run_daemon() {
  local name=$1; shift
  if [ -n "$NS" ]; then spawn --netns "$NS" "$C" "$name" env CEPH_CONF="$C/ceph.conf" "$@"
  else CEPH_CONF=$C/ceph.conf spawn "$C" "$name" "$@"; fi
}

# stop [keep-logs]: the daemons, then DIR (with keep-logs only the OSDs' files).
stop() {
  local d files=()
  for d in $DAEMONS; do files+=("$C/pids/$d.pid"); done
  if [ -d "$C/pids" ]; then stop_pidfiles 15 "${files[@]}"; fi
  if [ "${1:-}" = keep-logs ]; then rm -rf "$C/osd" "$C/pids"; else rm -rf "$C"; fi
}

# setup ARGS...: one setup command of the ceph CLI, its output kept.
setup() { ceph_cmd "$@" >>"$C/log/setup.out" 2>&1 || { log "ceph $* failed: see $C/log/setup.out"; return 1; }; }

start() {
  [ -n "${CEPH_IMAGE_MIB:-}" ] || { log "CEPH_IMAGE_MIB (the image's size) is not set"; exit 2; }
  local t
  for t in ceph-mon ceph-osd ceph-mgr ceph rbd monmaptool uuidgen; do
    command -v $t >/dev/null || { log "no $t: install Debian's ceph-mon ceph-osd ceph-mgr ceph-common uuid-runtime (scripts/deps.sh bench)"; exit 1; }
  done
  [ ! -d "$C/pids" ] || { log "$C holds a cluster already: ceph.sh stop $C first"; exit 1; }
  trap 'rc=$?; if [ $rc != 0 ]; then log "start failed (rc=$rc): stopping what it started; logs in $C/log, $C/logs"; stop keep-logs; fi' EXIT
  mkdir -p "$C"/{run,log,logs,pids,mon,mgr/ceph-x,osd}
  local fsid monport i uuid
  fsid=$(uuidgen)
  if [ -n "$NS" ]; then monport=3300; else monport=$(free_port); fi
  cat > "$C/ceph.conf" <<EOF
[global]
fsid = $fsid
mon_host = v2:$ADDR:$monport
public_addr = $ADDR
ms_bind_ipv4 = true
ms_bind_ipv6 = false
ms_bind_port_min = ${CEPH_PORT_MIN:-16800}
ms_bind_port_max = ${CEPH_PORT_MAX:-17300}
auth_cluster_required = none
auth_service_required = none
auth_client_required = none
run_dir = $C/run
admin_socket = $C/run/\$cluster-\$name.asok
log_file = $C/log/\$cluster-\$name.log
pid_file = $C/run/\$name.pid
mon_data = $C/mon/\$cluster-\$id
mgr_data = $C/mgr/\$cluster-\$id
osd_data = $C/osd/\$cluster-\$id
osd_pool_default_size = 2
osd_pool_default_min_size = 1
osd_crush_chooseleaf_type = 0
mon_allow_pool_delete = true
mon_warn_on_pool_no_redundancy = false
debug_ms = 0/0
debug_osd = 0/0
debug_bluestore = 0/0
debug_bluefs = 0/0
debug_bdev = 0/0
debug_rocksdb = 0/0
debug_objecter = 0/0
debug_rados = 0/0
debug_rbd = 0/0
debug_monc = 0/0
debug_mon = 0/0
debug_paxos = 0/0
debug_auth = 0/0
debug_mgr = 0/0
debug_mgrc = 0/0
[osd]
osd_objectstore = bluestore
bluestore_block_create = true
bluestore_block_size = $(( OSD_MIB * 1048576 ))
# the virtual disk reports rotational; the storage under it is flash
bluestore_debug_enforce_settings = ssd
osd_memory_target = $(( ${CEPH_OSD_MEMORY_MIB:-1024} * 1048576 ))
[client]
rbd_cache = false
EOF
  log "monitor on $ADDR:$monport${NS:+ (namespace $NS)}, state in $C"
  monmaptool --create --fsid "$fsid" --addv a "[v2:$ADDR:$monport]" "$C/monmap" >/dev/null
  CEPH_CONF=$C/ceph.conf in_ns timeout 60 ceph-mon --mkfs -i a --monmap "$C/monmap" >"$C/log/mon.mkfs" 2>&1 \
    || { log "ceph-mon --mkfs failed: see $C/log/mon.mkfs"; exit 1; }
  run_daemon ceph-mon ceph-mon -f -i a
  wait_for 60 ceph_cmd -s || { log "the monitor did not answer in 60 s: see $C/logs/ceph-mon.log"; exit 1; }
  run_daemon ceph-mgr ceph-mgr -f -i x
  for i in 0 1 2; do
    uuid=$(uuidgen)
    setup osd new "$uuid" $i
    mkdir -p "$C/osd/ceph-$i"
    dd if=/dev/zero of="$C/osd/ceph-$i/block" bs=1M count="$OSD_MIB" oflag=direct status=none
    CEPH_CONF=$C/ceph.conf in_ns timeout 120 ceph-osd -i $i --mkfs --osd-uuid "$uuid" >"$C/log/osd.$i.mkfs" 2>&1 \
      || { log "ceph-osd --mkfs $i failed: see $C/log/osd.$i.mkfs"; exit 1; }
    run_daemon ceph-osd.$i ceph-osd -f -i $i
  done
  wait_for 120 all_osds_up || { log "the OSDs were not up in 120 s: see $C/logs/"; exit 1; }
  setup osd pool create rbd 32 32 replicated
  setup osd pool set rbd size 2
  setup osd pool set rbd min_size 1
  setup osd pool set rbd pg_autoscale_mode off
  setup osd pool application enable rbd rbd
  CEPH_CONF=$C/ceph.conf in_ns timeout 60 rbd pool init rbd >>"$C/log/setup.out" 2>&1 || { log "rbd pool init failed: see $C/log/setup.out"; exit 1; }
  CEPH_CONF=$C/ceph.conf in_ns timeout 60 rbd create --size "${CEPH_IMAGE_MIB}M" rbd/bench >>"$C/log/setup.out" 2>&1 \
    || { log "rbd create failed: see $C/log/setup.out"; exit 1; }
  wait_for 120 pgs_clean || { log "the PGs were not active+clean in 120 s: ceph -s says: $(ceph_cmd -s 2>&1)"; exit 1; }
  echo "conf $C/ceph.conf"
  local d
  for d in ceph-mon ceph-mgr ceph-osd.0 ceph-osd.1 ceph-osd.2; do echo "pid $d $(cat "$C/pids/$d.pid")"; done
  trap - EXIT
}

case $cmd in
  start) start ;;
  stop) stop ;;
  *) echo "unknown command $cmd (start, stop)" >&2; exit 2 ;;
esac
