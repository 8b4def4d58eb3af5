# lib.sh - shared helpers of the Cairn benchmark harness (sourced by run.sh and
# the target files in targets/; not run on its own).
# shellcheck shell=bash
#
# Process ownership: every process the harness starts is registered with
# own_pid (or, for daemons a hook started, through the hook's stop command with
# on_cleanup); cleanup stops exactly those, by pid, newest first.

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$BENCH_DIR/../.." && pwd)
# free_port, pid_alive, wait_for
# shellcheck source=../lib/common.sh
. "$REPO/tests/lib/common.sh"
PYTHON=${PYTHON:-$(command -v /usr/bin/python3 || command -v python3)}
BENCH_T0=${BENCH_T0:-$(date +%s)}

OWNED_PIDS=()       # "name:pid", started by us, stopped by pid at cleanup
CLEANUP_CMDS=()     # commands run (newest first) at cleanup, e.g. a hook's stop

log() { printf '[bench %4ds] %s\n' $(( $(date +%s) - BENCH_T0 )) "$*"; }
# die MESSAGE: fail the current target (run_target records MESSAGE as the
# reason and goes on with the next target) or, outside a target, the run.
die() {
  printf '[bench] ERROR: %s\n' "$*" >&2
  [ -n "${BENCH_FAIL_FILE:-}" ] && printf '%s\n' "$*" > "$BENCH_FAIL_FILE"
  exit 1
}

own_pid() { OWNED_PIDS+=("$1:$2"); }           # own_pid NAME PID
on_cleanup() { CLEANUP_CMDS+=("$1"); }          # on_cleanup 'command string'

# stop_pids NAME:PID... : TERM, wait up to STOP_WAIT_S (15) s, then KILL what is left.
stop_pids() {
  local e pid alive i
  for e in "$@"; do pid_alive "${e##*:}" && kill -TERM "${e##*:}" 2>/dev/null; done
  for i in $(seq $(( ${STOP_WAIT_S:-15} * 2 ))); do
    alive=0
    for e in "$@"; do pid_alive "${e##*:}" && alive=1; done
    [ $alive = 0 ] && return 0
    sleep 0.5
  done
  for e in "$@"; do
    pid=${e##*:}
    if pid_alive "$pid"; then log "  ${e%%:*} (pid $pid) ignored TERM, killing"; kill -KILL "$pid" 2>/dev/null; fi
  done
  return 0
}

# forget_pids NAME:PID... : drop entries from OWNED_PIDS once stopped.
forget_pids() {
  local keep=() e f drop
  for e in "${OWNED_PIDS[@]}"; do
    drop=0; for f in "$@"; do [ "$e" = "$f" ] && drop=1; done
    [ $drop = 0 ] && keep+=("$e")
  done
  OWNED_PIDS=("${keep[@]}")
}

# stop_owned: run the cleanup commands and stop the owned processes, newest first.
stop_owned() {
  local i
  for (( i=${#CLEANUP_CMDS[@]}-1; i>=0; i-- )); do
    log "cleanup: ${CLEANUP_CMDS[$i]}"
    eval "${CLEANUP_CMDS[$i]}"
  done
  CLEANUP_CMDS=()
  if [ ${#OWNED_PIDS[@]} -gt 0 ]; then
    local rev=()
    for (( i=${#OWNED_PIDS[@]}-1; i>=0; i-- )); do rev+=("${OWNED_PIDS[$i]}"); done
    stop_pids "${rev[@]}"
  fi
  OWNED_PIDS=()
}

# start_target NAME: bench_NAME in a background subshell that owns what it
# starts and stops it on any exit, so one failing target does not lose the
# others' results. Sets TARGET_PID; wait for it with finish_target. (Call it as
# a plain command: inside `if` or `||` bash would ignore errexit in the subshell.)
start_target() {
  local t=$1
  (
    OWNED_PIDS=() CLEANUP_CMDS=()
    BENCH_FAIL_FILE=$BENCH_WORK/failed-$t
    trap 'rc=$?; trap - EXIT; set +e; stop_owned; exit $rc' EXIT
    trap 'exit 143' TERM
    trap 'exit 130' INT
    "bench_${t//-/_}"
  ) &
  TARGET_PID=$!
  own_pid "target-$t" $TARGET_PID
}

# finish_target NAME: wait for it; its exit status, the reason in $BENCH_WORK/failed-NAME.
finish_target() {
  local rc=0
  wait "$TARGET_PID" || rc=$?
  forget_pids "target-$1:$TARGET_PID"
  return $rc
}

cleanup() {
  local rc=$? i
  trap - EXIT INT TERM
  set +e
  # a target's subshell stops its own servers and hooks on TERM: give it time
  STOP_WAIT_S=$(( ${CAIRN_STOP_TIMEOUT:-60} + 30 )) stop_owned
  if [ -n "${BENCH_WORK:-}" ] && [ -d "$BENCH_WORK" ]; then
    if [ $rc = 0 ] && [ "${BENCH_KEEP_WORK:-0}" != 1 ]; then
      rm -rf "$BENCH_WORK"
    else
      # keep logs and hook output for diagnosis, drop the data files
      find "$BENCH_WORK" -type f -size +10M -delete 2>/dev/null
      log "work directory kept for diagnosis (logs, hook output): $BENCH_WORK"
    fi
  fi
  exit $rc
}

# waited NAME COMMAND... : run COMMAND as an owned child and wait for it. Unlike
# a foreground command, `wait` returns as soon as a trapped signal arrives (the
# deadline, Ctrl-C), so cleanup runs at once and stops the child by its pid.
waited() {
  local name=$1 pid rc; shift
  "$@" &
  pid=$!
  own_pid "$name" $pid
  rc=0; wait $pid || rc=$?
  forget_pids "$name:$pid"
  return $rc
}

# run_job TARGET WORKLOAD PIDS [bench.py options...] -- ENGINE ARGS...
run_job() {
  local target=$1 workload=$2 pids=$3; shift 3
  waited bench.py "$PYTHON" "$BENCH_DIR/bench.py" job --fio "${FIO_BIN:-fio}" --out "$BENCH_OUT" \
    --target "$target" --workload "$workload" --runtime "$BENCH_RUNTIME" --ramp "$BENCH_RAMP" --pids "$pids" "$@" \
    || die "$target: job $workload failed (exit status $?): see the error above and $BENCH_OUT/fio/$target/"
}

# prepare TARGET SIZE_MIB PIDS [bench.py options] -- ENGINE ARGS...
# Fill the region, then read it back once; neither is a measurement.
# Why the read: every target's reads must start from its steady state, not
# from whatever of the fill its cache happened to keep. nbdkit-file's fill
# stays in the page cache (it writes through it); Cairn's SDSs write with
# O_DIRECT and keep none of it, so without this read a first QD1 read job
# timed Cairn's disk against nbdkit's RAM (127 against 80 us per read on
# the same cluster, cold and warm). raw uses direct=1 and gains nothing.
prepare() {
  local target=$1 size=$2 pids=$3; shift 3
  log "$target: fill $size MiB, then read it back once (not measured)"
  run_job "$target" fill "$pids" --size-mib "$size" "$@"
  run_job "$target" warm "$pids" --size-mib "$size" "$@"
}

# run_suite TARGET SIZE_MIB PIDS SUITE [bench.py options] -- ENGINE ARGS...
# Fill and read back first (prepare), then every workload of SUITE in
# workloads.conf order.
run_suite() {
  local target=$1 size=$2 pids=$3 suite=$4 w; shift 4
  prepare "$target" "$size" "$pids" "$@"
  for w in $("$PYTHON" "$BENCH_DIR/bench.py" workloads "$suite"); do
    run_job "$target" "$w" "$pids" --size-mib "$size" "$@"
  done
}

# copy_rate DIR MIB [STREAMS]: raw device copy rate on DIR's filesystem, in MB/s
# (10^6 B/s). A source file of MIB MiB is written with fio (incompressible
# data, direct I/O), then copied to a second file with dd, 1 MiB blocks,
# O_DIRECT on both sides, STREAMS parallel streams over disjoint ranges, and
# fdatasync at the end; the time of the copy alone is measured. This is the
# rate a rebuild (which copies 1 MiB chunks device to device) is compared with.
copy_rate() {
  local dir=$1 mib=$2 streams=${3:-4} src dst per t0 t1 i pids=()
  src=$dir/copy-src.$$ dst=$dir/copy-dst.$$
  per=$(( mib / streams ))
  fio --name=copysrc --filename="$src" --size="$(( per * streams ))m" --rw=write --bs=1M \
      --ioengine=psync --direct=1 --output=/dev/null >/dev/null 2>&1 \
    || { rm -f "$src"; echo "copy_rate: fio could not write $src" >&2; return 1; }
  t0=$(date +%s.%N)
  for (( i=0; i<streams; i++ )); do
    timeout 300 dd if="$src" of="$dst" bs=1M count=$per skip=$(( i * per )) seek=$(( i * per )) \
      iflag=direct oflag=direct conv=notrunc status=none &
    pids+=($!)
  done
  local ok=1; for i in "${pids[@]}"; do wait "$i" || ok=0; done
  sync -d "$dst" 2>/dev/null || sync "$dst"
  t1=$(date +%s.%N)
  rm -f "$src" "$dst"
  [ $ok = 1 ] || { echo "copy_rate: dd failed" >&2; return 1; }
  "$PYTHON" -c "import sys; print(round($(( per * streams )) * 1048576 / 1e6 / ($t1 - $t0), 1))"
}

# need TOOL PACKAGE: report a missing tool (preflight); returns 1 if missing.
need() {
  command -v "$1" >/dev/null 2>&1 && return 0
  echo "missing '$1': apt-get install $2"
  return 1
}

# need_fio_engine ENGINE [FIO]: the fio binary must have the engine.
need_fio_engine() {
  local bin=${2:-fio}
  "$bin" --enghelp 2>/dev/null | grep -qw "$1" && return 0
  echo "fio ($bin) has no '$1' engine: apt-get install fio (Debian's has io_uring, nbd and rbd)"
  return 1
}

# run_hook OUTFILE TIMEOUT HOOK ARGS... : run a start hook, its output in OUTFILE.
# Daemons the hook leaves behind must not hold our stdout, hence the file.
run_hook() {
  local out=$1 secs=$2; shift 2
  local rc=0
  waited hook timeout -k 10 "$secs" "$@" >"$out" 2>"$out.err" </dev/null || rc=$?
  if [ $rc != 0 ]; then
    [ $rc = 124 ] && echo "[bench] hook timed out after $secs s: $*" >&2
    echo "[bench] hook output (tail):" >&2; tail -n 5 "$out" "$out.err" 2>/dev/null | sed 's/^/    /' >&2
  fi
  return $rc
}

# Hook output contract (see README.md): lines
#   nbd://...                      the export (cluster.sh)
#   target NAME URI                an export for target NAME (iSCSI hook)
#   pid NAME PID [TARGET]          a server process whose CPU counts (for TARGET only, if given)
# hook_uri FILE [TARGET] ; hook_pids FILE [TARGET]
hook_uri() {
  if [ -z "${2:-}" ]; then grep -m1 -E '^nbd://' "$1" || true
  else awk -v t="$2" '$1=="target" && $2==t {print $3; exit}' "$1"; fi
}
hook_pids() {
  awk -v t="${2:-}" '$1=="pid" && $3 ~ /^[0-9]+$/ && ($4=="" || $4==t) {printf "%s ", $3}' "$1"
}

# pids_by_cmdline DIR: processes whose command line mentions DIR (fallback when
# a hook prints no pid lines); excludes this shell's own pipeline.
pids_by_cmdline() {
  local d=$1 p
  for p in /proc/[0-9]*; do
    p=${p#/proc/}
    [ "$p" = $$ ] && continue
    tr '\0' ' ' < /proc/$p/cmdline 2>/dev/null | grep -qF -- "$d" && printf '%s ' "$p"
  done
  return 0
}

# export_size_mib URI : size of an NBD export in MiB.
export_size_mib() {
  local bytes
  bytes=$(timeout 20 nbdinfo --size "$1") || return 1
  echo $(( bytes / 1048576 ))
}

# forget_cleanup CMD: drop a cleanup command once it has been run.
forget_cleanup() {
  local keep=() c
  for c in "${CLEANUP_CMDS[@]}"; do [ "$c" != "$1" ] && keep+=("$c"); done
  CLEANUP_CMDS=("${keep[@]}")
}
