# ceph-rbd: the peer. A one-host Ceph 16 cluster from Debian's packages, set up
# and torn down here: 1 monitor, 1 manager, 3 BlueStore OSDs on zero-filled
# files, pool "rbd" with size 2 / min_size 1 (two copies, like Cairn), CRUSH
# failure domain = OSD (one host), auth none, msgr2 on 127.0.0.1 only, logging
# off. The image is read and written by fio's rbd engine (librbd, client cache
# off). No systemd, no cephadm: daemons run in the foreground as our children.
#
# Why zero-filled OSD files: BlueStore on a sparse file turns every first 4k
# allocation into a filesystem extent allocation plus a journal commit at the
# next fdatasync, which is a property of the test set-up, not of Ceph.
# shellcheck shell=bash

CEPH_PKGS="ceph-mon ceph-osd ceph-mgr ceph-common"

check_ceph_rbd() {
  local rc=0 t
  for t in ceph-mon ceph-osd ceph-mgr; do need $t "$CEPH_PKGS" || rc=1; done
  for t in ceph rbd monmaptool; do need $t "$CEPH_PKGS" || rc=1; done
  need uuidgen uuid-runtime || rc=1
  need_fio_engine rbd || rc=1
  return $rc
}

# ceph_cmd ARGS...: the ceph CLI, bounded (a CLI with no monitor waits forever).
ceph_cmd() { timeout -k 5 30 ceph --connect-timeout 10 "$@"; }

ceph_all_osds_up() {
  [ "$(ceph_cmd osd stat -f json | "$PYTHON" -c 'import json,sys; print(json.load(sys.stdin)["num_up_osds"])')" = 3 ]
}

ceph_pgs_clean() {
  ceph_cmd pg stat -f json | "$PYTHON" -c '
import json, sys
d = json.load(sys.stdin)["pg_summary"]
s = {x["name"]: x["num"] for x in d["num_pg_by_state"]}
sys.exit(0 if d["num_pgs"] and s.get("active+clean") == d["num_pgs"] else 1)'
}

bench_ceph_rbd() {
  local c=$BENCH_WORK/ceph fsid monport i uuid pid pids="" entries=()
  mkdir -p "$c"/{run,log,mon,mgr,osd}
  export CEPH_CONF=$c/ceph.conf
  fsid=$(uuidgen); monport=$(free_port)
  cat > "$CEPH_CONF" <<EOF
[global]
fsid = $fsid
mon_host = v2:127.0.0.1:$monport
public_addr = 127.0.0.1
ms_bind_ipv4 = true
ms_bind_ipv6 = false
ms_bind_port_min = ${CEPH_PORT_MIN:-16800}
ms_bind_port_max = ${CEPH_PORT_MAX:-17300}
auth_cluster_required = none
auth_service_required = none
auth_client_required = none
run_dir = $c/run
admin_socket = $c/run/\$cluster-\$name.asok
log_file = $c/log/\$cluster-\$name.log
pid_file = $c/run/\$name.pid
mon_data = $c/mon/\$cluster-\$id
mgr_data = $c/mgr/\$cluster-\$id
osd_data = $c/osd/\$cluster-\$id
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
bluestore_block_size = $(( CEPH_OSD_MIB * 1048576 ))
# the virtual disk reports rotational; the storage under it is flash
bluestore_debug_enforce_settings = ssd
osd_memory_target = $(( CEPH_OSD_MEMORY_MIB * 1048576 ))
[client]
rbd_cache = false
EOF
  log "ceph-rbd: monitor on 127.0.0.1:$monport, state in $c"
  monmaptool --create --fsid "$fsid" --addv a "[v2:127.0.0.1:$monport]" "$c/monmap" >/dev/null
  timeout 60 ceph-mon --mkfs -i a --monmap "$c/monmap" >"$c/log/mon.mkfs" 2>&1 \
    || die "ceph-mon --mkfs failed: see $c/log/mon.mkfs"
  ceph-mon -f -i a >"$c/log/mon.out" 2>&1 &
  pid=$!; own_pid ceph-mon $pid; entries+=("ceph-mon:$pid"); pids="$pids $pid"
  wait_for 60 ceph_cmd -s || die "ceph monitor did not answer in 60 s: see $c/log/"
  mkdir -p "$c/mgr/ceph-x"
  ceph-mgr -f -i x >"$c/log/mgr.out" 2>&1 &
  pid=$!; own_pid ceph-mgr $pid; entries+=("ceph-mgr:$pid"); pids="$pids $pid"
  for i in 0 1 2; do
    uuid=$(uuidgen)
    ceph_cmd osd new "$uuid" $i >/dev/null || die "ceph osd new $i failed"
    mkdir -p "$c/osd/ceph-$i"
    dd if=/dev/zero of="$c/osd/ceph-$i/block" bs=1M count="$CEPH_OSD_MIB" oflag=direct status=none
    timeout 120 ceph-osd -i $i --mkfs --osd-uuid "$uuid" >"$c/log/osd.$i.mkfs" 2>&1 \
      || die "ceph-osd --mkfs $i failed: see $c/log/osd.$i.mkfs"
    ceph-osd -f -i $i >"$c/log/osd.$i.out" 2>&1 &
    pid=$!; own_pid ceph-osd.$i $pid; entries+=("ceph-osd.$i:$pid"); pids="$pids $pid"
  done
  wait_for 120 ceph_all_osds_up || die "ceph OSDs not up in 120 s: see $c/log/"
  ceph_cmd osd pool create rbd 32 32 replicated >>"$c/log/setup.out" 2>&1 || die "ceph: osd pool create rbd 32 32 replicated failed: see $c/log/setup.out"
  ceph_cmd osd pool set rbd size 2 >>"$c/log/setup.out" 2>&1 || die "ceph: osd pool set rbd size 2 failed: see $c/log/setup.out"
  ceph_cmd osd pool set rbd min_size 1 >>"$c/log/setup.out" 2>&1 || die "ceph: osd pool set rbd min_size 1 failed: see $c/log/setup.out"
  ceph_cmd osd pool set rbd pg_autoscale_mode off >>"$c/log/setup.out" 2>&1 || die "ceph: osd pool set rbd pg_autoscale_mode off failed: see $c/log/setup.out"
  ceph_cmd osd pool application enable rbd rbd >>"$c/log/setup.out" 2>&1 || die "ceph: osd pool application enable rbd rbd failed: see $c/log/setup.out"
  timeout 60 rbd pool init rbd || die "rbd pool init failed"
  timeout 60 rbd create --size "${BENCH_SIZE_MIB}M" rbd/bench || die "rbd create failed"
  wait_for 120 ceph_pgs_clean || die "ceph PGs not active+clean in 120 s: ceph -s says: $(ceph_cmd -s)"
  log "ceph-rbd: up (mon, mgr, 3 OSDs:$pids)"
  run_suite ceph-rbd "$BENCH_SIZE_MIB" "$pids" "$BENCH_SUITE" -- \
    --ioengine=rbd --clientname=admin --pool=rbd --rbdname=bench
  local rev=() k
  for (( k=${#entries[@]}-1; k>=0; k-- )); do rev+=("${entries[$k]}"); done
  stop_pids "${rev[@]}"; forget_pids "${entries[@]}"
  rm -rf "$c"
  unset CEPH_CONF
}
