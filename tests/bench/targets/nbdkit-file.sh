# nbdkit-file: the protocol ceiling. nbdkit's file plugin serving a file on the
# same filesystem over NBD on 127.0.0.1, fio's nbd engine (libnbd). The file
# plugin uses the page cache (its default; nbdkit 1.32 has no O_DIRECT mode):
# the ceiling of what an NBD server on this machine can answer.
# shellcheck shell=bash

check_nbdkit_file() {
  local rc=0
  need nbdkit nbdkit || rc=1
  need nbdinfo libnbd-bin || rc=1
  need_fio_engine nbd || rc=1
  return $rc
}

bench_nbdkit_file() {
  local f=$BENCH_WORK/nbdkit.img port pid uri
  truncate -s "${BENCH_SIZE_MIB}M" "$f"
  port=$(free_port)
  # -f: stay in the foreground so $! is nbdkit itself; --exit-with-parent as a
  # second safety net if this shell dies without running its trap.
  nbdkit -f --exit-with-parent -i 127.0.0.1 -p "$port" $NBDKIT_FILE_ARGS file file="$f" \
    >"$BENCH_WORK/nbdkit.log" 2>&1 &
  pid=$!; own_pid nbdkit $pid
  uri=nbd://127.0.0.1:$port/
  wait_for 15 nbdinfo --size "$uri" || die "nbdkit did not come up on $uri: see $BENCH_WORK/nbdkit.log"
  log "nbdkit-file: nbdkit pid $pid on $uri"
  run_suite nbdkit-file "$BENCH_SIZE_MIB" "$pid" "$BENCH_SUITE" -- --ioengine=nbd --uri="$uri"
  stop_pids nbdkit:$pid; forget_pids nbdkit:$pid
  rm -f "$f"
}
