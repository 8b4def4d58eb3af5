#!/bin/bash
# Boot the LIO test guest under qemu (TCG: KVM does not work on these machines), wait until it
# is ready, run commands in it through its serial console, stop it by pid.
#
#   run-guest.sh start            boot; prints boot-to-ready time; $RUN/port holds the host port
#   run-guest.sh cmd 'shell cmd'  run one line in the guest (in the Debian rootfs, as root);
#                                 prints its output, exits with its status (CMD_TIMEOUT s, default 600)
#   run-guest.sh stop             kill qemu and helpers (by their recorded pids)
#
# Network: qemu user net with restrict=on: the guest reaches nothing; the guest's iSCSI port
# 3260 is forwarded from 127.0.0.1:$PORT (a free loopback port unless PORT is set). GUESTFWD
# ("guestaddr:port=hostport ...", e.g. "10.0.2.100:2379=2379") opens guest-initiated connections
# to 127.0.0.1:hostport on the host (one relay process per connection, see relay() below), for
# a Cairn cluster that runs on the host.
# Disks: vda = the cached rootfs image (snapshot=on: never modified); vdb = an ext4 image made
# from $CAIRN_DIR (the cairn binary and guest scripts), mounted at /cairn (also on PATH).
# The kernel gets tsc=reliable clocksource=tsc: under TCG it would otherwise pick the HPET, and
# every clock read of a Go program (the Cairn target) becomes an emulated MMIO access.
# Env: RUN (state dir, default $LIO_CACHE/run), PORT, MEM (MiB, 1024), SMP (2), CAIRN_DIR, GUESTFWD,
# GUESTFWD_RELAY (cairn, socat or nc: see relay()), GUESTFWD_NETNS (run each relay in this
# network namespace: a cluster that runs in one), NET_OPTS (extra virtio-net-pci
# properties, e.g. tx=timer), QEMU_EXTRA (more qemu arguments, split at spaces: e.g.
# "-object filter-dump,id=d,netdev=n0,file=/tmp/g.pcap" records the guest's packets), TAP (the
# name of a tap device the caller made: a second virtio NIC, eth1 in the guest, on it; unlike
# the user net it carries checksum and segmentation offloads, as a real VM's NIC does).
set -euo pipefail
# HERE, LIO_CACHE, free_port, alive
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
G=$LIO_CACHE/guest
RUN=${RUN:-$LIO_CACHE/run}
now() { date +%s.%N; }

# relay PORT: the command qemu runs per guest connection of a guestfwd (its stdio is the
# connection). GUESTFWD_RELAY picks it:
#   cairn (default): relay.c, built once into $LIO_CACHE/relay. libslirp hands the relay a
#         loopback TCP socket whose qemu end keeps Nagle on, and qemu writes a request one
#         guest segment at a time: the rest waits for the relay's delayed ACK (40 ms) unless
#         the relay ACKs every read at once, which relay.c does (see its header).
#   socat: socat with TCP_NODELAY on its host side only (a 4k write through the guest's
#         Cairn target then took 48 ms at queue depth 1, against 2.0 ms with relay.c).
#   nc:    busybox nc (Nagle on both sides).
# ",," is a literal comma inside qemu's -netdev option string.
RELAY_BIN=$LIO_CACHE/relay/relay-$(sha256sum "$HERE/relay.c" | cut -c1-12)
relay() {
  [ -z "${GUESTFWD_NETNS:-}" ] || printf 'ip netns exec %s ' "$GUESTFWD_NETNS"
  case ${GUESTFWD_RELAY:-cairn} in
    cairn) echo "$RELAY_BIN $1" ;;
    socat) echo "socat STDIO TCP:127.0.0.1:$1,,nodelay" ;;
    nc) echo "busybox nc 127.0.0.1 $1" ;;
    *) echo "run-guest: GUESTFWD_RELAY=$GUESTFWD_RELAY: want cairn, socat or nc" >&2; return 1 ;;
  esac
}

# build_relay: compile relay.c once per version of its source (gcc: under a second).
build_relay() {
  [ -x "$RELAY_BIN" ] && return 0
  mkdir -p "$(dirname "$RELAY_BIN")"
  if ! gcc -O2 -Wall -o "$RELAY_BIN.$$" "$HERE/relay.c"; then
    echo "run-guest: building $HERE/relay.c failed (needs gcc)" >&2; return 1
  fi
  mv "$RELAY_BIN.$$" "$RELAY_BIN"
}

start() {
  for f in vmlinuz initrd.cpio.gz rootfs.img; do
    [ -f "$G/$f" ] || { echo "run-guest: $G/$f missing: run build-guest.sh first" >&2; exit 1; }
  done
  if alive "$RUN/qemu.pid"; then
    echo "run-guest: a guest already runs from $RUN (pid $(cat "$RUN/qemu.pid")); stop it first" >&2; exit 1
  fi
  mkdir -p "$RUN"; rm -f "$RUN"/con.in "$RUN"/con.out; mkfifo "$RUN"/con.in "$RUN"/con.out
  : > "$RUN/serial.log"
  PORT=${PORT:-$(free_port)}; echo "$PORT" > "$RUN/port"
  local disk=()
  if [ -n "${CAIRN_DIR:-}" ]; then
    rm -f "$RUN/cairn.img"
    truncate -s $(( $(du -sm "$CAIRN_DIR" | cut -f1) + 32 ))M "$RUN/cairn.img"
    mkfs.ext4 -q -F -L cairn -d "$CAIRN_DIR" "$RUN/cairn.img"
    # shellcheck disable=SC2054 # commas inside qemu option values
    disk=(-drive "file=$RUN/cairn.img,if=none,id=d1,format=raw,cache=unsafe" -device virtio-blk-pci,drive=d1)
  fi
  local net="user,id=n0,restrict=on,hostfwd=tcp:127.0.0.1:${PORT}-:3260"
  if [ -n "${GUESTFWD:-}" ] && [ "${GUESTFWD_RELAY:-cairn}" = cairn ]; then build_relay; fi
  for fw in ${GUESTFWD:-}; do
    net="$net,guestfwd=tcp:${fw%%=*}-cmd:$(relay "${fw#*=}")"
  done
  local tapnic=()
  if [ -n "${TAP:-}" ]; then
    # shellcheck disable=SC2054 # commas inside qemu option values
    tapnic=(-netdev "tap,id=n1,ifname=$TAP,script=no,downscript=no" -device "virtio-net-pci,netdev=n1,romfile=${NET_OPTS:+,$NET_OPTS}")
  fi
  local t0; t0=$(now)
  qemu-system-x86_64 -accel tcg,thread=multi -cpu max -smp "${SMP:-2}" -m "${MEM:-1024}" \
    -nodefaults -display none -no-reboot \
    -kernel "$G/vmlinuz" -initrd "$G/initrd.cpio.gz" \
    -append "console=ttyS0 panic=-1 quiet tsc=reliable clocksource=tsc ${APPEND_EXTRA:-}" \
    -chardev pipe,id=con,path="$RUN/con" -serial chardev:con \
    -netdev "$net" -device "virtio-net-pci,netdev=n0,romfile=${NET_OPTS:+,$NET_OPTS}" "${tapnic[@]}" \
    -drive "file=$G/rootfs.img,if=none,id=d0,format=raw,snapshot=on" -device virtio-blk-pci,drive=d0 \
    "${disk[@]}" ${QEMU_EXTRA:-} \
    -pidfile "$RUN/qemu.pid" >"$RUN/qemu.log" 2>&1 &
  echo $! > "$RUN/qemu.pid"
  # drain the serial output (qemu blocks when the pipe fills); hold the input pipe open
  (exec cat "$RUN/con.out" >> "$RUN/serial.log") & echo $! > "$RUN/cat.pid"
  (exec sleep infinity > "$RUN/con.in") & echo $! > "$RUN/holder.pid"
  local i
  for i in $(seq 1 900); do
    grep -q GUEST-READY "$RUN/serial.log" 2>/dev/null && break
    if grep -q -E 'Kernel panic|GUEST-FAILED' "$RUN/serial.log" || ! alive "$RUN/qemu.pid"; then
      tail -40 "$RUN/serial.log" "$RUN/qemu.log" >&2; echo "run-guest: guest failed to boot" >&2; exit 1
    fi
    sleep 0.2
  done
  grep -q GUEST-READY "$RUN/serial.log" || { tail -40 "$RUN/serial.log" >&2; echo "run-guest: not ready after 180 s" >&2; exit 1; }
  sleep 0.5  # let the console shell start
  echo "guest ready on 127.0.0.1:$PORT after $(awk -v a="$t0" -v b="$(now)" 'BEGIN{printf "%.1f", b-a}') s (host clock); $(grep -o 'GUEST-READY.*' "$RUN/serial.log" | tr -d '\r')"
}

# cmd: one line in, output between two markers out. The console has echo off and no prompt.
cmd() {
  exec 9>"$RUN/cmd.lock"; flock 9
  local m="M$RANDOM$RANDOM" off i
  off=$(stat -c %s "$RUN/serial.log")
  printf '%s\n' "echo ${m}_S; { $*
} 2>&1; echo ${m}_E \$?" > "$RUN/con.in"
  for i in $(seq 1 $(( ${CMD_TIMEOUT:-600} * 10 ))); do
    tail -c +$((off+1)) "$RUN/serial.log" | grep -q "${m}_E" && break
    alive "$RUN/qemu.pid" || { echo "run-guest: guest died" >&2; return 1; }
    sleep 0.1
  done
  tail -c +$((off+1)) "$RUN/serial.log" | tr -d '\r' | awk -v m="$m" '
    index($0, m "_E") { split(substr($0, index($0, m "_E")), a, " "); rc = a[2]; done = 1; exit }
    on { print } index($0, m "_S") { on = 1 }
    END { exit (done ? rc : 124) }'
}

stop() {
  local f
  for f in qemu.pid cat.pid holder.pid; do
    if [ -f "$RUN/$f" ]; then kill "$(cat "$RUN/$f")" 2>/dev/null || true; rm -f "$RUN/$f"; fi
  done
}

case "${1:-}" in
  start) start ;;
  cmd) shift; cmd "$@" ;;
  stop) stop ;;
  *) echo "usage: $0 start|cmd 'command'|stop" >&2; exit 2 ;;
esac
