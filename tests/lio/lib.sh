# Sourced by the tests/lio scripts (conformance.sh, ats.sh, bench-hook.sh): the
# steps they share. Expects HERE (this directory) and REPO (the repository root).

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

# lio_wait_lun INITIATOR URL SECONDS [OUT]: poll with INQUIRY until the LUN
# answers (its output in OUT, default /dev/null); 1 if it never did.
lio_wait_lun() {
  local ini=$1 url=$2 secs=$3 out=${4:-/dev/null} i
  for ((i = 0; i < secs * 2; i++)); do
    timeout 20 iscsi-inq -i "$ini" "$url" > "$out" 2>&1 && return 0
    sleep 0.5
  done
  return 1
}
