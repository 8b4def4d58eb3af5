# Sourced first by the tests/lio scripts (conformance.sh, ats.sh, access.sh,
# bench-hook.sh, run-guest.sh, build-guest.sh): HERE (this directory), REPO
# (the repository root), LIO_CACHE, tests/lib/common.sh and the steps they share.
# shellcheck shell=bash

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
# shellcheck source=../lib/common.sh
. "$HERE/../lib/common.sh"

# LIO_CACHE: the guest image, the libiscsi build and each suite's last run.
LIO_CACHE=${LIO_CACHE:-${CAIRN_CACHE:-$HOME/.cache/cairn}/lio}
export LIO_CACHE

# lio_build_guest LOG: build (or reuse from the cache) the guest kernel,
# initramfs and rootfs; on failure print the log and return 1.
lio_build_guest() {
  bash "$HERE/build-guest.sh" > "$1" 2>&1 || { cat "$1" >&2; return 1; }
}

# lio_build_cairn DIR: the cairn binary for the guest (static: the guest's
# rootfs has its own libc), into DIR/cairn.
lio_build_cairn() {
  mkdir -p "$1"
  (cd "$REPO/appliance" && CGO_ENABLED=0 nice go build -o "$1/cairn" ./cmd/cairn)
}

# lio_inq INITIATOR URL OUT: one INQUIRY of the LUN at URL, its output in OUT.
# iscsi-inq has no time limit of its own; a login racing the removal of its ACL
# has been seen to hang once under TCG: bounded (a caller polling tries again).
lio_inq() {
  timeout 20 iscsi-inq -i "$1" "$2" > "$3" 2>&1
}

# lio_wait_lun INITIATOR URL SECONDS [OUT]: poll with INQUIRY until the LUN
# answers (its output in OUT, default /dev/null); 1 if it never did.
lio_wait_lun() {
  wait_for "$3" lio_inq "$1" "$2" "${4:-/dev/null}"
}

# lio_relay_pids PORT...: the pids of qemu's guestfwd relays (run-guest.sh's relay():
# relay.c, socat or busybox nc; one process per guest connection, reparented to init)
# that carry guest connections to those host ports.
lio_relay_pids() {
  local port
  for port in "$@"; do
    pgrep -x -f "(/.*/relay-[0-9a-f]+ |busybox nc 127\.0\.0\.1 |socat STDIO TCP:127\.0\.0\.1:)$port(,nodelay)?" || true
  done
}
