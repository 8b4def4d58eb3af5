#!/bin/bash
# Access control, map/unmap following and persistence of the Cairn iSCSI target, in the qemu guest:
#  1. a mapped host logs in with its CHAP secret and sees the LUN; a wrong secret is refused;
#  2. an initiator without an ACL cannot log in, with or without CHAP;
#  3. mapping a second host takes effect within seconds; unmapping it removes its access;
#  4. persistence: the target's configuration saved by rtslib-fb is restored by
#     `targetctl restore` after LIO was cleared, and a restarted target adopts it without
#     changes and serves the LUN again.
# The CHAP secret is random per run. Prints the time of each phase; exits non-zero on failure.
# Env: CAIRN_TARGET_BIN (guest path of a target binary taking memtarget's flags; default: memtarget built here)
set -euo pipefail
# HERE, REPO, LIO_CACHE, common.sh
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
WORK=$LIO_CACHE/access-run
export RUN=$WORK/guest
IQN=iqn.2026-01.io.cairn:svm-access
HOST_A=iqn.2024-01.io.cairn:host-a
HOST_B=iqn.2024-01.io.cairn:host-b
VOL=00000000000000d1
SECRET=$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n' | cut -c1-16)
now() { date +%s.%N; }
t0=$(now)
phase() { awk -v a="$t0" -v b="$(now)" -v n="$1" 'BEGIN{printf "phase %-14s %6.1f s\n", n, b-a}'; t0=$(now); }
fail() { echo "FAIL: $*" >&2; exit 1; }

rm -rf "$WORK"; mkdir -p "$WORK/stage"
trap '"$HERE/run-guest.sh" stop' EXIT
bash "$HERE/build-guest.sh" > "$WORK/build-guest.log" 2>&1 || { cat "$WORK/build-guest.log"; exit 1; }
(cd "$REPO/appliance" && CGO_ENABLED=0 nice go build -o "$WORK/stage/memtarget" ./internal/target/memtarget)
BIN=${CAIRN_TARGET_BIN:-/cairn/memtarget}
phase build
CAIRN_DIR=$WORK/stage "$HERE/run-guest.sh" start
PORT=$(cat "$RUN/port")
phase boot
g() { "$HERE/run-guest.sh" cmd "$@"; }
start_target() {
  g "env GOMAXPROCS=1 $BIN -iqn $IQN -volumes $VOL:64 -mappings /tmp/mappings -save /etc/target/saveconfig.json > /tmp/target.log 2>&1 &"
}
g "echo '$VOL $HOST_A host-a $SECRET' > /tmp/mappings"
start_target
URL=127.0.0.1:$PORT/$IQN/0
inq() { # inq INITIATOR [user%secret@]: succeeds when the LUN answers INQUIRY
  lio_inq "$1" "iscsi://${2:-}$URL" "$WORK/inq.out"
}
await() { # await SECONDS DESCRIPTION COMMAND...: wait_for (common.sh); at the deadline show why and fail
  local s=$1 what=$2; shift 2
  wait_for "$s" "$@" && return 0
  cat "$WORK/inq.out"; g "tail -20 /tmp/target.log"; fail "$what (after $s s)"
}
await 60 "host A with its CHAP secret sees the LUN" inq "$HOST_A" "host-a%$SECRET@"
phase target-up
grep -q 'Product:Cairn' "$WORK/inq.out" || { cat "$WORK/inq.out"; fail "INQUIRY did not come from Cairn"; }
refused() { # refused WHAT INITIATOR [creds]: the login must fail (not some other error)
  local what=$1; shift
  if inq "$@"; then fail "$what: logged in"; fi
  grep -q -i 'log.* in\|login' "$WORK/inq.out" || { cat "$WORK/inq.out"; fail "$what: failed, but not at login"; }
  echo "ok: $what: $(grep -i -m1 'log.* in\|login' "$WORK/inq.out")"
}
refused "host A with a wrong CHAP secret" "$HOST_A" "host-a%wrongsecret12@"
refused "host A without CHAP (the TPG requires it)" "$HOST_A"
refused "host B (no ACL) with host A's credentials" "$HOST_B" "host-a%$SECRET@"
refused "host B (no ACL) without CHAP" "$HOST_B"
phase access

g "echo '$VOL $HOST_A,$HOST_B host-a $SECRET' > /tmp/mappings"
t=$(now)
await 30 "host B sees the LUN after it was mapped" inq "$HOST_B" "host-a%$SECRET@"
echo "ok: map took effect in $(awk -v a="$t" -v b="$(now)" 'BEGIN{printf "%.1f", b-a}') s"
g "echo '$VOL $HOST_A host-a $SECRET' > /tmp/mappings"
t=$(now)
unmapped() { ! inq "$HOST_B" "host-a%$SECRET@" && grep -q -i 'log.* in\|login' "$WORK/inq.out"; }
await 30 "host B loses the LUN after it was unmapped" unmapped
echo "ok: unmap took effect in $(awk -v a="$t" -v b="$(now)" 'BEGIN{printf "%.1f", b-a}') s"
inq "$HOST_A" "host-a%$SECRET@" || fail "host A lost the LUN when host B was unmapped"
phase map-unmap

# Persistence: stop the target (as systemd does: SIGTERM, then wait for it to
# exit, which waits for a LIO change in progress and its save), wipe LIO,
# restore from rtslib's saved file, restart the target.
g "p=\$(pidof memtarget); kill \$p; for i in \$(seq 600); do kill -0 \$p 2>/dev/null || break; sleep 0.1; done; if kill -0 \$p 2>/dev/null; then echo running; else targetctl clear; ls /sys/kernel/config/target/iscsi | grep -c svm-access || true; fi" | grep -qx 0 ||
  fail "the target did not stop in 60 s, or LIO was not cleared"
g "targetctl restore /etc/target/saveconfig.json && ls /sys/kernel/config/target/core/user_*/" | grep -q "cairn-$VOL" ||
  fail "saveconfig.json did not restore the Cairn backstore"
start_target
await 60 "restored target serves host A again" inq "$HOST_A" "host-a%$SECRET@"
inq "$HOST_B" "host-a%$SECRET@" && fail "host B's ACL came back after restore"
g "grep -c 'applying LIO changes' /tmp/target.log || true" | grep -qx 0 ||
  { g "cat /tmp/target.log"; fail "the restarted target had to change the restored configuration"; }
echo "ok: configuration restored by targetctl; restarted target adopted it unchanged"
phase persistence
echo "access.sh: all checks passed"
