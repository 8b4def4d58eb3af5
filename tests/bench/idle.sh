#!/usr/bin/env bash
# What an idle cluster costs: CPU and wake-ups of the NBD server and the SDSs
# while nothing does I/O, with the data-path daemons' sysmon kept awake (the
# default, see keepSysmonAwake in appliance/cmd/cairn/main.go) and with Go's
# deep sleep allowed (CAIRN_SYSMON_DEEP_SLEEP=1), on the same small local
# cluster (tests/lib/cluster.sh: 3 SDSs, 2 copies, NBD), alternating, a few
# rounds. Idle is what most of a storage cluster's hours are.
#
#   tests/bench/idle.sh
#
#   IDLE_ROUNDS   rounds, each runs both variants once (default 2)
#   IDLE_SECONDS  seconds measured per variant and round (default 60)
#   IDLE_SETTLE   seconds after start before measuring (default 20)
#   IDLE_OUT      where results.tsv and summary.md go (default: a temp dir, removed)
#
# CPU is utime+stime of /proc/PID/stat, context switches are voluntary +
# involuntary over /proc/PID/task/*/status (sample.sh), summed over the four
# processes. It uses appliance/bin as built (make build). About 6 minutes at
# the defaults; run it alone.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
ROUNDS=${IDLE_ROUNDS:-2}
SECONDS_IDLE=${IDLE_SECONDS:-60}
SETTLE=${IDLE_SETTLE:-20}
HZ=$(getconf CLK_TCK)

die() { echo "idle.sh: $*" >&2; exit 1; }
say() { echo "[$(date +%H:%M:%S)] $*" >&2; }
[ -x "$REPO/appliance/bin/cairn" ] || die "no appliance/bin/cairn: run make build first"

TMP=$(mktemp -d /tmp/cairn-idle.XXXXXX)
OUT=${IDLE_OUT:-$TMP/out}
mkdir -p "$OUT"
running=""
cleanup() {
	trap '' INT TERM
	if [ -n "$running" ]; then "$REPO/tests/lib/cluster.sh" stop "$TMP/state-$running" >/dev/null 2>&1 || true; fi
	rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# shellcheck source=sample.sh
. "$REPO/tests/bench/sample.sh"

printf 'variant\tround\tseconds\tcpu_ms_per_s\tctx_switches_per_s\n' >"$OUT/results.tsv"
for ((r = 1; r <= ROUNDS; r++)); do
	order="awake deep-sleep"
	[ $((r % 2)) = 0 ] && order="deep-sleep awake"
	for v in $order; do
		deep=""
		[ "$v" = deep-sleep ] && deep=1
		running=$v
		CAIRN_SYSMON_DEEP_SLEEP=$deep timeout 180 "$REPO/tests/lib/cluster.sh" start "$TMP/state-$v" \
			--sds 3 --devices-per-sds 1 --device-size 2G --volume-size 1GiB >/dev/null 2>"$TMP/$v.start.err" ||
			die "cluster did not start: $(tail -3 "$TMP/$v.start.err")"
		sleep "$SETTLE"
		mapfile -t pids < <(cat "$TMP/state-$v"/pids/nbd.pid "$TMP/state-$v"/pids/sds*.pid)
		read -r t0 c0 < <(sample "${pids[@]}")
		s0=$(date +%s.%N)
		sleep "$SECONDS_IDLE"
		read -r t1 c1 < <(sample "${pids[@]}")
		s1=$(date +%s.%N)
		python3 -c 'import sys; v, r, t, c, hz, s0, s1 = sys.argv[1:]; s = float(s1) - float(s0); print(f"{v}\t{r}\t{s:.1f}\t{int(t) * 1000 / int(hz) / s:.2f}\t{int(c) / s:.0f}")' \
			"$v" "$r" $((t1 - t0)) $((c1 - c0)) "$HZ" "$s0" "$s1" >>"$OUT/results.tsv"
		say "$v round $r: $(tail -1 "$OUT/results.tsv" | cut -f4,5 | tr '\t' ' ') (CPU ms per s, context switches per s; NBD server + 3 SDSs)"
		"$REPO/tests/lib/cluster.sh" stop "$TMP/state-$v" >/dev/null 2>&1 || true
		running=""
	done
done

python3 - "$OUT/results.tsv" <<'EOF' | tee "$OUT/summary.md"
import csv, sys
from statistics import mean
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
print(f"Idle NBD server + 3 SDSs, {len({r['round'] for r in rows})} rounds (mean; per round in results.tsv)\n")
print("| sysmon | CPU ms per s (all four) | context switches per s |")
print("|---|--:|--:|")
for v in ("deep-sleep", "awake"):
    rs = [r for r in rows if r["variant"] == v]
    print(f"| {v} | {mean(float(r['cpu_ms_per_s']) for r in rs):.2f} | {mean(float(r['ctx_switches_per_s']) for r in rs):.0f} |")
EOF
