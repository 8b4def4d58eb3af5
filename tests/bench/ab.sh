#!/usr/bin/env bash
# A/B of the data path: the base commit's cairn against the current tree's,
# on the same small local cluster (tests/lib/cluster.sh: 3 SDSs, 2 copies,
# NBD), the same bounded fio jobs, the two binaries alternating, a few rounds.
# It prints, per job, current / base ratios of IOPS, mean latency, server CPU
# per I/O and context switches per I/O, each from rounds of the same run: the
# only figures worth comparing on a shared, loaded machine.
#
#   tests/bench/ab.sh [BASE_REF [CURRENT_REF]]
#
# BASE_REF defaults to the merge-base with main; CURRENT_REF to the working
# tree as it is when the script starts (a ref lets a queued run compare two
# commits while the tree keeps changing).
#
#   AB_ROUNDS   rounds, each runs base and current once (default 2; the order
#               alternates so that neither always runs first)
#   AB_RUNTIME  seconds per fio job (default 8)
#   AB_JOBS     fio jobs, names from workloads.conf
#               (default: randwrite-4k-qd1 randwrite-4k-qd32 randread-4k-qd1)
#   AB_OUT      where results.tsv and the summary go (default: a temp dir, removed)
#   AB_ENV_BASE, AB_ENV_CURRENT
#               VAR=value words for that variant's cluster.sh, e.g. to compare
#               two layouts of one build: AB_ENV_CURRENT=CAIRN_COLOCATE=1
#               tests/bench/ab.sh HEAD
#
# Server = the NBD server and the SDSs (not the MDMs or the gateway). CPU is
# utime+stime of /proc/PID/stat; context switches are voluntary+involuntary
# summed over /proc/PID/task/*/status; both taken just before and just after
# fio, divided by fio's I/O count. System calls per I/O come from
# `perf stat -e raw_syscalls:sys_enter` on the same processes over the same
# window, where perf may trace them (root, or perf_event_paranoid <= 1);
# otherwise "-". Before each job, bench.py's wake_probe times a round trip
# between two processes on the two CPUs: the machine's price of a wake-up,
# which moves with the host and the hour; when the variants' means differ,
# the machine changed between them, not only the build. Heavy: run it under
# `flock /tmp/cairn-heavy.lock` on a shared machine. About 4 minutes at the
# defaults.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BASE=${1:-$(git -C "$REPO" merge-base HEAD main)}
CURRENT=${2:-}
ROUNDS=${AB_ROUNDS:-2}
RUNTIME=${AB_RUNTIME:-8}
JOBS=${AB_JOBS:-randwrite-4k-qd1 randwrite-4k-qd32 randread-4k-qd1}
SIZE_MIB=256
HZ=$(getconf CLK_TCK)

die() { echo "ab.sh: $*" >&2; exit 1; }
say() { echo "[$(date +%H:%M:%S)] $*" >&2; }
command -v fio >/dev/null || die "fio missing (apt-get install fio)"

TMP=$(mktemp -d /tmp/cairn-ab.XXXXXX)
OUT=${AB_OUT:-$TMP/out}
mkdir -p "$OUT"
running=""
cleanup() {
	trap '' INT TERM # a second signal must not leave the cluster or the temp dir behind
	if [ -n "$running" ]; then CAIRN_BIN=$TMP/$running "$REPO/tests/lib/cluster.sh" stop "$TMP/state-$running" >/dev/null 2>&1 || true; fi
	# Device images are sparse but large: never leave them behind.
	rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

build() { # build NAME SRCDIR
	mkdir -p "$TMP/$1"
	(cd "$2/appliance" && go build -o "$TMP/$1/" ./cmd/cairn ./cmd/cairnctl) || die "build of $1 failed"
}
say "building base $(git -C "$REPO" rev-parse --short "$BASE") and ${CURRENT:-the working tree}"
for v in base current; do
	ref=$BASE
	[ $v = current ] && ref=$CURRENT
	if [ -z "$ref" ]; then build current "$REPO"; continue; fi
	mkdir -p "$TMP/src-$v"
	git -C "$REPO" archive "$ref" appliance | tar -x -C "$TMP/src-$v"
	build $v "$TMP/src-$v"
done

# shellcheck source=sample.sh
. "$REPO/tests/bench/sample.sh"
for j in $JOBS; do [ -n "$(job_args "$j")" ] || die "no job $j in workloads.conf"; done

# (no nbd.pid with CAIRN_COLOCATE=1: the NBD server is in sds1's process)
server_pids() { cat "$TMP/state-$1"/pids/sds*.pid; [ ! -f "$TMP/state-$1/pids/nbd.pid" ] || cat "$TMP/state-$1/pids/nbd.pid"; }
variant_env() { # variant_env VARIANT: its AB_ENV_* words
	if [ "$1" = base ]; then echo "${AB_ENV_BASE:-}"; else echo "${AB_ENV_CURRENT:-}"; fi
}

start() { # start VARIANT: start (or resume) its cluster; sets URI
	running=$1
	# shellcheck disable=SC2046 # VAR=value words on purpose
	URI=$(env $(variant_env "$1") CAIRN_BIN=$TMP/$1 timeout 180 "$REPO/tests/lib/cluster.sh" start "$TMP/state-$1" \
		--sds 3 --devices-per-sds 1 --device-size 4G --volume-size 1GiB 2>"$TMP/$1.start.err" | grep '^nbd://') ||
		die "cluster of $1 did not start: see $TMP/$1.start.err (kept only while running)"
}
stop() {
	CAIRN_BIN=$TMP/$running timeout 60 "$REPO/tests/lib/cluster.sh" stop "$TMP/state-$running" >/dev/null 2>&1 || true
	running=""
}

fio_run() { # fio_run URI JSON ARGS...
	local uri=$1 json=$2
	shift 2
	timeout $((RUNTIME + 60)) fio --name=ab --ioengine=nbd --uri="$uri" --size=${SIZE_MIB}m --numjobs=1 \
		--norandommap=1 --randrepeat=0 --output-format=json "$@" >"$json" 2>"$json.err" ||
		die "fio failed: $(tail -3 "$json.err")"
}

# Can perf count the servers' system calls here?
PERF=0
if command -v perf >/dev/null && timeout 10 perf stat -e raw_syscalls:sys_enter -x, -o /dev/null -- true 2>/dev/null; then PERF=1; fi

printf 'variant\tround\tjob\tios\tiops\tlat_us\tcpu_us_per_io\tcs_per_io\tsyscalls_per_io\twake_us\n' >"$OUT/results.tsv"
for v in base current; do
	say "$v: first start, fill ${SIZE_MIB} MiB"
	start "$v"
	fio_run "$URI" "$TMP/fill.json" --rw=write --bs=1M --iodepth=8
	stop
done
for ((r = 1; r <= ROUNDS; r++)); do
	order="base current"
	[ $((r % 2)) = 0 ] && order="current base"
	for v in $order; do
		start "$v"
		mapfile -t pids < <(server_pids "$v")
		for j in $JOBS; do
			perf_out=$TMP/$v-$r-$j.perf perf_pid=""
			if [ $PERF = 1 ]; then
				perf stat -e raw_syscalls:sys_enter -x, -o "$perf_out" -p "$(IFS=,; echo "${pids[*]}")" &
				perf_pid=$!
				sleep 0.5 # attached before fio starts
			fi
			# The machine's price of a cross-CPU wake-up just before the job (bench.py
			# wake_probe): the same for both variants, or the machine moved between them.
			wake=$(python3 -c 'import sys; sys.path.insert(0, sys.argv[1]); import bench; print(bench.wake_probe()["wake_cross_us"] or "-")' "$REPO/tests/bench")
			read -r t0 c0 < <(sample "${pids[@]}")
			# shellcheck disable=SC2046 # job_args is several words on purpose
			fio_run "$URI" "$TMP/$v-$r-$j.json" --time_based=1 --runtime="$RUNTIME" $(job_args "$j")
			read -r t1 c1 < <(sample "${pids[@]}")
			syscalls=-
			if [ -n "$perf_pid" ]; then
				kill -INT "$perf_pid" && wait "$perf_pid" || true
				syscalls=$(awk -F, '/raw_syscalls/ { print $1 + 0 }' "$perf_out")
			fi
			python3 - "$TMP/$v-$r-$j.json" "$v" "$r" "$j" $((t1 - t0)) $((c1 - c0)) "$HZ" "${syscalls:--}" "$wake" >>"$OUT/results.tsv" <<'EOF'
import json, sys
path, v, r, j, ticks, cs, hz, sc, wake = sys.argv[1:]
text = open(path).read()
# fio may print warnings before the JSON document.
start = text.find("\n{") + 1 if not text.startswith("{") else 0
try:
    doc = json.loads(text[start:])
except ValueError:
    sys.exit(f"ab.sh: no JSON from fio in {path}: {text[:300]!r}")
job = doc["jobs"][0]
ios = job["read"]["total_ios"] + job["write"]["total_ios"]
secs = job["job_runtime"] / 1000.0
lat = [job[d]["lat_ns"] for d in ("read", "write") if job[d]["total_ios"] > 0]
mean = sum(l["mean"] * job[d]["total_ios"] for l, d in zip(lat, [d for d in ("read", "write") if job[d]["total_ios"] > 0])) / ios
sc = f"{int(sc) / ios:.2f}" if sc.isdigit() else "-"
print(f"{v}\t{r}\t{j}\t{ios}\t{ios / secs:.0f}\t{mean / 1000:.1f}\t{int(ticks) * 1e6 / int(hz) / ios:.1f}\t{int(cs) / ios:.2f}\t{sc}\t{wake}")
EOF
			say "$v round $r $j: $(tail -1 "$OUT/results.tsv" | cut -f5-10 | tr '\t' ' ') (IOPS, mean µs, server CPU µs/IO, ctx switches/IO, syscalls/IO, cross-CPU round trip µs)"
		done
		stop
	done
done

python3 - "$OUT/results.tsv" "$(git -C "$REPO" rev-parse --short "$BASE") $(variant_env base)" "${CURRENT:-working tree} $(variant_env current)" <<'EOF' | tee "$OUT/summary.md"
import csv, sys
from statistics import mean
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
jobs = list(dict.fromkeys(r["job"] for r in rows))
keys = [("iops", "IOPS"), ("lat_us", "mean lat µs"), ("cpu_us_per_io", "server CPU µs/IO"), ("cs_per_io", "ctx sw/IO")]
if all(r["syscalls_per_io"] != "-" for r in rows):
    keys.append(("syscalls_per_io", "syscalls/IO"))
if all(r["wake_us"] != "-" for r in rows):
    keys.append(("wake_us", "wake-up round trip µs"))
print(f"A/B, base {sys.argv[2]} vs current {sys.argv[3]}, same run, {len({r['round'] for r in rows})} rounds (mean of rounds; ratio = current / base)\n")
print("| job | " + " | ".join(f"{h} base | {h} current | ratio" for _, h in keys) + " |")
print("|---|" + "--:|--:|--:|" * len(keys))
for j in jobs:
    cells = []
    for k, _ in keys:
        b = mean(float(r[k]) for r in rows if r["job"] == j and r["variant"] == "base")
        c = mean(float(r[k]) for r in rows if r["job"] == j and r["variant"] == "current")
        cells += [f"{b:.4g}", f"{c:.4g}", f"{c / b:.2f}" if b else "-"]
    print(f"| {j} | " + " | ".join(cells) + " |")
EOF
