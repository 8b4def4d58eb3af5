#!/bin/bash
# selftest.sh - tests of the benchmark harness itself (not of Cairn's speed).
#
# 1. bench.py's accounting and ratio logic (test_bench.py), and fio accepts
#    every job of workloads.conf.
# 2. An end-to-end `run.sh full` with tiny runtimes against the real raw and
#    nbdkit-file targets and stand-in hooks (testdata/) for cairn-nbd, the
#    scaling run, the failure figures and, if tgt is installed, the iSCSI pair;
#    checks the JSON records, the ratios, the Markdown, the PNGs, and that no
#    process of the run is left.
# 3. Failures end cleanly: a hook that prints no URI, and the run deadline.
# About 2 minutes here. Uses only its own temp directory.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
PY=$(command -v /usr/bin/python3 || command -v python3)
T0=$(date +%s)
TMP=$(mktemp -d "${TMPDIR:-/tmp}/cairn-bench-selftest.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
say() { printf '[selftest %3ds] %s\n' $(( $(date +%s) - T0 )) "$*"; }
fail() { echo "[selftest] FAIL: $*" >&2; exit 1; }

# leftovers DIR: pids of processes whose command line names DIR (ignoring zombies).
leftovers() {
  local p st
  for p in /proc/[0-9]*; do
    p=${p#/proc/}
    [ "$p" = $$ ] && continue
    st=$(sed 's/.*) //' /proc/$p/stat 2>/dev/null | cut -c1) || continue
    [ "$st" = Z ] && continue
    tr '\0' ' ' < /proc/$p/cmdline 2>/dev/null | grep -qF -- "$1" && printf '%s ' "$p"
  done
  return 0
}

say "unit tests"
"$PY" "$HERE/test_bench.py" 2>&1 | tail -n 3

targets="raw nbdkit-file cairn-nbd scaling failure"
if command -v tgtd >/dev/null; then targets="$targets iscsi"
else say "tgt not installed: the iSCSI plumbing is not tested (apt-get install tgt)"; fi

say "end to end: run.sh full with targets: $targets"
mkdir -p "$TMP/work"
out=$TMP/out
BENCH_TARGETS=$targets BENCH_RUNTIME=1 BENCH_RAMP=0 BENCH_SIZE_MIB=64 BENCH_ISCSI_SIZE_MIB=64 \
BENCH_COPY_MIB=64 BENCH_SCALING_SDS="1 2" BENCH_SCALING_ROUNDS=2 BENCH_OUT=$out BENCH_WORKDIR=$TMP/work BENCH_DEADLINE=240 \
CAIRN_CLUSTER_HOOK=$HERE/testdata/fake-cluster.sh CAIRN_FAILURE_HOOK=$HERE/testdata/fake-failure.sh \
CAIRN_ISCSI_HOOK=$HERE/testdata/fake-iscsi.sh FAKE_ISCSI_RBD=1 \
  "$HERE/run.sh" full > "$TMP/run.log" 2>&1 || { tail -n 30 "$TMP/run.log"; fail "run.sh full failed"; }
grep -E '^\[bench' "$TMP/run.log" | tail -n 3
left=$(leftovers "$TMP/work"); [ -z "$left" ] || fail "processes left running: $left"
[ -z "$(ls -A "$TMP/work")" ] || fail "work directory not cleaned: $(ls "$TMP/work")"

"$PY" - "$out" "$targets" "$HERE" <<'EOF' || fail "results check"
import json, os, sys
out, targets, here = sys.argv[1], sys.argv[2].split(), sys.argv[3]
recs = json.load(open(os.path.join(out, "benchmarks.json")))
meas = [r for r in recs if r["kind"] == "measurement"]
full = [l.split()[0] for l in open(os.path.join(here, "workloads.conf"))
        if l.strip() and not l.startswith("#") and "full" in l.split()[1].split(",")]
def check(cond, msg):
    if not cond:
        print("check failed:", msg); sys.exit(1)
for t in ("raw", "nbdkit-file", "cairn-nbd"):
    got = [r["workload"] for r in meas if r["target"] == t and not r.get("sds")]
    check(got == full, f"{t}: workloads {got} != {full}")
for r in meas:
    for k in ("iops", "mbps", "mean_lat_us", "p99_lat_us", "cpu_us_per_io"):
        check(isinstance(r.get(k), (int, float)) and r[k] > 0, f"{r['target']} {r['workload']}: {k}={r.get(k)}")
    if r["target"] != "raw":
        check(r["server_cpu_us_per_io"] > 0, f"{r['target']} {r['workload']}: server CPU not counted")
    # the wake-up price was timed before every job (across CPUs only where there are two)
    check(r.get("wake_same_us", 0) > 0, f"{r['target']} {r['workload']}: no wake-up probe")
    check((r.get("wake_cross_us") or 0) > 0 or len(os.sched_getaffinity(0)) < 2,
          f"{r['target']} {r['workload']}: no cross-CPU wake-up probe")
    check(r.get("page_cache_gib", 0) > 0 and r.get("file_refaults_per_io", -1) >= 0,
          f"{r['target']} {r['workload']}: page cache not recorded")
check(all(r["server_cpu_us_per_io"] == 0 for r in meas if r["target"] == "raw"), "raw has no server")
sds = sorted({r["sds"] for r in meas if r.get("sds")})
check(sds == [1, 2], f"scaling SDS counts {sds}")
order = [(r["round"], r["sds"]) for r in map(json.loads, open(os.path.join(out, "records.jsonl")))
         if r["kind"] == "measurement" and r.get("sds") and r["workload"].startswith("randread-4k-qd32")]
check(order == [(1, 1), (1, 2), (2, 2), (2, 1)], f"scaling rounds not rotated: {order}")
page = open(os.path.join(out, "benchmarks.md")).read()
check("## The machine during the run: the price of a wake-up" in page, "no wake-up section in the report")
ratios = {(r["workload"], r["versus"], r["metric"].split()[0]) for r in recs if r["kind"] == "ratio"}
for w in ("randread-4k-qd32", "randwrite-4k-qd32"):
    check((w, "nbdkit-file", "iops") in ratios, f"ratio {w} vs nbdkit-file missing")
    check((f"scaling-{w}", "cairn-nbd", "cpu_us_per_io") in ratios, f"scaling ratio {w} missing")
    sc = [r for r in recs if r["kind"] == "ratio" and r["workload"] == f"scaling-{w}"]
    check(sc[0]["metric"].endswith("mean of 2 rounds"), f"scaling ratio {w}: {sc[0]['metric']}")
copy = [r for r in recs if r["workload"] == "copy-1m"]
reb = [r for r in recs if r["workload"] == "rebuild"]
check(len(copy) == 1 and copy[0]["mbps"] > 0, "raw copy rate")
check(len(reb) == 1 and reb[0]["ratio_to_raw"] == round(reb[0]["mbps"] / copy[0]["mbps"], 3), "rebuild ratio_to_raw")
if "iscsi" in targets:
    for t in ("lio-fileio", "tcmu-runner", "tcmu-rbd", "cairn-iscsi"):
        check(len([r for r in meas if r["target"] == t]) == 4, f"{t} records")
    for v in ("lio-fileio", "tcmu-runner"):
        check(("randread-4k-qd16", v, "iops") in ratios, f"iscsi ratio against {v}")
    check("| tcmu-rbd |" in page, "tcmu-rbd not in the report")
# every target (and each scaling size) was filled and read back once, neither a measurement
raw = [json.loads(l) for l in open(os.path.join(out, "records.jsonl"))]
for kind in ("fill", "warm"):
    prep = sorted((r["target"], r.get("sds") or 0, r.get("round") or 0) for r in raw if r["kind"] == kind)
    want = sorted({(r["target"], r.get("sds") or 0, r.get("round") or 0) for r in meas})
    check(prep == want, f"{kind} records {prep} != one per measured target {want}")
md = open(os.path.join(out, "benchmarks.md")).read()
for s in ("2 cores" if os.cpu_count() == 2 else "cores", "warm-up", "| randread-4k-qd128 | raw |", "## Goals", "rebuild", "- Read-back rate: raw "):
    check(s in md, f"benchmarks.md lacks {s!r}")
for p in ("benchmarks-iops-vs-qd.png", "benchmarks-latency-vs-qd.png"):
    check(open(os.path.join(out, p), "rb").read(8) == b"\x89PNG\r\n\x1a\n", f"{p} is not a PNG")
print(f"results ok: {len(meas)} measurements, {len(ratios)} ratios")
EOF

say "a hook that prints no nbd:// line fails its target, cleans up, and the run goes on"
mkdir -p "$TMP/work2"
cat > "$TMP/nouri.sh" <<EOF
#!/bin/bash
# starts the fake cluster but hides its URI
"$HERE/testdata/fake-cluster.sh" "\$@" | grep -v '^nbd://'
EOF
chmod +x "$TMP/nouri.sh"
if BENCH_TARGETS="cairn-nbd nbdkit-file" BENCH_RUNTIME=1 BENCH_RAMP=0 BENCH_SIZE_MIB=64 BENCH_OUT=$TMP/out2 \
   BENCH_WORKDIR=$TMP/work2 CAIRN_CLUSTER_HOOK=$TMP/nouri.sh "$HERE/run.sh" smoke > "$TMP/run2.log" 2>&1; then
  fail "run.sh succeeded although the hook printed no URI"
fi
grep -q 'printed no nbd:// line' "$TMP/run2.log" || { cat "$TMP/run2.log"; fail "no clear error message"; }
left=$(leftovers "$TMP/work2"); [ -z "$left" ] || fail "processes left running after a failed start: $left"
grep -q 'FAILED in this run.*cairn-nbd: cluster hook printed no nbd:// line' "$TMP/out2/benchmarks.md" \
  || fail "the report does not say that cairn-nbd failed"
[ "$(grep -c '"target": "nbdkit-file"' "$TMP/out2/benchmarks.json")" = 4 ] \
  || fail "nbdkit-file was not measured after cairn-nbd failed"

say "the deadline stops a run and cleans up"
mkdir -p "$TMP/work3"
set +e
BENCH_TARGETS=nbdkit-file BENCH_DEADLINE=4 BENCH_RUNTIME=30 BENCH_OUT=$TMP/out3 BENCH_WORKDIR=$TMP/work3 \
  timeout 120 "$HERE/run.sh" smoke > "$TMP/run3.log" 2>&1
rc=$?
set -e
[ $rc = 143 ] || { cat "$TMP/run3.log"; fail "deadline: exit status $rc, want 143"; }
left=$(leftovers "$TMP/work3"); [ -z "$left" ] || fail "processes left running after the deadline: $left"

say "PASS"
