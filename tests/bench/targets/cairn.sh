# cairn-nbd: a local Cairn cluster (3 SDSs, 2 copies) over NBD, fio's nbd engine;
# the scaling run (1..4 SDSs, same total devices); the data-path security modes
# (security); the failure figures (issue 3).
#
# The cluster is started by a hook the lead owns, so the harness does not know
# how Cairn is started (contract in README.md):
#   $CAIRN_CLUSTER_HOOK start STATEDIR [--sds N]
#       starts the cluster with N SDSs (default 3) and the same total number of
#       devices whatever N, creates a volume of at least $CAIRN_BENCH_VOLUME_MIB
#       MiB, prints its URI on a line starting with nbd://, and one line
#       "pid NAME PID" per Cairn process (mdm, sds, nbd, ...), then returns
#       with the daemons running.
#       With CAIRN_COLOCATE=1 in its environment (target cairn-colocated) the
#       NBD server runs in the process of an SDS (cairn colocate).
#       The scaling run passes --sds N --devices-per-sds (BENCH_SCALING_DEVICES/N)
#       so that the total number of devices stays the same.
#       Without pid lines, STATEDIR/pids/*.pid files are used if present.
#   $CAIRN_CLUSTER_HOOK stop STATEDIR     stops them all; idempotent.
#   $CAIRN_FAILURE_HOOK STATEDIR RAW_COPY_MBPS
#       measures the failure figures and prints one JSON record per line:
#       {"target":"cairn","workload":"failure-detection","seconds":S}
#       {"target":"cairn","workload":"failure-io-pause","seconds":S}
#       {"target":"cairn","workload":"rebuild","mbps":M}      (ratio_to_raw is added here)
#       {"target":"cairn","workload":"maintenance-resync","bytes":B,"sds_bytes":T}

CAIRN_CLUSTER_HOOK=${CAIRN_CLUSTER_HOOK:-$REPO/tests/lib/cluster.sh}
CAIRN_FAILURE_HOOK=${CAIRN_FAILURE_HOOK:-$REPO/tests/chaos/bench-figures.sh}

check_cairn_nbd() {
  local rc=0
  [ -x "$CAIRN_CLUSTER_HOOK" ] || { echo "no executable cluster hook $CAIRN_CLUSTER_HOOK (set CAIRN_CLUSTER_HOOK; contract in tests/bench/README.md)"; rc=1; }
  need nbdinfo libnbd-bin || rc=1
  need_fio_engine nbd || rc=1
  return $rc
}
check_cairn_colocated() { check_cairn_nbd; }
check_scaling() { check_cairn_nbd; }
check_security() { check_cairn_nbd; }
check_failure() {
  [ -x "$CAIRN_FAILURE_HOOK" ] && return 0
  echo "no executable failure hook $CAIRN_FAILURE_HOOK (set CAIRN_FAILURE_HOOK; contract in tests/bench/README.md)"
  return 1
}

# cairn_start STATEDIR [--sds N]: sets CAIRN_URI, CAIRN_PIDS, CAIRN_SIZE_MIB.
cairn_start() {
  local state=$1; shift
  mkdir -p "$state"
  on_cleanup "cairn_stop '$state'"
  log "cairn: $CAIRN_CLUSTER_HOOK start $state $*"
  CAIRN_BENCH_VOLUME_MIB=$BENCH_SIZE_MIB run_hook "$state.hook.out" "$CAIRN_START_TIMEOUT" \
    "$CAIRN_CLUSTER_HOOK" start "$state" "$@" \
    || die "cluster hook start failed (rc=$?): see $state.hook.out and $state.hook.out.err"
  CAIRN_URI=$(hook_uri "$state.hook.out")
  [ -n "$CAIRN_URI" ] || die "cluster hook printed no nbd:// line: see $state.hook.out"
  # Cairn's processes, for CPU accounting: the hook's pid lines, else the pid
  # files it keeps in STATEDIR/pids/, else whatever names STATEDIR on its
  # command line (which may miss a daemon, hence the warning).
  CAIRN_PIDS=$(hook_pids "$state.hook.out")
  if [ -z "$CAIRN_PIDS" ] && compgen -G "$state/pids/*.pid" >/dev/null; then
    CAIRN_PIDS=$(cat "$state"/pids/*.pid | tr '\n' ' ')
  fi
  if [ -z "$CAIRN_PIDS" ]; then
    CAIRN_PIDS=$(pids_by_cmdline "$state")
    log "  warning: the hook printed no 'pid NAME PID' lines and left no $state/pids/*.pid; using processes whose command line names $state: $CAIRN_PIDS"
  fi
  [ -n "$CAIRN_PIDS" ] || die "no Cairn process found for CPU accounting: make the hook print 'pid NAME PID' lines"
  echo "$CAIRN_PIDS" > "$state.pids"
  CAIRN_SIZE_MIB=$(export_size_mib "$CAIRN_URI") || die "nbdinfo cannot read $CAIRN_URI"
  if [ "$CAIRN_SIZE_MIB" -lt "$BENCH_SIZE_MIB" ]; then
    log "  warning: volume is $CAIRN_SIZE_MIB MiB, smaller than the $BENCH_SIZE_MIB MiB region of the other targets"
  else
    CAIRN_SIZE_MIB=$BENCH_SIZE_MIB
  fi
  log "  cairn up: $CAIRN_URI, processes:$CAIRN_PIDS"
}

# cairn_stop STATEDIR: the hook's stop, then KILL whatever it left running of
# the processes it reported (they were started on our behalf).
cairn_stop() {
  local state=$1 p left=()
  forget_cleanup "cairn_stop '$state'"
  timeout -k 10 "$CAIRN_STOP_TIMEOUT" "$CAIRN_CLUSTER_HOOK" stop "$state" >"$state.stop.out" 2>&1 \
    || log "  warning: cluster hook stop failed: see $state.stop.out"
  if [ -f "$state.pids" ]; then
    for p in $(cat "$state.pids"); do left+=(cairn:$p); done
    [ ${#left[@]} -gt 0 ] && stop_pids "${left[@]}"
  fi
  return 0
}

bench_cairn_nbd() {
  local state=$BENCH_WORK/cairn
  cairn_start "$state"
  run_suite cairn-nbd "$CAIRN_SIZE_MIB" "$CAIRN_PIDS" "$BENCH_SUITE" -- --ioengine=nbd --uri="$CAIRN_URI"
  cairn_stop "$state"
}

# cairn-colocated: the same cluster with its NBD server inside sds1's process
# (the hook is started with CAIRN_COLOCATE=1: cairn colocate sds ... -- nbd ...),
# so the requests for the chunks sds1 is primary of take no network hop. The
# jobs of the issue-18 goals against nbdkit-file (suite "colocated").
bench_cairn_colocated() {
  local state=$BENCH_WORK/cairn-colocated
  CAIRN_COLOCATE=1 cairn_start "$state"
  run_suite cairn-colocated "$CAIRN_SIZE_MIB" "$CAIRN_PIDS" colocated -- --ioengine=nbd --uri="$CAIRN_URI"
  cairn_stop "$state"
}

# The data-path security modes (issue 19), each on a fresh cluster whose
# daemons all take it from $CAIRN_DATA_SECURITY: BENCH_SECURITY_ROUNDS rounds
# (default 3), the order rotated every round (none authenticated secure, then
# authenticated secure none, ...) so that over 3 rounds each mode runs once
# in each position and a machine that drifts during the run favours none;
# bench.py averages the rounds and sets each mode's CPU per I/O against none's.
# rotated ROUND WORD...: the words in ROUND's order, round 1 as given, each
# later round starting one word further (wrapping): the rounds of the
# security and scaling runs.
rotated() {
  local round=$1 i k
  shift
  for (( i = 0; i < $#; i++ )); do
    k=$(( (round - 1 + i) % $# + 1 ))
    echo "${!k}"
  done
}

bench_security() {
  local round mode state w
  for (( round = 1; round <= ${BENCH_SECURITY_ROUNDS:-3}; round++ )); do
    for mode in $(rotated "$round" none authenticated secure); do
      state=$BENCH_WORK/cairn-$mode-r$round
      CAIRN_DATA_SECURITY=$mode cairn_start "$state"
      prepare "cairn-nbd-$mode" "$CAIRN_SIZE_MIB" "$CAIRN_PIDS" --round "$round" -- --ioengine=nbd --uri="$CAIRN_URI"
      for w in $("$PYTHON" "$BENCH_DIR/bench.py" workloads security); do
        run_job "cairn-nbd-$mode" "$w" "$CAIRN_PIDS" --size-mib "$CAIRN_SIZE_MIB" --round "$round" -- --ioengine=nbd --uri="$CAIRN_URI"
      done
      cairn_stop "$state"
    done
  done
}

# The scaling run: BENCH_SCALING_ROUNDS rounds (default 3; 1 runs each count
# once, without round numbers), each SDS count on a fresh cluster, the order
# of the counts rotated every round (2 3 4, then 3 4 2, ...) as the security
# run does. One cluster per count was not enough: fresh clusters of one build
# differ by more than the goal's 20 % (the max/min CPU per write went from
# 1.21 to 1.45 between two runs of one build), so bench.py sets the counts'
# means over the rounds against each other.
bench_scaling() {
  local round n state w suffix rounds=${BENCH_SCALING_ROUNDS:-3}
  local -a rargs=()
  for (( round = 1; round <= rounds; round++ )); do
    suffix=
    if [ "$rounds" -gt 1 ]; then rargs=(--round "$round"); suffix=-r$round; fi
    # shellcheck disable=SC2086 # the counts are words on purpose
    for n in $(rotated "$round" $BENCH_SCALING_SDS); do
      state=$BENCH_WORK/cairn-sds$n$suffix
      if [ -n "$BENCH_SCALING_DEVICES" ]; then
        cairn_start "$state" --sds "$n" --devices-per-sds $(( BENCH_SCALING_DEVICES / n ))
      else
        cairn_start "$state" --sds "$n"
      fi
      prepare cairn-nbd "$CAIRN_SIZE_MIB" "$CAIRN_PIDS" --sds "$n" "${rargs[@]}" -- --ioengine=nbd --uri="$CAIRN_URI"
      for w in $("$PYTHON" "$BENCH_DIR/bench.py" workloads scaling); do
        run_job cairn-nbd "$w" "$CAIRN_PIDS" --size-mib "$CAIRN_SIZE_MIB" --sds "$n" "${rargs[@]}" -- --ioengine=nbd --uri="$CAIRN_URI"
      done
      cairn_stop "$state"
    done
  done
}

bench_failure() {
  local state=$BENCH_WORK/failure line n=0
  mkdir -p "$state"
  RAW_COPY_MBPS=$(cat "$BENCH_WORK/raw-copy-mbps" 2>/dev/null || true)
  if [ -z "$RAW_COPY_MBPS" ]; then   # raw not in this run: the rebuild still needs its reference
    log "failure: raw device copy rate ($BENCH_COPY_MIB MiB, dd O_DIRECT, 4 streams)"
    RAW_COPY_MBPS=$(copy_rate "$BENCH_WORK" "$BENCH_COPY_MIB" 4) || die "raw copy rate failed (see above)"
    "$PYTHON" "$BENCH_DIR/bench.py" add-record "$BENCH_OUT" \
      "{\"target\":\"raw\",\"workload\":\"copy-1m\",\"mbps\":$RAW_COPY_MBPS,\"size_mib\":$BENCH_COPY_MIB,\"streams\":4}"
  fi
  log "failure figures: $CAIRN_FAILURE_HOOK $state ${RAW_COPY_MBPS:-0}"
  run_hook "$state.out" "$CAIRN_FAILURE_TIMEOUT" "$CAIRN_FAILURE_HOOK" "$state" "${RAW_COPY_MBPS:-0}" \
    || die "failure hook failed (rc=$?): see $state.out and $state.out.err"
  while IFS= read -r line; do
    case $line in
      '{'*) "$PYTHON" "$BENCH_DIR/bench.py" add-record "$BENCH_OUT" "$line"; n=$((n + 1)); log "  $line" ;;
    esac
  done < "$state.out"
  [ $n -gt 0 ] || die "failure hook printed no JSON record: see $state.out"
}
