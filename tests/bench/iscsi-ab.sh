#!/usr/bin/env bash
# Same-guest A/B of two `cairn target` settings: one guest, one host cluster,
# two targets exporting the same volume (tests/lio/bench-hook.sh with
# BENCH_TARGET_B_FLAGS), the bench's own iSCSI jobs (workloads.conf, bench.py
# job) run through each in turn, the order alternating every round. Whole runs
# of `BENCH_TARGETS=iscsi run.sh` differ by more between guests than a target
# setting moves (docs/benchmarks.md, "iSCSI: one doorbell per burst"); within
# one guest both see the same vCPU, the same relays and the same SDSs.
#
#   tests/bench/iscsi-ab.sh "FLAGS"     A: the target as the bench runs it;
#                                       B: the same with FLAGS added
#   e.g. tests/bench/iscsi-ab.sh "--conns-per-sds 1"
#
# Env: AB_ROUNDS (3), AB_RUNTIME (8 s), AB_RAMP (2 s), AB_JOBS (the iscsi suite
# of workloads.conf), AB_OUT (results; default a temp dir, kept: the path is
# printed). Prints, per job, B / A of the mean IOPS and of the CPU per I/O
# (qemu, the host's SDSs and MDMs, the relays), and each round's IOPS. Heavy
# (a TCG guest): about 15 minutes at the defaults; nothing else should run.
set -euo pipefail
# BENCH_DIR, REPO, PYTHON, log, die, waited, run_hook, hook_uri, hook_pids, stop_owned
# shellcheck source=lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# lio_relay_pids
# shellcheck source=../lio/lib.sh
. "$REPO/tests/lio/lib.sh"
[ $# = 1 ] || { echo "usage: tests/bench/iscsi-ab.sh \"FLAGS\" (the second target's extra flags)" >&2; exit 2; }
FLAGS_B=$1
ROUNDS=${AB_ROUNDS:-3}
BENCH_RUNTIME=${AB_RUNTIME:-8}
BENCH_RAMP=${AB_RAMP:-2}
SIZE_MIB=256
OUT=${AB_OUT:-$(mktemp -d /tmp/cairn-iscsi-ab.XXXXXX)}
BENCH_OUT=$OUT
mkdir -p "$OUT"
HOOK=$REPO/tests/lio/bench-hook.sh
FIO=${FIO_LIBISCSI:-${CAIRN_CACHE:-$HOME/.cache/cairn}/bench/fio-libiscsi/fio}
if ! [ -x "$FIO" ]; then
  log "building fio with the libiscsi engine (once, cached in $(dirname "$FIO"))"
  "$BENCH_DIR/build-fio-libiscsi.sh" "$(dirname "$FIO")" || die "building fio with libiscsi failed"
fi
JOBS=${AB_JOBS:-$("$PYTHON" "$BENCH_DIR/bench.py" workloads iscsi)}
STATE=$OUT/iscsi
trap 'stop_owned; "$HOOK" stop "$STATE" >/dev/null 2>&1 || true' EXIT
trap 'exit 130' INT TERM

log "A/B in one guest: B = the target with '$FLAGS_B'; results in $OUT"
BENCH_TARGET_B_FLAGS=$FLAGS_B CAIRN_BENCH_VOLUME_MIB=$SIZE_MIB LIO_HOOK_TIMEOUT=280 \
  run_hook "$STATE.hook.out" 300 "$HOOK" start "$STATE" || die "the hook did not start: see $STATE.hook.out.err"
A=$(hook_uri "$STATE.hook.out" cairn-iscsi)
B=$(hook_uri "$STATE.hook.out" cairn-iscsi-b)
[ -n "$A" ] && [ -n "$B" ] || die "the hook printed no cairn-iscsi and cairn-iscsi-b URLs: see $STATE.hook.out"
# The servers: qemu and the cluster, as the hook lists them, and every relay
# of the cluster's ports once B has opened its connections too (fill below).
server_pids() {
  local pids
  pids="$(hook_pids "$STATE.hook.out" cairn-iscsi) $(lio_relay_pids $(sed -n 's/^\(MDM1_CLIENT\|SDS[0-9]*_PORT\)=//p' "$STATE/cluster/ports.env"))"
  echo "$pids" | tr ' ' '\n' | sort -un | tr '\n' ' '
}
job() { # job TARGET URL WORKLOAD [bench.py options]
  local t=$1 url=$2 w=$3; shift 3
  FIO_BIN=$FIO run_job "$t" "$w" "$(server_pids)" --size-mib "$SIZE_MIB" "$@" -- \
    --ioengine=libiscsi --filename="${url//:/\\:}"
}
# One volume behind both: fill it once, read it back through each (the SDSs'
# read cache is shared; each target's connections open here).
job cairn-iscsi "$A" fill
job cairn-iscsi "$A" warm
job cairn-iscsi-b "$B" warm
for ((r = 1; r <= ROUNDS; r++)); do
  for w in $JOBS; do
    if [ $((r % 2)) = 1 ]; then order="A B"; else order="B A"; fi
    for v in $order; do
      if [ "$v" = A ]; then job cairn-iscsi "$A" "$w" --round "$r"; else job cairn-iscsi-b "$B" "$w" --round "$r"; fi
    done
  done
done

"$PYTHON" - "$OUT/records.jsonl" "$FLAGS_B" <<'EOF'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
recs = [r for r in recs if r.get("kind") == "measurement" and r.get("round")]
by = {}
for r in recs:
    w = r["workload"].rsplit("-r", 1)[0]
    by.setdefault(w, {}).setdefault(r["target"], []).append(r)
mean = lambda xs: sum(xs) / len(xs)
print(f"\nB = the target with '{sys.argv[2]}', A = without; same guest, rounds alternating")
print(f"{'job':28s} {'A IOPS by round':26s} {'B IOPS by round':26s} {'B/A IOPS':>8s} {'B/A CPU/IO':>10s}")
for w, t in by.items():
    a, b = t.get("cairn-iscsi", []), t.get("cairn-iscsi-b", [])
    if not a or not b:
        continue
    ia, ib = [x["iops"] for x in a], [x["iops"] for x in b]
    ca, cb = mean([x["cpu_us_per_io"] for x in a]), mean([x["cpu_us_per_io"] for x in b])
    print(f"{w:28s} {' '.join(f'{x:7.0f}' for x in ia):26s} {' '.join(f'{x:7.0f}' for x in ib):26s} "
          f"{mean(ib) / mean(ia):8.2f} {cb / ca:10.2f}")
EOF
log "records: $OUT/records.jsonl (fio output under $OUT/fio)"
