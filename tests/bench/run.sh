#!/bin/bash
# run.sh full|smoke - Cairn's benchmark against its peers, in one run.
#
#   tests/bench/run.sh full     # `make bench`: every target, < 40 min
#   tests/bench/run.sh smoke    # `make bench-smoke`: raw, nbdkit-file, cairn-nbd,
#                               #   4k randread/randwrite at QD 1 and 32, < 3 min
#   tests/bench/run.sh copy-rate DIR [MIB]   # print the raw copy rate (MB/s) of DIR's filesystem
#
# Results (benchmarks.md, benchmarks.json, PNG plots) go to tests/bench/out/MODE/,
# and to docs/ only with --docs or BENCH_WRITE_DOCS=1, so that tests and
# development runs never overwrite the committed figures. Knobs (environment):
#   BENCH_TARGETS      space/comma separated subset of:
#                      raw nbdkit-file ceph-rbd cairn-nbd cairn-colocated scaling security iscsi failure
#   BENCH_RUNTIME / BENCH_RAMP   measured seconds / warm-up seconds per job
#   BENCH_SIZE_MIB     region every target is filled and tested over
#   BENCH_ALLOW_MISSING=1        skip (and say so in the report) targets whose
#                      tools or hooks are missing, instead of failing
#   BENCH_NICE         renice the run (servers included), e.g. -19 on a shared machine
#   BENCH_SCALING_SDS ("2 3 4"), BENCH_SCALING_DEVICES (12), BENCH_SCALING_ROUNDS (3):
#                      the scaling run (each count once per round, order rotated)
#   BENCH_SECURITY_ROUNDS (3): rounds of the security run (each mode once per round, order rotated)
#   BENCH_DOCS_PREFIX  file names under docs/ (benchmarks; benchmarks-smoke for smoke)
#   CAIRN_CLUSTER_HOOK, CAIRN_ISCSI_HOOK, CAIRN_FAILURE_HOOK   see README.md
set -euo pipefail

usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 2; }
MODE=${1:-}; shift || true

. "$(dirname "$0")/lib.sh"

if [ "$MODE" = copy-rate ]; then
  dir=${1:?usage: run.sh copy-rate DIR [MIB]}; mib=${2:-1024}
  copy_rate "$dir" "$mib" 4
  exit $?
fi

WRITE_DOCS=${BENCH_WRITE_DOCS:-0}
for a in "$@"; do
  case $a in
    --docs) WRITE_DOCS=1 ;;
    *) usage ;;
  esac
done

case $MODE in
  full)
    DEF_TARGETS="raw nbdkit-file ceph-rbd cairn-nbd cairn-colocated scaling security iscsi failure"
    DEF_RUNTIME=8 DEF_RAMP=2 DEF_SIZE=1024 DEF_DEADLINE=2400 ;;
  smoke)
    DEF_TARGETS="raw nbdkit-file cairn-nbd"
    DEF_RUNTIME=5 DEF_RAMP=2 DEF_SIZE=256 DEF_DEADLINE=300 ;;
  *) usage ;;
esac
BENCH_MODE=$MODE
BENCH_SUITE=$MODE
BENCH_TARGETS=$(echo "${BENCH_TARGETS:-$DEF_TARGETS}" | tr ',' ' ')
BENCH_RUNTIME=${BENCH_RUNTIME:-$DEF_RUNTIME}
BENCH_RAMP=${BENCH_RAMP:-$DEF_RAMP}
BENCH_SIZE_MIB=${BENCH_SIZE_MIB:-$DEF_SIZE}
BENCH_ISCSI_SIZE_MIB=${BENCH_ISCSI_SIZE_MIB:-256}
# The iSCSI guest (tests/lio/bench-hook.sh): a full run as root with ip and nft
# gives it a tap NIC into its cluster's namespace (BENCH_GUEST_NET=tap) and,
# over it, the networked TCMU peer tcmu-rbd (BENCH_RBD_PEER=1: tcmu-runner's
# rbd handler on a Ceph cluster beside Cairn's); else qemu's user net and no
# such peer. Either can be set by hand; meta.json records both.
if [ "$MODE" = full ] && [ "$(id -u)" = 0 ] && command -v ip >/dev/null && command -v nft >/dev/null; then
  export BENCH_GUEST_NET=${BENCH_GUEST_NET:-tap}
fi
if [ "${BENCH_GUEST_NET:-slirp}" = tap ]; then export BENCH_RBD_PEER=${BENCH_RBD_PEER:-1}; fi
BENCH_COPY_MIB=${BENCH_COPY_MIB:-1024}
# Two copies on two different SDSs: a pool of one SDS is refused, so the
# scaling run starts at 2. 12 devices in all (6, 4, 3 per SDS).
BENCH_SCALING_SDS=${BENCH_SCALING_SDS:-2 3 4}
BENCH_SCALING_DEVICES=${BENCH_SCALING_DEVICES-12}
BENCH_DEADLINE=${BENCH_DEADLINE:-$DEF_DEADLINE}
CEPH_OSD_MIB=${CEPH_OSD_MIB:-$(( BENCH_SIZE_MIB * 2 > 3072 ? BENCH_SIZE_MIB * 2 : 3072 ))}
CEPH_OSD_MEMORY_MIB=${CEPH_OSD_MEMORY_MIB:-1024}
CAIRN_START_TIMEOUT=${CAIRN_START_TIMEOUT:-180}
CAIRN_STOP_TIMEOUT=${CAIRN_STOP_TIMEOUT:-60}
CAIRN_FAILURE_TIMEOUT=${CAIRN_FAILURE_TIMEOUT:-300}
NBDKIT_FILE_ARGS=${NBDKIT_FILE_ARGS:-}
BENCH_OUT=${BENCH_OUT:-$BENCH_DIR/out/$MODE}
DOCS_DIR=${BENCH_DOCS_DIR:-$REPO/docs}
# A smoke run never overwrites the full run's docs/benchmarks.*.
DOCS_PREFIX=${BENCH_DOCS_PREFIX:-$([ "$MODE" = full ] && echo benchmarks || echo benchmarks-smoke)}
export CAIRN_BENCH_MODE=$MODE   # hooks may size themselves by it

for f in "$BENCH_DIR"/targets/*.sh; do . "$f"; done

# ---- preflight: every tool of every selected target, before starting anything
SKIPPED=()
SELECTED=()
problems=0
check_tool_basics() {
  local rc=0
  need fio fio || rc=1
  need gnuplot gnuplot-nox || rc=1
  need timeout coreutils || rc=1
  [ -x "$PYTHON" ] || { echo "missing python3: apt-get install python3"; rc=1; }
  return $rc
}
if ! msg=$(check_tool_basics); then
  die "$msg"
fi
for t in $BENCH_TARGETS; do
  fn=check_${t//-/_}
  declare -F "$fn" >/dev/null || die "unknown target '$t' in BENCH_TARGETS (known: raw nbdkit-file ceph-rbd cairn-nbd cairn-colocated scaling security iscsi failure)"
  if msg=$($fn 2>&1); then
    SELECTED+=("$t")
  elif [ "${BENCH_ALLOW_MISSING:-0}" = 1 ]; then
    log "skipping $t: $(echo "$msg" | tr '\n' ' ')"
    SKIPPED+=("$t=$(echo "$msg" | tr '\n' ' ' | sed 's/ *$//')")
  else
    echo "[bench] target $t cannot run:" >&2; echo "$msg" | sed 's/^/    /' >&2
    problems=1
  fi
done
[ $problems = 0 ] || die "fix the above, or leave those targets out (BENCH_TARGETS=...), or set BENCH_ALLOW_MISSING=1 to skip them and say so in the report"
[ ${#SELECTED[@]} -gt 0 ] || die "nothing to measure"

# ---- work directory, ownership of everything we start, deadline
BENCH_WORK=$(mktemp -d "${BENCH_WORKDIR:-${TMPDIR:-/tmp}}/cairn-bench.XXXXXX")
trap cleanup EXIT
trap 'log "interrupted"; exit 130' INT
trap 'log "terminated (deadline of $BENCH_DEADLINE s reached, or killed)"; exit 143' TERM
( for (( i=0; i<BENCH_DEADLINE; i++ )); do sleep 1; done; kill -TERM $$ 2>/dev/null ) &
own_pid deadline-watchdog $!
if [ -n "${BENCH_NICE:-}" ]; then renice -n "$BENCH_NICE" -p $$ >/dev/null || die "renice $BENCH_NICE failed (needs root for negative values)"; fi

# Refuse to wipe a directory that is not a previous output of this harness.
if [ -d "$BENCH_OUT" ] && [ -n "$(ls -A "$BENCH_OUT")" ] && [ ! -f "$BENCH_OUT/meta.json" ]; then
  die "BENCH_OUT=$BENCH_OUT is not empty and holds no previous benchmark output (meta.json): choose another directory"
fi
rm -rf "$BENCH_OUT"; mkdir -p "$BENCH_OUT"
log "mode $MODE: targets ${SELECTED[*]}; ${BENCH_RAMP} s warm-up + ${BENCH_RUNTIME} s per job; region $BENCH_SIZE_MIB MiB; work dir $BENCH_WORK; results $BENCH_OUT"
[ ${#SKIPPED[@]} -gt 0 ] && log "skipped: ${SKIPPED[*]}"

skipped_json=$(printf '%s\n' "${SKIPPED[@]}" | "$PYTHON" -c '
import json, sys
print(json.dumps(dict(l.rstrip("\n").split("=", 1) for l in sys.stdin if "=" in l)))')
"$PYTHON" - "$BENCH_OUT/meta.json" <<EOF
import json, sys
sys.path.insert(0, "$BENCH_DIR")
import bench
json.dump({
  "mode": "$MODE",
  "date": "$(date -u +%Y-%m-%dT%H:%M:%SZ)",
  "size_mib": $BENCH_SIZE_MIB, "runtime_s": $BENCH_RUNTIME, "ramp_s": $BENCH_RAMP,
  "iscsi_size_mib": $BENCH_ISCSI_SIZE_MIB,
  "targets": "${SELECTED[*]}",
  "skipped": $skipped_json,
  "workdir_fs": "$(df -T "$BENCH_WORK" | awk 'NR==2{print $1" ("$2")"}')",
  "nice": "$(ps -o ni= -p $$ | tr -d ' ')",
  "loadavg_start": "$(cut -d' ' -f1-3 /proc/loadavg)",
  "cairn_git": "$(git -C "$REPO" describe --always --dirty 2>/dev/null)",
  "nbdkit_args": "default cache = page cache, default threads${NBDKIT_FILE_ARGS:+, extra arguments: $NBDKIT_FILE_ARGS}",
  "ceph_desc": "Ceph from Debian's packages, 1 mon + 1 mgr + 3 BlueStore OSDs on zero-filled ${CEPH_OSD_MIB} MiB files, osd_memory_target ${CEPH_OSD_MEMORY_MIB} MiB, pool size 2 / min_size 1, 32 PGs, auth none, client rbd_cache off, fio rbd engine",
  "cairn_desc": "a 3-SDS local Cairn cluster, 2 copies, started by ${CAIRN_CLUSTER_HOOK#$REPO/}",
  "iscsi_net": "${BENCH_GUEST_NET:-slirp}",
  "iscsi_rbd_peer": "${BENCH_RBD_PEER:-0}",
  "cpu_idle": bench.cpu_idle(),  # at the start: it can be changed at run time, so the report does not fill it in later
}, open(sys.argv[1], "w"), indent=1)
EOF

FAILED=()
for t in "${SELECTED[@]}"; do
  log "=== $t"
  start_target "$t"
  rc=0; finish_target "$t" || rc=$?
  if [ $rc != 0 ]; then
    why=$(cat "$BENCH_WORK/failed-$t" 2>/dev/null || echo "exit status $rc (see the log above)")
    log "$t FAILED: $why"
    FAILED+=("$t=$why")
  fi
done
printf '%s\n' "${FAILED[@]}" | "$PYTHON" -c '
import json, sys
path = sys.argv[1]
meta = json.load(open(path))
meta["failed"] = dict(l.rstrip("\n").split("=", 1) for l in sys.stdin if "=" in l)
meta["loadavg_end"] = " ".join(open("/proc/loadavg").read().split()[:3])
json.dump(meta, open(path, "w"), indent=1)' "$BENCH_OUT/meta.json"

log "=== report"
"$PYTHON" "$BENCH_DIR/bench.py" report "$BENCH_OUT" "$BENCH_OUT"
if [ "$WRITE_DOCS" = 1 ]; then
  "$PYTHON" "$BENCH_DIR/bench.py" report --prefix "$DOCS_PREFIX" "$BENCH_OUT" "$DOCS_DIR"
fi
if [ ${#FAILED[@]} -gt 0 ]; then
  log "done in $(( $(date +%s) - BENCH_T0 )) s with FAILED targets: ${FAILED[*]%%=*}; report: $BENCH_OUT/benchmarks.md"
  exit 1
fi
log "done in $(( $(date +%s) - BENCH_T0 )) s: $BENCH_OUT/benchmarks.md"
