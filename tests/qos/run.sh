#!/usr/bin/env bash
# QoS and statistics over NBD with fio, on a local 3-SDS cluster from the
# built binaries (tests/lib/cluster.sh):
#   1. a volume limited to 2,000 IOPS holds within ±10 % at QD32 while an
#      unlimited volume on the same cluster keeps its speed (compared with
#      its speed alone in runs alternated with those beside it);
#   2. a bandwidth limit likewise (20 MiB/s, 64 KiB reads);
#   3. a limit changed live takes effect within 2 s (fio's IOPS log);
#   4. a known fio load (rate-limited by fio itself) → the IOPS the API
#      reports for the volume, its host and the SDSs are within ±10 %;
#   5. one limited volume through two hosts' NBD servers at once: the two
#      together hold the volume's limit within ±10 %.
# Prints every figure beside its baseline; QOS_REPORT=FILE also writes them
# as a markdown table (for docs/benchmarks.md). Bounded: about 2-3 minutes.
set -euo pipefail
T0=$SECONDS
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
CTL=$ROOT/appliance/bin/cairnctl
for tool in fio nbdinfo python3; do
	command -v "$tool" >/dev/null || { echo "FAIL: $tool is missing: run scripts/deps.sh qos (installs fio libnbd-bin)"; exit 1; }
done
fio --enghelp 2>/dev/null | grep -qw nbd || { echo "FAIL: this fio has no nbd engine: install Debian's fio (scripts/deps.sh qos)"; exit 1; }
[ -x "$CTL" ] || { echo "FAIL: $CTL missing: run make build"; exit 1; }

STATE=$(mktemp -d /tmp/cairn-qos.XXXXXX)
cleanup() {
	jobs -p | xargs -r kill 2>/dev/null || true
	"$ROOT/tests/lib/cluster.sh" stop "$STATE" >/dev/null 2>&1 || true
	if [ "${KEEP_STATE:-0}" = 1 ]; then echo "state kept in $STATE"; else rm -rf "$STATE"; fi
}
trap cleanup EXIT
fail() {
	echo "FAIL: $*" >&2
	tail -n 20 "$STATE"/logs/{nbd,nbd2,gateway}.log 2>/dev/null || true
	exit 1
}
pass=0
ok() { echo "ok: $*"; pass=$((pass + 1)); }
ctl() { CAIRNCTL_CONFIG=$STATE/cairnctl.json "$CTL" "$@"; }
RUNTIME=${QOS_RUNTIME:-8} # seconds measured per fio run, after a 2 s ramp
KEEP=${QOS_KEEP_PCT:-85}  # % of the capacity left by the limited volume the unlimited one must get
REPORT=()

uri=$("$ROOT/tests/lib/cluster.sh" start "$STATE" --volume-size 2GiB --volume lim --devices-per-sds 1 | grep '^nbd://') || fail "cluster start"
base=${uri%/lim}
ctl volume create free --pool pool1 --size 2GiB >/dev/null
ctl volume map free --host local >/dev/null

# fio over NBD; prints the job's IOPS and bandwidth (bytes/s) as "iops bw".
fio_run() { # name volume extra fio args...
	local name=$1 vol=$2; shift 2
	fio --name="$name" --ioengine=nbd --uri="$base/$vol" --direct=1 --size=256m --time_based \
		--ramp_time=2 --runtime="$RUNTIME" --output-format=json --output="$STATE/$name.json" "$@" >/dev/null 2>"$STATE/$name.err" ||
		{ cat "$STATE/$name.err"; fail "fio $name"; }
	python3 -c 'import json,sys; j=json.load(open(sys.argv[1]))["jobs"][0]; r=j["read"]; w=j["write"]; print(r["iops"]+w["iops"], (r["bw_bytes"]+w["bw_bytes"]))' "$STATE/$name.json"
}
within() { python3 -c 'import sys; v,t,p=map(float,sys.argv[1:]); sys.exit(0 if abs(v-t)<=t*p/100 else 1)' "$@"; }
atleast() { python3 -c 'import sys; v,t=map(float,sys.argv[1:]); sys.exit(0 if v>=t else 1)' "$@"; }
pct() { python3 -c 'import sys; v,t=map(float,sys.argv[1:]); print(f"{100*v/t:.0f}")' "$@"; }
r0() { python3 -c 'import sys; print(f"{float(sys.argv[1]):.0f}")' "$1"; }
mib() { python3 -c 'import sys; print(f"{float(sys.argv[1])/1048576:.1f}")' "$1"; }

# Write the test regions once, so reads hit allocated chunks.
for v in lim free; do
	fio --name=fill-$v --ioengine=nbd --uri="$base/$v" --rw=write --bs=1m --iodepth=8 --size=256m --output-format=terse >/dev/null 2>&1 || fail "fill $v"
done
RR=(--rw=randread --bs=4k --iodepth=32)
# A warm-up before anything is measured: the first random-read run after
# the fill ran at 55-75 % of the next ones here (the servers' buffers and
# heaps growing to the load).
RUNTIME=2 fio_run warm-up free "${RR[@]}" >/dev/null

# 1 and 2. A limited volume beside an unlimited one. The unlimited
# volume's speed alone (A) and beside the limited volume (B) are measured in
# short runs alternated A B A B A B A, so that a change in the shared
# machine's speed during the test (another job starting or ending, the host
# lending its cores elsewhere) weighs on A and B alike. Each B is compared
# with the mean of the two A runs around it, and the median of those ratios
# counts: one run struck by a hiccup does not decide. (A single A B A triple
# failed on a CI machine whose 64 KiB throughput alone fell from 874 to 717
# MiB/s within 30 s.) On 2 shared cores the data path is CPU-bound: the
# limited volume's own I/O takes its share, so "keeps its speed" means the
# unlimited volume gets at least KEEP % of what the limited one leaves,
# (alone - limited).
ROUNDS=${QOS_ROUNDS:-3} # B runs (A runs: one more)
NEIGHBOUR_RUNTIME=${QOS_NEIGHBOUR_RUNTIME:-4} # seconds measured per A or B run, after the 2 s ramp
KEEP_RATIO=$(python3 -c "print($KEEP / 100)")
# neighbour TAG FIELD QOS-ARGS FIO-ARGS...: FIELD 0 = IOPS, 1 = bytes/s.
# Leaves the runs in NB_A, NB_B, NB_L and python's verdict in NB_SUMMARY.
# A median below KEEP % is measured once more and the second counts: on a
# shared machine a noisy neighbour of our own can strike most of one
# sequence (a median of 87 % here, 99-104 % in the runs before and after).
neighbour() {
	local attempt
	for attempt in 1 2; do
		neighbour_once "$@"
		atleast "${NB_SUMMARY%% *}" "$KEEP_RATIO" && return 0
		[ "$attempt" = 2 ] || echo "  $1: the unlimited volume beside the limited one got a median $(pct "${NB_SUMMARY%% *}" 1) % of what the limited volume leaves (< $KEEP %): measuring the sequence again"
	done
}
neighbour_once() {
	local tag=$1 field=$2 qosargs=$3 i v res
	shift 3
	NB_A=() NB_B=() NB_L=()
	# shellcheck disable=SC2086 # qosargs is a list of flags
	ctl volume qos lim $qosargs >/dev/null
	for ((i = 0; i <= ROUNDS; i++)); do
		res=$(RUNTIME=$NEIGHBOUR_RUNTIME fio_run "$tag-alone$i" free "$@")
		read -r -a v <<<"$res"
		NB_A+=("${v[$field]}")
		[ "$i" = "$ROUNDS" ] && break
		# The limited volume starts 2 s early, alone: its idle bucket's
		# one-second burst is spent then, when the whole machine serves it.
		# Started together with the unlimited volume, it might not spend it
		# in a 2 s ramp (its share of a saturated machine is near its
		# limit) and would carry it into the measured window: 2,225 IOPS
		# under a 2,000 limit over 4 s, seen here.
		RUNTIME=$NEIGHBOUR_RUNTIME fio_run "$tag-lim$i" lim "$@" --ramp_time=4 >"$STATE/$tag-lim$i.out" &
		local lpid=$!
		sleep 2
		res=$(RUNTIME=$NEIGHBOUR_RUNTIME fio_run "$tag-beside$i" free "$@")
		read -r -a v <<<"$res"
		NB_B+=("${v[$field]}")
		wait "$lpid" || fail "fio $tag-lim$i (the limited volume beside the unlimited one)"
		read -r -a v <"$STATE/$tag-lim$i.out"
		NB_L+=("${v[$field]}")
	done
	NB_SUMMARY=$(python3 - "${NB_A[*]}" "${NB_B[*]}" "${NB_L[*]}" <<'PY2'
import statistics, sys
a, b, l = ([float(x) for x in arg.split()] for arg in sys.argv[1:])
left = [b[i] / ((a[i] + a[i + 1]) / 2 - l[i]) for i in range(len(b))]
whole = [b[i] / ((a[i] + a[i + 1]) / 2) for i in range(len(b))]
# median ratio to what the limited volume leaves, median ratio to alone,
# the limited runs' min and max
print(f"{statistics.median(left):.4f} {statistics.median(whole):.4f} {min(l)} {max(l)}")
PY2
)
}
runs() { # FORMATTER VALUES...: "v1, v2, v3"
	local f=$1 out="" x
	shift
	for x in "$@"; do out+="${out:+, }$($f "$x")"; done
	echo "$out"
}

# check_neighbour FMT UNIT LIMIT LIMIT-IN-UNIT ROW: the checks and the
# report row of the last neighbour measurement (NB_*), shown with FMT.
check_neighbour() {
	local fmt=$1 unit=$2 limit=$3 shown=$4 row=$5 left whole lmin lmax x
	read -r left whole lmin lmax <<<"$NB_SUMMARY"
	echo "  limited volume: $(runs "$fmt" "${NB_L[@]}") $unit (limit $shown); unlimited volume beside it: $(runs "$fmt" "${NB_B[@]}") $unit; alone around those: $(runs "$fmt" "${NB_A[@]}") $unit"
	for x in "${NB_L[@]}"; do
		within "$x" "$limit" 10 || fail "volume limited to $shown $unit ran at $("$fmt" "$x") $unit in one of its runs (outside ±10 %): $(runs "$fmt" "${NB_L[@]}")"
	done
	ok "$shown $unit limit held in all $ROUNDS runs: $("$fmt" "$lmin")-$("$fmt" "$lmax") $unit"
	atleast "$left" "$KEEP_RATIO" ||
		fail "the unlimited volume beside the limited one got a median $(pct "$left" 1) % of what the limited volume leaves (its speed alone around it minus the limited volume's), less than $KEEP %"
	ok "unlimited volume beside it: median $(pct "$left" 1) % of what the limited volume leaves, $(pct "$whole" 1) % of its speed alone"
	REPORT+=("| $row | $(runs "$fmt" "${NB_L[@]}") $unit | unlimited volume beside it: $(runs "$fmt" "${NB_B[@]}") $unit; alone around those: $(runs "$fmt" "${NB_A[@]}") $unit; median $(pct "$whole" 1) % of alone, $(pct "$left" 1) % of alone − limited |")
}

# 1. IOPS limit: 2,000 IOPS, 4 KiB random reads at QD32 on both volumes.
neighbour iops 0 "--iops-limit 2000 --bandwidth-limit 0" "${RR[@]}"
check_neighbour r0 IOPS 2000 2000 "IOPS limit 2,000, 4 KiB random read, QD 32"

# 2. Bandwidth limit: 20 MiB/s, 64 KiB random reads at QD32.
neighbour bw 1 "--iops-limit 0 --bandwidth-limit 20MiB" --rw=randread --bs=64k --iodepth=32
check_neighbour mib MiB/s $((20 << 20)) 20 "bandwidth limit 20 MiB/s, 64 KiB random read, QD 32"

# 3. A live change: 1000 → 3000 IOPS while fio runs; when does fio's
# IOPS (in 100 ms windows) first pass 2000?
ctl volume qos lim --iops-limit 1000 --bandwidth-limit 0 >/dev/null
start_ms=$(date +%s%3N)
fio --name=live --ioengine=nbd --uri="$base/lim" --direct=1 --size=256m --time_based --runtime=8 "${RR[@]}" \
	--write_iops_log="$STATE/live" --log_avg_msec=100 --output-format=terse >/dev/null 2>&1 &
fpid=$!
sleep 4
change_ms=$(date +%s%3N)
ctl volume qos lim --iops-limit 3000 >/dev/null
wait $fpid || fail "fio live"
delay=$(python3 - "$STATE"/live_iops.*.log "$start_ms" "$change_ms" <<'PY'
import sys
log, start, change = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rel = change - start  # fio's log times are ms since its start (within a few ms)
for line in open(log):
    t, v = (int(x) for x in line.split(",")[:2])
    # one window = 100 ms; IOPS in it = v (fio logs the window's rate)
    if t > rel and v > 2000:
        print(max(0, t - rel)); break
else:
    print(-1)
PY
)
[ "$delay" -ge 0 ] || fail "after raising the limit to 3000, fio never passed 2000 IOPS"
echo "  limit 1000 → 3000 IOPS: fio above 2000 IOPS $delay ms after the change was sent (window 100 ms)"
[ "$delay" -le 2000 ] || fail "a live limit change took $delay ms (> 2 s)"
ok "live change took effect in $delay ms (≤ 2 s)"
REPORT+=("| live change 1,000 → 3,000 IOPS (cairnctl volume qos) | in effect after $delay ms | limit: 2 s |")
ctl volume qos lim --iops-limit 0 >/dev/null

# 4. Statistics: fio paces itself at 1500 IOPS; ask the API meanwhile.
ctl volume qos free --iops-limit 0 >/dev/null
fio --name=stats --ioengine=nbd --uri="$base/free" --direct=1 --size=256m --time_based --runtime=16 \
	--rw=randread --bs=4k --iodepth=8 --rate_iops=1500 --output-format=json --output="$STATE/stats.json" >/dev/null 2>&1 &
fpid=$!
sleep 12
ctl --json stats show volumes free >"$STATE/api-vol.json"
ctl --json stats show hosts local >"$STATE/api-host.json"
sdsiops=0
for i in 1 2 3; do
	ctl --json stats show sds sds$i >"$STATE/api-sds$i.json"
done
wait $fpid || fail "fio stats"
read -r fioiops api hostiops sdsiops hist <<<"$(python3 - "$STATE" <<'PY'
import json, sys
d = sys.argv[1]
fio = json.load(open(d + "/stats.json"))["jobs"][0]["read"]["iops"]
vol = json.load(open(d + "/api-vol.json"))
host = json.load(open(d + "/api-host.json"))
sds = sum(json.load(open(f"{d}/api-sds{i}.json"))["read"]["iops"] for i in (1, 2, 3))
print(fio, vol["read"]["iops"], host["read"]["iops"], sds, len(vol["history"]))
PY
)"
echo "  fio: $(r0 "$fioiops") IOPS; API: volume $(r0 "$api"), host $(r0 "$hostiops"), SDSs $(r0 "$sdsiops") IOPS; history $hist points"
within "$api" "$fioiops" 10 || fail "the API reports $(r0 "$api") read IOPS for the volume; fio did $(r0 "$fioiops")"
within "$hostiops" "$fioiops" 10 || fail "the API reports $(r0 "$hostiops") read IOPS for the host; fio did $(r0 "$fioiops")"
within "$sdsiops" "$fioiops" 10 || fail "the SDSs report $(r0 "$sdsiops") read IOPS in all; fio did $(r0 "$fioiops")"
[ "$hist" -ge 2 ] || fail "the volume's statistics history has $hist points"
ok "statistics: API volume/host/SDS IOPS within ±10 % of fio's $(r0 "$fioiops")"
REPORT+=("| statistics: fio at 1,500 IOPS (4 KiB random read) | API: volume $(r0 "$api"), host $(r0 "$hostiops"), SDSs $(r0 "$sdsiops") IOPS | fio: $(r0 "$fioiops") IOPS |")

# 5. One volume, two frontends: the limit is the volume's, not each
# frontend's (an ESXi host's round robin over N SVM targets, or N hosts).
# A second host's NBD server serves lim too; fio on both at once. The
# frontends share the limit from each other's published counters (every
# 2 s). A frontend whose load starts mid-interval is given its rate over
# that partial interval (at least limit/4n) for the next one, then its fair
# share once it shows as throttled: about three intervals, more when the
# publishing is slow. A 6 s warm-up fell short on a loaded CI machine (796 +
# 997 IOPS over the measured 8 s); 12 s leaves room for three more.
# shellcheck source=tests/lib/common.sh
. "$ROOT/tests/lib/common.sh"
CAIRN=$ROOT/appliance/bin/cairn
ctl host create local2 --type nbd >/dev/null
ctl volume map lim --host local2 >/dev/null
port2=$(free_port)
# shellcheck disable=SC1091
. "$STATE/ports.env"
export CAIRN_MDM=https://127.0.0.1:$MDM1_CLIENT,https://127.0.0.1:$MDM2_CLIENT,https://127.0.0.1:$MDM3_CLIENT
spawn "$STATE" nbd2 "$CAIRN" nbd --pki "$(pki_dir "$STATE" nbd nbd-local2)" --host local2 --listen "127.0.0.1:$port2" --tls off --allow-plain-loopback
wait_port --log "$STATE/logs/" 127.0.0.1 "$port2" 30 nbd2 || fail "the second host's NBD server did not start"
ctl volume qos lim --iops-limit 2000 >/dev/null
base2="nbd://127.0.0.1:$port2"
SHARED=("${RR[@]}" --ramp_time=12 --log_avg_msec=1000)
(base=$base2 fio_run shared-2 lim "${SHARED[@]}" --write_iops_log="$STATE/shared-2" >"$STATE/shared2.out") &
s2pid=$!
res=$(fio_run shared-1 lim "${SHARED[@]}" --write_iops_log="$STATE/shared-1")
read -r s1 _ <<<"$res"
wait $s2pid || fail "fio on the second host"
read -r s2 _ <"$STATE/shared2.out"
sum=$(python3 -c 'import sys; print(float(sys.argv[1]) + float(sys.argv[2]))' "$s1" "$s2")
echo "  one volume through two hosts' NBD servers at QD32 each: $(r0 "$s1") + $(r0 "$s2") = $(r0 "$sum") IOPS under its 2000 IOPS limit"
persec() { cut -d, -f2 "$1"_iops.*.log | tr -d ' ' | paste -sd' '; } # fio's IOPS, second by second
within "$sum" 2000 10 || fail "through two frontends the 2000 IOPS volume ran at $(r0 "$sum") IOPS ($(r0 "$s1") + $(r0 "$s2")); second by second, the first host: $(persec "$STATE/shared-1"); the second: $(persec "$STATE/shared-2")"
ok "2000 IOPS limit held across two frontends: $(r0 "$s1") + $(r0 "$s2") = $(r0 "$sum") IOPS"
REPORT+=("| 2,000 IOPS limit, one volume through two hosts' NBD servers, QD32 each | $(r0 "$s1") + $(r0 "$s2") = $(r0 "$sum") IOPS | limit 2,000 (each frontend alone would admit 2,000) |")
ctl volume qos lim --iops-limit 0 >/dev/null

table() {
	echo "| test | measured | same-run baseline |"
	echo "|---|---|---|"
	printf '%s\n' "${REPORT[@]}"
}
[ -z "${QOS_REPORT:-}" ] || table >"$QOS_REPORT"
# QOS_WRITE_DOCS=1: replace the QoS section of docs/benchmarks.md (only it).
if [ "${QOS_WRITE_DOCS:-0}" = 1 ]; then
	table >"$STATE/table.md"
	python3 - "$ROOT/docs/benchmarks.md" "$STATE/table.md" "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$(cut -d' ' -f1-3 /proc/loadavg)" "$(cd "$ROOT" && git rev-parse --short HEAD)" "$RUNTIME" "$ROUNDS" "$NEIGHBOUR_RUNTIME" <<'PY'
import sys
doc, table, when, load, rev, runtime, rounds, nruntime = sys.argv[1:]
sec = (f"## QoS\n\nMeasured {when} by `tests/qos/run.sh` (`make test-qos`, QOS_WRITE_DOCS=1), Cairn {rev}: "
       f"a 3-SDS local cluster (tests/lib/cluster.sh), two 2 GiB volumes mapped to one NBD host, fio's nbd engine, "
       f"256 MiB written first, each run 2 s warm-up (which spends the limit's one-second burst) then {runtime} s measured "
       f"({nruntime} s for a limited volume beside an unlimited one, where {rounds} runs beside it alternate with {int(rounds) + 1} "
       f"runs alone: each run beside is compared with the mean of the runs alone around it, and the median counts; a median under the mark is measured once more and the second counts). "
       f"Load average at the end: {load} (the machine is shared: 2 cores).\n\n" + open(table).read())
# In place of the old section (or at the end if there is none).
parts = open(doc).read().split("\n## ")
at = next((i for i, p in enumerate(parts) if p.startswith("QoS")), None)
if at is None:
    parts[-1] = parts[-1].rstrip("\n") + "\n"
    parts.append(sec[3:])
else:
    parts[at] = sec[3:] + "\n"
open(doc, "w").write("\n## ".join(parts))
PY
fi
echo "$pass passed, 0 failed in $((SECONDS - T0)) s"
