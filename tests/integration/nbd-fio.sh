#!/usr/bin/env bash
# Integration: a 3-node cluster from the built binaries, fio (nbd engine)
# random writes with crc32c verification from several jobs, then a full
# restart of every daemon and a verify-only pass over the same data.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
STATE=$(mktemp -d /tmp/cairn-it.XXXXXX)
cleanup() {
	"$ROOT/tests/lib/cluster.sh" stop "$STATE" >/dev/null 2>&1 || true
	if [ "${KEEP_STATE:-0}" = 1 ]; then echo "state kept in $STATE"; else rm -rf "$STATE"; fi
}
trap cleanup EXIT
fail() {
	echo "FAIL: $*"
	tail -n 20 "$STATE"/logs/*.log || true
	exit 1
}
pass=0
ok() { echo "ok: $*"; pass=$((pass + 1)); }

uri=$("$ROOT/tests/lib/cluster.sh" start "$STATE" --volume-size 2GiB | grep '^nbd://')
[ -n "$uri" ] || fail "no NBD URI"

fiojob() { # extra fio args...
	fio --name=it --ioengine=nbd --uri="$uri" --rw=randwrite --bs=4k --iodepth=16 --numjobs=2 \
		--size=128m --offset_increment=256m --verify=crc32c --verify_fatal=1 --randrepeat=1 \
		--group_reporting --output-format=terse "$@"
}

# 1. random writes then verified reads, two jobs in disjoint regions
if ! out=$(fiojob --do_verify=1 2>&1); then echo "$out"; fail "fio write+verify"; fi
ok "fio randwrite+verify crc32c, 2 jobs x 128 MiB at qd16"

# 2. a mixed-size pattern written, every daemon restarted, verified
if ! out=$(fiojob --bs=4k,64k --rw=randwrite --offset=1g --do_verify=0 2>&1); then echo "$out"; fail "fio write before restart"; fi
"$ROOT/tests/lib/cluster.sh" stop "$STATE" >/dev/null
"$ROOT/tests/lib/cluster.sh" start "$STATE" >/dev/null || fail "restart"
if ! out=$(fiojob --bs=4k,64k --rw=randwrite --offset=1g --verify_only 2>&1); then echo "$out"; fail "verify after restart"; fi
ok "data survives a stop and restart of every daemon (fio verify_only)"

# 3. discard reads back zeros (through the NBD client)
tmp=$STATE/tmp && mkdir -p "$tmp"
head -c 4M /dev/urandom >"$tmp/r"
nbdcopy "$tmp/r" "$uri"
fio --name=trim --ioengine=nbd --uri="$uri" --rw=trim --bs=1m --size=4m --output-format=terse >/dev/null
{ nbdcopy "$uri" - 2>/dev/null || true; } | head -c 4M >"$tmp/back" # nbdcopy ends on SIGPIPE
cmp -s "$tmp/back" <(head -c 4M /dev/zero) || fail "trimmed range does not read back as zeros"
ok "trim reads back zeros"

echo "$pass passed, 0 failed"
