#!/bin/bash
# Two targets, one volume (what two SVMs do): ATS atomicity and identical identity.
#  1. iscsi-inq through both targets shows the same unit serial (VPD 0x80) and NAA identifier
#     (VPD 0x83 logical unit designator);
#  2. caw-race: two initiators race COMPARE AND WRITE on one block through the two targets for
#     ROUNDS rounds; every round exactly one wins, and the block holds the winner's data.
# Default: one guest, one memtarget process exporting an in-memory volume through two targets
# (own IQN, own backstores and TCMU rings each). CAIRN_TARGET_CMD replaces it (e.g. two
# `cairn target` processes on a cluster running on the host, see conformance.sh) and must export
# the volume as LUN 0 of $IQN1 and $IQN2 to the two libiscsi initiator names.
# Env: ROUNDS (200). Needs libiscsi-dev and gcc on the host (caw-race.c).
set -euo pipefail
# HERE, REPO, LIO_CACHE, common.sh
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
WORK=$LIO_CACHE/ats-run
export RUN=$WORK/guest
IQN1=iqn.2026-01.io.cairn:svm-1
IQN2=iqn.2026-01.io.cairn:svm-2
INI1=iqn.2007-10.com.github:sahlberg:libiscsi:iscsi-test
INI2=iqn.2007-10.com.github:sahlberg:libiscsi:iscsi-test-2
ROUNDS=${ROUNDS:-200}
now() { date +%s.%N; }
t0=$(now)
phase() { awk -v a="$t0" -v b="$(now)" -v n="$1" 'BEGIN{printf "phase %-14s %6.1f s\n", n, b-a}'; t0=$(now); }
fail() { echo "FAIL: $*" >&2; exit 1; }

rm -rf "$WORK"; mkdir -p "$WORK/stage"
cluster_down() { :; }
trap '"$HERE/run-guest.sh" stop; cluster_down' EXIT
lio_build_guest "$WORK/build-guest.log"
gcc -O2 -Wall -o "$WORK/caw-race" "$HERE/caw-race.c" -liscsi -lpthread
if [ -z "${CAIRN_TARGET_CMD:-}" ] && [ "${ATS_BACKEND:-cluster}" = cluster ]; then
  # Default: the real thing. A Cairn cluster on the host; two `cairn target`
  # processes in the guest (two SVMs: own IQN, own backstores and rings, own
  # relative port) export the same volume; ATS is decided by the volume's
  # primary SDS, not by either target.
  lio_build_cairn "$WORK/stage"
  CAIRN_IQN=$IQN1
  # shellcheck source=cairn-cluster.sh
  . "$HERE/cairn-cluster.sh"
  export GUESTFWD
  common="$CAIRN_TARGET_AUTH --sds-addr-map 127.0.0.1=10.0.2.100 --group-ports 1,2 --log-level warn"
  CAIRN_TARGET_CMD="sh -c 'env GOMAXPROCS=1 /cairn/cairn target --iqn $IQN1 --port-number 1 $common & env GOMAXPROCS=1 /cairn/cairn target --iqn $IQN2 --port-number 2 --backstore-prefix cairn-b- $common & wait'"
elif [ -z "${CAIRN_TARGET_CMD:-}" ]; then
  (cd "$REPO/appliance" && CGO_ENABLED=0 nice go build -o "$WORK/stage/memtarget" ./internal/target/memtarget)
  CAIRN_TARGET_CMD="env GOMAXPROCS=1 /cairn/memtarget -iqn $IQN1 -second-iqn $IQN2 -hosts $INI1,$INI2 -volumes 00000000000000e1:64"
fi
phase build
CAIRN_DIR=$WORK/stage "$HERE/run-guest.sh" start
PORT=$(cat "$RUN/port")
phase boot
"$HERE/run-guest.sh" cmd "$CAIRN_TARGET_CMD > /tmp/target.log 2>&1 &"
U1=iscsi://127.0.0.1:$PORT/$IQN1/0
U2=iscsi://127.0.0.1:$PORT/$IQN2/0
for u in "$U1" "$U2"; do
  lio_wait_lun "$INI1" "$u" 60 || { "$HERE/run-guest.sh" cmd "tail -20 /tmp/target.log"; fail "$u not reachable"; }
done
phase targets-up

for page in 128 131; do
  iscsi-inq -i "$INI1" -e 1 -c $page "$U1" > "$WORK/vpd$page-1.txt"
  iscsi-inq -i "$INI1" -e 1 -c $page "$U2" > "$WORK/vpd$page-2.txt"
done
grep -q -i 'serial' "$WORK/vpd128-1.txt" || fail "no unit serial in VPD 0x80"
cmp -s "$WORK/vpd128-1.txt" "$WORK/vpd128-2.txt" || { diff "$WORK/vpd128-1.txt" "$WORK/vpd128-2.txt"; fail "unit serial differs between targets"; }
# the logical unit's designators (T10 vendor id, NAA) must match; target port ones legitimately
# differ. iscsi-inq prints the binary NAA raw: compare bytes, show hex.
lu_designators() { awk '/^DEVICE DESIGNATOR/ {keep = 0} /Association:\(0\) LOGICAL_UNIT/ {keep = 1} keep' "$1" | od -An -tx1 | tr -d '\n'; }
grep -a -q 'Designator Type:(3) NAA' "$WORK/vpd131-1.txt" || { cat -v "$WORK/vpd131-1.txt"; fail "no NAA designator in VPD 0x83"; }
[ "$(lu_designators "$WORK/vpd131-1.txt")" = "$(lu_designators "$WORK/vpd131-2.txt")" ] ||
  { diff <(cat -v "$WORK/vpd131-1.txt") <(cat -v "$WORK/vpd131-2.txt"); fail "logical unit designators (NAA) differ between targets"; }
echo "ok: same serial and NAA identifier through both targets: $(grep -i -m1 serial "$WORK/vpd128-1.txt")"
phase identity

"$WORK/caw-race" "$U1" "$U2" "$ROUNDS" || fail "COMPARE AND WRITE was not atomic across the two targets"
phase caw-race
echo "ats.sh: all checks passed"
