# lio-fileio, tcmu-runner and cairn-iscsi: LIO in a qemu guest (TCG: KVM does
# not work on these machines), reached through a port forwarded to 127.0.0.1,
# measured with fio's libiscsi engine (Debian's fio lacks it:
# build-fio-libiscsi.sh). The three LUNs live in the same guest in the same run;
# under TCG absolute numbers are low and the ratios are what counts:
# cairn-iscsi / tcmu-runner (same TCMU ring, same vCPU: Cairn's own cost) and
# cairn-iscsi / lio-fileio (LIO's in-kernel backstore).
#
# Hook (owned by the LIO helper, contract in README.md):
#   $CAIRN_ISCSI_HOOK start STATEDIR
#       boots the guest, exports a LIO fileio LUN, a tcmu-runner LUN and a
#       Cairn LUN of at least $CAIRN_BENCH_VOLUME_MIB MiB each and prints:
#         target lio-fileio iscsi://127.0.0.1:PORT/IQN/LUN
#         target tcmu-runner iscsi://127.0.0.1:PORT/IQN/LUN
#         target cairn-iscsi iscsi://127.0.0.1:PORT/IQN/LUN
#         target tcmu-rbd iscsi://127.0.0.1:PORT/IQN/LUN   (optional: tcmu-runner's
#                                  rbd handler on a Ceph peer, BENCH_RBD_PEER=1)
#         pid NAME PID [TARGET]   (qemu, and Cairn's host processes if any;
#                                  with TARGET the pid counts for that target only)
#   $CAIRN_ISCSI_HOOK stop STATEDIR       idempotent

CAIRN_ISCSI_HOOK=${CAIRN_ISCSI_HOOK:-$REPO/tests/lio/bench-hook.sh}
FIO_LIBISCSI=${FIO_LIBISCSI:-${CAIRN_CACHE:-$HOME/.cache/cairn}/bench/fio-libiscsi/fio}

check_iscsi() {
  [ -x "$CAIRN_ISCSI_HOOK" ] || {
    echo "no executable iSCSI hook $CAIRN_ISCSI_HOOK (set CAIRN_ISCSI_HOOK; contract in tests/bench/README.md)"
    return 1
  }
  # the default hook's Ceph peer (tcmu-rbd) runs Ceph's daemons on the host
  [ "${BENCH_RBD_PEER:-0}" != 1 ] || check_ceph_daemons
}

# ensure_fio_libiscsi: build fio with the libiscsi engine into the cache once.
ensure_fio_libiscsi() {
  [ -x "$FIO_LIBISCSI" ] && need_fio_engine libiscsi "$FIO_LIBISCSI" >/dev/null && return 0
  log "building fio with the libiscsi engine (about a minute; once, cached in $(dirname "$FIO_LIBISCSI"))"
  "$BENCH_DIR/build-fio-libiscsi.sh" "$(dirname "$FIO_LIBISCSI")" \
    || die "building fio with libiscsi failed; run tests/bench/build-fio-libiscsi.sh by hand to see why"
}

iscsi_stop() {
  local state=$1
  forget_cleanup "iscsi_stop '$state'"
  timeout -k 10 "$CAIRN_STOP_TIMEOUT" "$CAIRN_ISCSI_HOOK" stop "$state" >"$state.stop.out" 2>&1 \
    || log "  warning: iSCSI hook stop failed: see $state.stop.out"
  local p left=()
  for p in $(hook_pids "$state.hook.out"); do left+=(iscsi:$p); done
  [ ${#left[@]} -gt 0 ] && stop_pids "${left[@]}"
  return 0
}

bench_iscsi() {
  local state=$BENCH_WORK/iscsi t uri pids
  ensure_fio_libiscsi
  mkdir -p "$state"
  on_cleanup "iscsi_stop '$state'"
  log "iscsi: $CAIRN_ISCSI_HOOK start $state"
  # the hook's Ceph peer (BENCH_RBD_PEER=1) takes up to two minutes more to start
  CAIRN_BENCH_VOLUME_MIB=$BENCH_ISCSI_SIZE_MIB run_hook "$state.hook.out" \
    $(( CAIRN_START_TIMEOUT + ( ${BENCH_RBD_PEER:-0} == 1 ? 120 : 0 ) )) \
    "$CAIRN_ISCSI_HOOK" start "$state" \
    || die "iSCSI hook start failed (rc=$?): see $state.hook.out and $state.hook.out.err"
  for t in lio-fileio tcmu-runner tcmu-rbd cairn-iscsi; do
    uri=$(hook_uri "$state.hook.out" $t)
    # tcmu-rbd: only with the hook's Ceph peer (BENCH_RBD_PEER=1)
    [ -n "$uri" ] || [ $t = tcmu-rbd ] || die "iSCSI hook printed no 'target $t iscsi://...' line: see $state.hook.out"
    [ -n "$uri" ] || continue
    pids=$(hook_pids "$state.hook.out" $t)
    log "$t: $uri (server processes: $pids)"
    # fio splits filenames at ':'; escape them.
    FIO_BIN=$FIO_LIBISCSI run_suite $t "$BENCH_ISCSI_SIZE_MIB" "$pids" iscsi -- \
      --ioengine=libiscsi --filename="${uri//:/\\:}"
  done
  iscsi_stop "$state"
}
