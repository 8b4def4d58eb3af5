#!/usr/bin/env bash
# Where a job's time goes, Cairn beside nbdkit-file: the profile excerpt that
# docs/benchmarks.md gives for each goal the bench misses (issue 18).
#
#   tests/bench/profile.sh [JOB...]      (default: randrw-64k32k-mix45-qd16)
#
# For each target, the same 256 MiB region is filled and read back once (as
# the bench's prepare does), then each JOB of workloads.conf runs for
# PROFILE_RUNTIME seconds (default 8) with fio's nbd engine:
#   cairn    a local cluster (tests/lib/cluster.sh: 3 SDSs, 2 copies, NBD);
#            servers: the NBD server and the SDSs
#   nbdkit   nbdkit's file plugin on a file in the same directory
# and prints, per I/O: the servers' CPU (user and system, /proc/PID/stat),
# context switches and system calls (perf stat, threads started later
# included: nbdkit starts its workers per connection), then
# Cairn's CPU per process; then runs the job again for the servers' hottest
# symbols (perf record, cpu-clock at 999 Hz; in a VM without a virtual PMU the
# kernel's samples land where it re-enables interrupts, so scheduler symbols
# stand for the context switches around them). Uses appliance/bin unless
# CAIRN_BIN is set. Heavy: run it alone. About 1 minute per job, plus 1 for the placement.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BIN=${CAIRN_BIN:-$REPO/appliance/bin}
RUNTIME=${PROFILE_RUNTIME:-8}
JOBS=${*:-randrw-64k32k-mix45-qd16}
SIZE_MIB=256
HZ=$(getconf CLK_TCK)
die() { echo "profile.sh: $*" >&2; exit 1; }
say() { echo "[$(date +%H:%M:%S)] $*" >&2; }
for c in fio nbdkit perf; do command -v $c >/dev/null || die "$c missing (apt-get install fio nbdkit linux-perf)"; done
[ -x "$BIN/cairn" ] || die "no cairn binaries in $BIN: run make build (or set CAIRN_BIN)"
timeout 10 perf record -F 99 -o /dev/null -- true >/dev/null 2>&1 ||
	die "perf may not sample here (run as root, or set kernel.perf_event_paranoid to 1 or less)"
# shellcheck source=sample.sh
. "$REPO/tests/bench/sample.sh" # job_args
# shellcheck source=../lib/common.sh
. "$REPO/tests/lib/common.sh"
for j in $JOBS; do [ -n "$(job_args "$j")" ] || die "no job $j in workloads.conf"; done

TMP=$(mktemp -d /tmp/cairn-profile.XXXXXX)
NBDKIT_PID=""
cleanup() {
	trap '' INT TERM
	[ -z "$NBDKIT_PID" ] || kill "$NBDKIT_PID" 2>/dev/null || true
	CAIRN_BIN=$BIN timeout 60 "$REPO/tests/lib/cluster.sh" stop "$TMP/state" >/dev/null 2>&1 || true
	rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

fio_run() { # fio_run URI OUT ARGS...
	local uri=$1 out=$2
	shift 2
	# shellcheck disable=SC2086 # FIO_PREFIX is a command and its arguments
	timeout $((RUNTIME + 300)) ${FIO_PREFIX:-} fio --name=p --ioengine=nbd --uri="$uri" --size=${SIZE_MIB}m --numjobs=1 \
		--norandommap=1 --randrepeat=0 --output-format=json "$@" >"$out" 2>"$out.err" ||
		die "fio failed: $(tail -3 "$out.err")"
}

# ipis: rescheduling and function-call interrupts so far, all CPUs: the
# cross-CPU wake-ups of the whole machine
ipis() { awk '$1 == "RES:" || $1 == "CAL:" { for (i = 2; i <= NF && $i ~ /^[0-9]+$/; i++) s += $i } END { print s }' /proc/interrupts; }

# ticks PID: "user system" clock ticks of a process
ticks() { awk '{ sub(/.*\) /, ""); print $12, $13 }' "/proc/$1/stat"; }

# snap_ticks NAME=PID...: "name user system" per process
snap_ticks() {
	local n
	for n in "$@"; do echo "${n%%=*} $(ticks "${n#*=}")"; done
}

# under_perf PIDS URI JOB OUT PERF ARGS...: JOB (fio, RUNTIME s) with perf
# attached to PIDS (comma separated) for its whole run
under_perf() {
	local plist=$1 uri=$2 job=$3 out=$4 pid
	shift 4
	perf "$@" -p "$plist" >/dev/null 2>&1 &
	pid=$!
	sleep 0.5 # attached before fio starts
	# shellcheck disable=SC2046 # job_args is several words on purpose
	fio_run "$uri" "$out" --time_based=1 --runtime="$RUNTIME" $(job_args "$job")
	kill -INT $pid 2>/dev/null || true
	wait $pid || true
}

profile() { # profile TARGET URI NAME=PID...
	local target=$1 uri=$2 j n p pids=()
	shift 2
	for n in "$@"; do pids+=("${n#*=}"); done
	local plist
	plist=$(IFS=,; echo "${pids[*]}")
	fio_run "$uri" "$TMP/fill.json" --rw=write --bs=1M --iodepth=8
	fio_run "$uri" "$TMP/warm.json" --rw=read --bs=1M --iodepth=8
	for j in $JOBS; do
		say "$target: $j, $RUNTIME s"
		local base=$TMP/$target-$j
		# Pass 1 counts (perf stat only: cheap); pass 2 samples, whose own
		# cost would inflate pass 1's CPU figures.
		snap_ticks "$@" >"$base.t0"
		under_perf "$plist" "$uri" "$j" "$base.json" stat -e raw_syscalls:sys_enter,context-switches -x, -o "$base.stat"
		snap_ticks "$@" >"$base.t1"
		under_perf "$plist" "$uri" "$j" "$base.rec.json" record -F 999 -o "$base.data"
		perf report -i "$base.data" --sort sym --stdio -q 2>/dev/null |
			grep -v '^$' | head -15 >"$base.syms" || true
		perf report -i "$base.data" --sort dso --stdio -q 2>/dev/null |
			grep -v '^$' >"$base.dsos" || true
	done
	# Placement: a read at queue depth 1 with the servers' threads and fio
	# free to use every CPU, then all of them on CPU 0 only. In a VM, a
	# wake-up on another vCPU is an inter-processor interrupt and often a
	# halted vCPU to resume; on one CPU there are none.
	local place all
	all=0-$(($(nproc) - 1))
	for place in free one-cpu; do
		if [ $place = one-cpu ]; then
			for p in "${pids[@]}"; do taskset -a -p -c 0 "$p" >/dev/null; done
		fi
		local i0 i1
		i0=$(ipis)
		# shellcheck disable=SC2046 # job_args is several words on purpose
		FIO_PREFIX=$([ $place = one-cpu ] && echo "taskset -c 0") \
			fio_run "$uri" "$TMP/$target-qd1-$place.json" --time_based=1 --runtime="$RUNTIME" $(job_args randread-4k-qd1)
		i1=$(ipis)
		echo $((i1 - i0)) >"$TMP/$target-qd1-$place.ipis"
		for p in "${pids[@]}"; do taskset -a -p -c "$all" "$p" >/dev/null; done
	done
}

say "cairn: starting a 3-SDS cluster"
URI=$(CAIRN_BIN=$BIN timeout 180 "$REPO/tests/lib/cluster.sh" start "$TMP/state" --sds 3 --devices-per-sds 1 \
	--device-size 4G --volume-size 1GiB 2>"$TMP/start.err" | grep '^nbd://') ||
	die "cluster did not start: $(tail -5 "$TMP/start.err")"
cairn_procs=()
for f in "$TMP"/state/pids/nbd.pid "$TMP"/state/pids/sds*.pid; do
	n=$(basename "$f" .pid)
	cairn_procs+=("$n=$(cat "$f")")
done
profile cairn "$URI" "${cairn_procs[@]}"
CAIRN_BIN=$BIN timeout 60 "$REPO/tests/lib/cluster.sh" stop "$TMP/state" >/dev/null 2>&1 || true

say "nbdkit: the file plugin"
truncate -s ${SIZE_MIB}M "$TMP/nbdkit.img"
port=$(free_port)
nbdkit -f --exit-with-parent -i 127.0.0.1 -p "$port" file file="$TMP/nbdkit.img" >"$TMP/nbdkit.log" 2>&1 &
NBDKIT_PID=$!
wait_for 15 nbdinfo --size "nbd://127.0.0.1:$port/" >/dev/null || die "nbdkit did not start: $(tail -3 "$TMP/nbdkit.log")"
profile nbdkit "nbd://127.0.0.1:$port/" "nbdkit=$NBDKIT_PID"

# shellcheck disable=SC2086 # JOBS is a list of names
python3 - "$TMP" "$HZ" $JOBS <<'EOF'
import json, sys
d, hz, jobs = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
def load(path):
    t = open(path).read()
    return json.loads(t[t.index("{"):])["jobs"][0]
def ticks(path):
    return {l.split()[0]: (int(l.split()[1]), int(l.split()[2])) for l in open(path)}
for j in jobs:
    print(f"\n#### {j}\n")
    print("| target | IOPS | server CPU µs / I/O (user + system) | context switches / I/O | system calls / I/O |")
    print("|---|--:|--:|--:|--:|")
    per = {}
    for t in ("cairn", "nbdkit"):
        b = f"{d}/{t}-{j}"
        job = load(b + ".json")
        ios = job["read"]["total_ios"] + job["write"]["total_ios"]
        iops = job["read"]["iops"] + job["write"]["iops"]
        t0, t1 = ticks(b + ".t0"), ticks(b + ".t1")
        us = lambda k, i: (t1[k][i] - t0[k][i]) * 1e6 / hz / ios
        u, s = sum(us(k, 0) for k in t0), sum(us(k, 1) for k in t0)
        per[t] = {k: us(k, 0) + us(k, 1) for k in t0}
        counts = {}
        for line in open(b + ".stat"):
            f = line.split(",")
            if len(f) > 2 and f[0].replace(".", "").isdigit():
                counts[f[2]] = float(f[0]) / ios
        cs, sc = counts.get("context-switches"), counts.get("raw_syscalls:sys_enter")
        print(f"| {t} | {iops:,.0f} | {u + s:.1f} ({u:.1f} + {s:.1f}) | {cs:.1f} | {sc:.1f} |")
    print("\nCairn's CPU per process (µs / I/O): " + ", ".join(f"{k} {v:.1f}" for k, v in sorted(per["cairn"].items())))
    for t in ("cairn", "nbdkit"):
        b = f"{d}/{t}-{j}"
        dsos = [l.split() for l in open(b + ".dsos") if l.strip()]
        kern = sum(float(x[0].rstrip("%")) for x in dsos if "kernel" in x[-1])
        print(f"\n{t}: {kern:.0f} % of the servers' samples in the kernel; hottest symbols:\n\n```")
        print("".join(open(b + ".syms").readlines()[:12]).rstrip())
        print("```")
print("\n#### randread-4k-qd1: free, then every server thread and fio on CPU 0\n")
print("| target | placement | IOPS | mean latency | cross-CPU interrupts / I/O (RES + CAL, whole machine) |")
print("|---|---|--:|--:|--:|")
for t in ("cairn", "nbdkit"):
    for place in ("free", "one-cpu"):
        job = load(f"{d}/{t}-qd1-{place}.json")["read"]
        ipis = int(open(f"{d}/{t}-qd1-{place}.ipis").read()) / job["total_ios"]
        print(f"| {t} | {place} | {job['iops']:,.0f} | {job['lat_ns']['mean'] / 1000:.0f} µs | {ipis:.2f} |")
EOF
