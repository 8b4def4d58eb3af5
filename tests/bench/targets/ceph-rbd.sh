# ceph-rbd: the peer. A one-host Ceph 16 cluster from Debian's packages, set up
# and torn down by tests/lib/ceph.sh (1 monitor, 1 manager, 3 BlueStore OSDs on
# zero-filled files, pool "rbd" with size 2 / min_size 1: two copies, like
# Cairn; auth none, msgr2 on 127.0.0.1 only, logging off). The image is read and
# written by fio's rbd engine (librbd, client cache off).
# shellcheck shell=bash

CEPH_PKGS="ceph-mon ceph-osd ceph-mgr ceph-common"

# check_ceph_daemons: what tests/lib/ceph.sh runs (also the iSCSI guest's Ceph peer's).
check_ceph_daemons() {
  local rc=0 t
  for t in ceph-mon ceph-osd ceph-mgr ceph rbd monmaptool; do need $t "$CEPH_PKGS" || rc=1; done
  need uuidgen uuid-runtime || rc=1
  return $rc
}

check_ceph_rbd() {
  local rc=0
  check_ceph_daemons || rc=1
  need_fio_engine rbd || rc=1
  return $rc
}

bench_ceph_rbd() {
  local c=$BENCH_WORK/ceph out=$BENCH_WORK/ceph.start.out pids="" n p
  on_cleanup "'$REPO/tests/lib/ceph.sh' stop '$c'"
  CEPH_IMAGE_MIB=$BENCH_SIZE_MIB CEPH_OSD_MIB=$CEPH_OSD_MIB CEPH_OSD_MEMORY_MIB=$CEPH_OSD_MEMORY_MIB \
    "$REPO/tests/lib/ceph.sh" start "$c" >"$out" || die "ceph: tests/lib/ceph.sh start failed: see its messages above"
  while read -r n p; do pids="$pids $p"; done < <(sed -n 's/^pid //p' "$out")
  export CEPH_CONF; CEPH_CONF=$(sed -n 's/^conf //p' "$out")
  log "ceph-rbd: up (mon, mgr, 3 OSDs:$pids)"
  run_suite ceph-rbd "$BENCH_SIZE_MIB" "$pids" "$BENCH_SUITE" -- \
    --ioengine=rbd --clientname=admin --pool=rbd --rbdname=bench
  "$REPO/tests/lib/ceph.sh" stop "$c"
  forget_cleanup "'$REPO/tests/lib/ceph.sh' stop '$c'"
  unset CEPH_CONF
}
