#!/bin/bash
# libiscsi conformance of a Cairn LUN against LIO's own fileio backstore, in one qemu guest.
#
# Builds (or reuses) the guest, boots it, sets up a LIO fileio reference LUN and a Cairn LUN
# (`user:` TCMU backstore served by Cairn's ring driver and SCSI layer), runs iscsi-test-cu on
# both over 127.0.0.1, writes a per-test comparison and exits non-zero when Cairn fails a test
# that LIO passes in a gated suite, or passes fewer tests than LIO.
#
# Env:
#   TESTS        iscsi-test-cu test pattern(s), space separated (default ALL; e.g. "ALL.Inquiry ALL.Unmap")
#   CONFORMANCE_MD  report path (default: docs/conformance.md for ALL, $WORK/conformance.md otherwise)
#   CAIRN_TARGET_CMD  guest command that starts the Cairn target (default: memtarget, in-memory
#                volume, built here); it must export one volume as LUN 0 of $CAIRN_IQN to the two
#                libiscsi initiator names. With a cluster on the host, also set GUESTFWD.
#   CAIRN_CLUSTER_SCRIPT  host script sourced before the guest boots, to run a Cairn cluster on
#                the host: it sets GUESTFWD and CAIRN_TARGET_CMD, and may define cluster_down
#                (called on exit)
#   CAIRN_IQN, VOLUME_MIB (256), GATE_COUNT (1: also fail when Cairn passes fewer tests than LIO)
# `conformance.sh --report-only` rebuilds the report and the verdict from the last run's logs.
# Failure reasons: known-failures.tsv (Suite.Test<TAB>reason), else the test's first failure message.
# Needs: libiscsi-bin, qemu-system-x86, go (to build the test target), and build-guest.sh's needs.
set -euo pipefail
# HERE, REPO, LIO_CACHE, common.sh
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
WORK=$LIO_CACHE/conformance-run   # logs of the last run stay here
export RUN=$WORK/guest
TESTS=${TESTS:-ALL}
# Default: the real cluster (cairn-cluster.sh); CAIRN_CLUSTER_SCRIPT=memory for the in-memory test target.
CAIRN_CLUSTER_SCRIPT=${CAIRN_CLUSTER_SCRIPT-$HERE/cairn-cluster.sh}
FILEIO_IQN=iqn.2003-01.org.linux-iscsi.cairn-test:fileio
CAIRN_IQN=${CAIRN_IQN:-iqn.2026-01.io.cairn:svm-test}
VOLUME_MIB=${VOLUME_MIB:-256}
INI1=iqn.2007-10.com.github:sahlberg:libiscsi:iscsi-test
INI2=iqn.2007-10.com.github:sahlberg:libiscsi:iscsi-test-2
# Suites where Cairn must not fail a test LIO fileio passes (issue 4).
GATE_RE='^(CompareAndWrite|MultipathIO|WriteSame10|WriteSame16|Unmap|GetLBAStatus|ExtendedCopy|ReceiveCopyResults|Inquiry|ReadCapacity16|Read[A-Za-z0-9]*|Write[A-Za-z0-9]*|SynchronizeCache[0-9]*)\.'

now() { date +%s.%N; }
phase_start=$(now)
phase() { # phase NAME: print the time since the previous phase
  local t; t=$(now)
  printf 'phase %-16s %6.1f s\n' "$1" "$(awk -v a="$phase_start" -v b="$t" 'BEGIN{print b-a}')" | tee -a "$WORK/phases.txt"
  phase_start=$t
}

if [ "${1:-}" != --report-only ]; then
rm -rf "$WORK"; mkdir -p "$WORK/stage"
cluster_down() { :; }
trap '"$HERE/run-guest.sh" stop; cluster_down' EXIT

lio_build_guest "$WORK/build-guest.log"
phase build-guest

install -m 755 "$HERE/guest-fileio.sh" "$HERE/guest-export.sh" "$WORK/stage/"
if [ "${CAIRN_CLUSTER_SCRIPT:-}" = memory ]; then CAIRN_CLUSTER_SCRIPT=""; fi
if [ -n "${CAIRN_CLUSTER_SCRIPT:-}" ]; then
  # The real thing: `cairn target` in the guest over a Cairn cluster on the host.
  lio_build_cairn "$WORK/stage"
  echo "the Cairn cluster (3 SDSs, 2 copies, on the host) through \`cairn target\` and the client library" > "$WORK/backend.txt"
elif [ -z "${CAIRN_TARGET_CMD:-}" ]; then
  (cd "$REPO/appliance" && CGO_ENABLED=0 nice go build -o "$WORK/stage/memtarget" ./internal/target/memtarget)
  # GOMAXPROCS=1: under TCG every syscall is costly and an idle Go P polls epoll; one P
  # roughly halves the target's CPU here (a real SVM has no such cost).
  CAIRN_BACKEND=${CAIRN_BACKEND:-"an in-memory volume (blockdev.MemVolume, test target internal/target/memtarget), not yet the cluster client"}
  echo "$CAIRN_BACKEND" > "$WORK/backend.txt"
  CAIRN_TARGET_CMD="env GOMAXPROCS=1 /cairn/memtarget -handler scsi -iqn $CAIRN_IQN -hosts $INI1,$INI2 -volumes 00000000000000c1:$VOLUME_MIB"
elif [ -x "$REPO/appliance/bin/cairn" ]; then
  install -m 755 "$REPO/appliance/bin/cairn" "$WORK/stage/cairn"
fi
phase build-target
if [ -n "${CAIRN_CLUSTER_SCRIPT:-}" ]; then
  # shellcheck source=/dev/null
  . "$CAIRN_CLUSTER_SCRIPT"
  export GUESTFWD
  phase cluster-up
fi

CAIRN_DIR=$WORK/stage "$HERE/run-guest.sh" start | tee "$WORK/boot.txt"
PORT=$(cat "$RUN/port")
phase boot

g() { "$HERE/run-guest.sh" cmd "$@"; }
g "/cairn/guest-fileio.sh $FILEIO_IQN $VOLUME_MIB"
g "nohup $CAIRN_TARGET_CMD > /tmp/cairn-target.log 2>&1 &"
CAIRN_URL=iscsi://127.0.0.1:$PORT/$CAIRN_IQN/0
LIO_URL=iscsi://127.0.0.1:$PORT/$FILEIO_IQN/0
if ! lio_wait_lun "$INI1" "$CAIRN_URL" 120 "$WORK/cairn-inq.txt"; then
  cat "$WORK/cairn-inq.txt"; g "tail -30 /tmp/cairn-target.log"; echo "conformance: Cairn LUN not reachable at $CAIRN_URL" >&2; exit 1
fi
iscsi-inq -i "$INI1" "$LIO_URL" > "$WORK/lio-inq.txt"
phase target-setup

run_suite() { # run_suite NAME URL: raw verbose output in $WORK/NAME.log
  local name=$1 url=$2 t
  : > "$WORK/$name.log"; : > "$WORK/$name.times"
  for t in $TESTS; do
    # the multipath URL is the same LUN again: a second session (MultipathIO suite)
    local s=$SECONDS
    timeout 1800 iscsi-test-cu -d --test="$t" "$url" "$url" >> "$WORK/$name.log" 2>&1 || true
    printf '%-28s %4d s\n' "$t" $((SECONDS - s)) >> "$WORK/$name.times"
  done
}
run_suite lio "$LIO_URL"
phase run-lio-fileio
run_suite cairn "$CAIRN_URL"
phase run-cairn
g "tail -50 /tmp/cairn-target.log" > "$WORK/cairn-target.log" || true
fi

# parse iscsi-test-cu's verbose output: "Suite: S", then per test "  Test: T ...", the test's own
# output, the verdict "passed"/"FAILED" (right after "..." or at a line start; stray output of the
# next test's setup may follow it on the same line) and, for failures, numbered assertion lines.
# Prints one line per test: "Suite.Test pass|fail|skip <first failure message>".
parse() {
  awk '
    function flush() {
      if (name != "" && verdict != "") {
        if (verdict == "fail") { gsub(/\|/, "/", msg); print suite "." name, "fail", msg }
        else print suite "." name, (skipped ? "skip" : "pass")
      }
      name = ""; verdict = ""
    }
    /^Suite: / { flush(); suite = $2; next }
    /^Run Summary/ { flush(); next }
    /^  Test: / { flush(); name = $2; msg = ""; skipped = 0; sub(/^  Test: [^ ]+ /, "") }
    name != "" {
      line = $0
      if (verdict == "") {
        # a test that gives up says "[SKIPPED] <why>" and passes; the REPORT SUPPORTED
        # OPERATION CODES note is informational (the test goes on without it). What follows
        # the verdict on its line is the teardown or the next setup talking (e.g. the
        # reservation clean-up saying "PERSISTENT RESERVE IN is not implemented" on Cairn
        # LUNs, which refuse reservations by design): it does not make a passed test a skip.
        pre = line
        if (match(line, /(^|\.\.\.)(passed|FAILED)/)) pre = substr(line, 1, RSTART - 1)
        if (index(pre, "[SKIPPED]") && !index(pre, "REPORT_SUPPORTED_OPCODES is not implemented")) skipped = 1
        if (msg == "" && index(line, "[FAILED]")) { msg = line; sub(/.*\[FAILED\] */, "", msg) }
        if (match(line, /(^|\.\.\.)(passed|FAILED)/)) {
          verdict = (substr(line, RSTART, RLENGTH) ~ /FAILED/) ? "fail" : "pass"
        }
      } else if (verdict == "fail" && msg == "" && line ~ /^    1\. /) {
        msg = line; sub(/^    1\. */, "", msg)
      }
    }
    END { flush() }' "$1"
}
parse "$WORK/lio.log" > "$WORK/lio.results"
parse "$WORK/cairn.log" > "$WORK/cairn.results"

count() { awk -v r="$2" '$2 == r' "$1" | wc -l; }
summary() { echo "iscsi-test-cu $TESTS: $(count "$1" pass) passed, $(count "$1" fail) failed, $(count "$1" skip) skipped"; }
if [ -z "${CONFORMANCE_MD:-}" ]; then
  if [ "$TESTS" = ALL ]; then CONFORMANCE_MD=$REPO/docs/conformance.md; else CONFORMANCE_MD=$WORK/conformance.md; fi
fi
mkdir -p "$(dirname "$CONFORMANCE_MD")"
{
  summary "$WORK/cairn.results"
  summary "$WORK/lio.results"
  echo
  echo "Cairn (first line) and LIO's fileio backstore (second line), same qemu guest, same run:"
  echo "Debian $(grep -o 'kernel [^:]*' "$WORK/build-guest.log" | head -1 | sed 's/kernel (\(.*\))/\1/'), libiscsi $(dpkg-query -W -f '${Version}' libiscsi-bin 2>/dev/null),"
  echo "\`iscsi-test-cu -d --test=<t> <url> <url>\` (the second URL makes the MultipathIO suite run)."
  echo "The Cairn LUN is served by Cairn's TCMU ring driver and SCSI layer over $(cat "$WORK/backend.txt" 2>/dev/null || echo "the Cairn cluster client")."
  echo "Generated by tests/lio/conformance.sh on $(date -u +%Y-%m-%d)."
  echo
  echo "| Suite.Test | cairn | lio-fileio | reason |"
  echo "|---|---|---|---|"
  join -a1 -a2 -e missing -o 0,1.2,2.2 <(awk '{print $1, $2}' "$WORK/cairn.results" | sort) \
                                       <(awk '{print $1, $2}' "$WORK/lio.results" | sort) |
  while read -r test c l; do
    reason=""
    if [ "$c" = fail ]; then
      reason=$(awk -v t="$test" '$1 == t { $1 = ""; $2 = ""; sub(/^ +/, ""); print; exit }' "$WORK/cairn.results")
      known=$(awk -F'\t' -v t="$test" '$1 == t { print $2; exit }' "$HERE/known-failures.tsv" 2>/dev/null || true)
      [ -n "$known" ] && reason=$known
    fi
    echo "| $test | $c | $l | $reason |"
  done
} > "$CONFORMANCE_MD"
phase report
head -2 "$CONFORMANCE_MD"
echo "report: $CONFORMANCE_MD; logs: $WORK"

# gate
regressions=$(join <(awk '$2 == "fail" {print $1}' "$WORK/cairn.results" | sort) \
                   <(awk '$2 == "pass" {print $1}' "$WORK/lio.results" | sort) | grep -E "$GATE_RE" || true)
rc=0
if [ -n "$regressions" ]; then
  echo "FAIL: Cairn fails tests LIO fileio passes, in gated suites:"; echo "$regressions" | sed 's/^/  /'; rc=1
fi
if [ "${GATE_COUNT:-1}" = 1 ] && [ "$(count "$WORK/cairn.results" pass)" -lt "$(count "$WORK/lio.results" pass)" ]; then
  echo "FAIL: Cairn passes fewer tests than LIO fileio"; rc=1
fi
[ "$(wc -l < "$WORK/cairn.results")" -gt 0 ] || { echo "FAIL: no Cairn results parsed (see $WORK/cairn.log)"; rc=1; }
cat "$WORK/phases.txt"
exit $rc
