#!/usr/bin/env bash
# Why CPU per I/O grows with the number of SDSs in `make bench`'s scaling
# run (issue 18): the same 12 devices on 2, 3 and 4 SDSs, 4k random reads
# and writes at QD 32 (the bench's figure) and at QD 16 per SDS (32, 48,
# 64: every SDS sees the same queue depth), with the servers' CPU and
# context switches per I/O from /proc. The volume is read once before the
# jobs, so every job finds the SDSs' read cache warm.
#
#   tests/bench/scaling-qd.sh [RUNTIME_S]     (default 8; about 4 minutes)
#
# Uses appliance/bin (make build) unless CAIRN_BIN is set. Heavy: run it
# alone (flock /tmp/cairn-heavy.lock on a shared machine).
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
RUNTIME=${1:-8}
BIN=${CAIRN_BIN:-$REPO/appliance/bin}
HZ=$(getconf CLK_TCK)
die() { echo "scaling-qd.sh: $*" >&2; exit 1; }
command -v fio >/dev/null || die "fio missing (apt-get install fio)"
[ -x "$BIN/cairn" ] || die "no cairn binaries in $BIN: run make build (or set CAIRN_BIN)"
[ "$RUNTIME" -ge 2 ] 2>/dev/null || die "RUNTIME_S must be a number of seconds, at least 2"

TMP=$(mktemp -d /tmp/cairn-scaling.XXXXXX)
state=""
cleanup() {
	trap '' INT TERM
	[ -z "$state" ] || CAIRN_BIN=$BIN timeout 60 "$REPO/tests/lib/cluster.sh" stop "$state" >/dev/null 2>&1 || true
	rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# shellcheck source=sample.sh
. "$REPO/tests/bench/sample.sh"

echo "| SDSs | job | queue depth | per SDS | IOPS | server CPU µs / I/O | context switches / I/O |"
echo "|--:|---|--:|--:|--:|--:|--:|"
for n in 2 3 4; do
	state=$TMP/state-$n
	URI=$(CAIRN_BIN=$BIN timeout 180 "$REPO/tests/lib/cluster.sh" start "$state" --sds "$n" --devices-per-sds $((12 / n)) \
		--device-size 2G --volume-size 1GiB 2>"$TMP/start.err" | grep '^nbd://') ||
		die "cluster of $n SDSs did not start: $(tail -5 "$TMP/start.err")"
	fio --name=fill --ioengine=nbd --uri="$URI" --size=1g --rw=write --bs=1M --iodepth=8 >/dev/null 2>&1 ||
		die "fio could not fill the volume"
	mapfile -t pids < <(cat "$state"/pids/nbd.pid "$state"/pids/sds*.pid) # the servers: NBD server, SDSs
	# Read it once: the SDSs' read cache (the page cache) is warm for every
	# job, not only for the ones that run later.
	fio --name=warm --ioengine=nbd --uri="$URI" --size=1g --rw=read --bs=1M --iodepth=8 >/dev/null 2>&1 ||
		die "fio could not read the volume"
	for rw in randread randwrite; do
		qds=32
		[ $((16 * n)) = 32 ] || qds="32 $((16 * n))"
		for qd in $qds; do
			read -r t0 c0 < <(sample "${pids[@]}")
			out=$(fio --name=s --ioengine=nbd --uri="$URI" --size=1g --rw=$rw --bs=4k --iodepth="$qd" --norandommap=1 \
				--time_based=1 --runtime="$RUNTIME" --output-format=json 2>/dev/null) || die "fio failed ($rw QD $qd)"
			read -r t1 c1 < <(sample "${pids[@]}")
			python3 - "$out" "$n" "$rw" "$qd" $((t1 - t0)) $((c1 - c0)) "$HZ" <<'EOF'
import json, sys
text, n, rw, qd, ticks, cs, hz = sys.argv[1:]
text = text[text.index("\n{") + 1:] if not text.startswith("{") else text  # fio may print a note first
job = json.loads(text)["jobs"][0]["read" if rw == "randread" else "write"]
ios = job["total_ios"]
print(f"| {n} | {rw} 4k | {qd} | {int(qd) / int(n):.1f} | {job['iops']:,.0f} | {int(ticks) * 1e6 / int(hz) / ios:.1f} | {int(cs) / ios:.2f} |")
EOF
		done
	done
	CAIRN_BIN=$BIN timeout 60 "$REPO/tests/lib/cluster.sh" stop "$state" >/dev/null 2>&1 || true
	state=""
done
