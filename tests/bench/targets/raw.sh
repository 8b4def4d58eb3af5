# raw: the physical limit. fio io_uring with direct=1 on a backing file in the
# benchmark work directory (the filesystem every other target's files live on).
# No server: CPU per I/O is fio's alone.

check_raw() {
  need_fio_engine io_uring
}

bench_raw() {
  local f=$BENCH_WORK/raw.img
  run_suite raw "$BENCH_SIZE_MIB" "" "$BENCH_SUITE" -- --ioengine=io_uring --direct=1 --filename="$f"
  # The raw copy rate (for the rebuild ratio, issue 3), measured in the same run.
  if [ "$BENCH_MODE" = full ]; then
    local mbps
    log "raw: device copy rate ($BENCH_COPY_MIB MiB, dd O_DIRECT, 4 streams)"
    mbps=$(copy_rate "$BENCH_WORK" "$BENCH_COPY_MIB" 4) || die "raw copy rate failed (see above)"
    log "  raw copy rate: $mbps MB/s"
    echo "$mbps" > "$BENCH_WORK/raw-copy-mbps"   # for the failure figures (another subshell)
    "$PYTHON" "$BENCH_DIR/bench.py" add-record "$BENCH_OUT" \
      "{\"target\":\"raw\",\"workload\":\"copy-1m\",\"mbps\":$mbps,\"size_mib\":$BENCH_COPY_MIB,\"streams\":4}"
  fi
  rm -f "$f"
}
