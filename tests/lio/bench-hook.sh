#!/bin/bash
# bench-hook.sh start|stop STATEDIR - the benchmark harness's iSCSI hook
# (CAIRN_ISCSI_HOOK, contract in tests/bench/README.md).
#
# start: builds (or reuses) the LIO guest, runs a Cairn cluster on the host
# (cairn-cluster.sh: 3 SDSs, 2 copies), boots the guest under qemu (TCG) with
# the cluster reachable from the guest (BENCH_GUEST_NET below), exports a LIO fileio LUN
# (guest-fileio.sh, a file on the guest's tmpfs), a tcmu-runner LUN
# (guest-runner.sh: Debian's tcmu-runner, qcow2 image on tmpfs, LIO user
# backstore) and the Cairn volume through `cairn target` (TCMU `user:`
# backstore), waits until all three answer INQUIRY from fio's libiscsi
# initiator name, and prints
#   target lio-fileio  iscsi://127.0.0.1:PORT/IQN/0
#   target tcmu-runner iscsi://127.0.0.1:PORT/IQN/0
#   target cairn-iscsi iscsi://127.0.0.1:PORT/IQN/0
#   pid qemu PID                      (the guest: counts for every target)
#   pid mdm1|sds1|... PID cairn-iscsi (Cairn's host processes)
#   pid guestfwd-N PID cairn-iscsi    (qemu's per-connection relays (run-guest.sh)
#                                      between the guest and the host's SDSs)
# Everything it starts is recorded under STATEDIR; on failure it stops what it
# started before exiting non-zero.
# stop: stops the guest and the cluster by their recorded pids; idempotent.
#
# Env: BENCH_TARGET_B_FLAGS (unset: nothing): a second `cairn target` in the same
# guest (own IQN, backstores, ring and relative port 2), with these extra flags,
# exports the same volume; start also prints "target cairn-iscsi-b URL" (a
# same-guest A/B of two target settings: tests/bench/iscsi-ab.sh).
# CAIRN_BENCH_VOLUME_MIB (256: size of each LUN, at least), BENCH_GUEST_SMP
# (vCPUs, 1: under TCG on this 2-core machine one vCPU gave both LUNs about twice
# the IOPS of two, whose cross-vCPU wake-ups are emulated), BENCH_GUEST_MEM (MiB,
# 1024 + the fileio and tcmu-runner LUNs), LIO_HOOK_TIMEOUT (s, 170: the harness kills the hook at
# CAIRN_START_TIMEOUT, 180 s); run-guest.sh's NET_OPTS, GUESTFWD_RELAY.
# BENCH_GUEST_NET: how the guest's `cairn target` reaches the cluster:
#   slirp (default): qemu's user net (guestfwd, one relay process per
#          connection): no offloads, every segment through libslirp's TCP in
#          qemu's main loop.
#   tap:   the cluster runs in a network namespace of its own (made here, removed
#          by stop) and the guest has a second virtio NIC on a tap device in it,
#          with checksum and segmentation offloads, as a VM's NIC on an ESXi host
#          has (VMXNET3); nft in the namespace hands 10.0.2.100 to its loopback.
#   The iSCSI traffic of all three targets takes qemu's user net either way
#   (fio runs on the host). BENCH_SLIRP_ADDR (tap only; unset: nothing): the
#   cluster's ports are also forwarded through qemu's user net at this guest
#   address (relays in the namespace), for a same-guest A/B of the two paths:
#   iscsi-ab.sh "--sds-addr-map 127.0.0.1=ADDR". Two such A/Bs showed no gain
#   of tap beyond the spread between guests (docs/benchmarks.md, "iSCSI: the
#   guest's NIC"); slirp stays this hook's default, and `make bench` (full, as
#   root) asks for tap, which the Ceph peer below needs.
# BENCH_RBD_PEER=1 (tap only; unset: nothing): a networked, mirrored TCMU peer
#   beside Cairn's: a Ceph cluster (tests/lib/ceph.sh: 1 mon, 1 mgr, 3 OSDs, 2
#   copies) in the cluster's namespace at 10.0.4.1, reached by the guest over
#   the tap NIC, and tcmu-runner's rbd handler (librbd) on its image behind the
#   same TCMU ring; start also prints "target tcmu-rbd URL" and the Ceph
#   daemons' pids for it. Raises LIO_HOOK_TIMEOUT's default to 290 s (the
#   harness waits 120 s longer for it).
set -euo pipefail
# HERE, REPO, LIO_CACHE, common.sh
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
cmd=${1:-} STATE=${2:-}
[ -n "$cmd" ] && [ -n "$STATE" ] || { echo "usage: bench-hook.sh start|stop STATEDIR" >&2; exit 2; }
mkdir -p "$STATE"
STATE=$(cd "$STATE" && pwd)
export RUN=$STATE/guest
CL_STATE=$STATE/cluster
FIO_INI=iqn.2019-04.org.fio:fio   # fio's libiscsi engine logs in with this name
INI1=iqn.2007-10.com.github:sahlberg:libiscsi:iscsi-test
FILEIO_IQN=iqn.2003-01.org.linux-iscsi.cairn-test:fileio
RUNNER_IQN=iqn.2003-01.org.linux-iscsi.cairn-test:tcmu-runner
RBD_IQN=iqn.2003-01.org.linux-iscsi.cairn-test:tcmu-rbd
RBD_ADDR=10.0.4.1   # the Ceph peer's address, on its namespace's loopback
CAIRN_IQN=iqn.2026-01.io.cairn:svm-bench
MIB=${CAIRN_BENCH_VOLUME_MIB:-256}
NET=${BENCH_GUEST_NET:-slirp}
case $NET in slirp|tap) ;; *) echo "bench-hook: BENCH_GUEST_NET=$NET: want tap or slirp" >&2; exit 2 ;; esac
RBD=${BENCH_RBD_PEER:-0}
case $RBD in 0|1) ;; *) echo "bench-hook: BENCH_RBD_PEER=$RBD: want 1 or 0" >&2; exit 2 ;; esac
if [ "$RBD" = 1 ] && [ "$NET" != tap ]; then
  echo "bench-hook: BENCH_RBD_PEER=1 needs BENCH_GUEST_NET=tap (Ceph's daemons advertise their own addresses, which the guest reaches only over the tap NIC)" >&2; exit 2
fi
log() { echo "[bench-hook $(date +%H:%M:%S)] $*" >&2; }

stop() {
  if alive "$RUN/qemu.pid"; then
    # keep the target's log (the guest's /tmp goes with it) for diagnosis
    CMD_TIMEOUT=10 timeout 15 "$HERE/run-guest.sh" cmd "tail -200 /tmp/cairn-target.log" > "$STATE/cairn-target.log" 2>&1 || true
  fi
  [ -d "$RUN" ] && "$HERE/run-guest.sh" stop >/dev/null 2>&1 || true
  if [ -d "$CL_STATE/pids" ]; then
    "$REPO/tests/lib/cluster.sh" stop "$CL_STATE" >/dev/null 2>&1 || true
  fi
  # a start still under way first (its own trap stops what it started)
  if [ -f "$STATE/ceph-start.pid" ]; then kill "$(cat "$STATE/ceph-start.pid")" 2>/dev/null || true; rm -f "$STATE/ceph-start.pid"; fi
  [ ! -d "$STATE/ceph" ] || "$REPO/tests/lib/ceph.sh" stop "$STATE/ceph" >/dev/null 2>&1 || true
  # the namespace takes its tap device with it; a tap not moved yet stays behind
  if [ -f "$STATE/netns" ]; then ip netns del "$(cat "$STATE/netns")" 2>/dev/null || true; rm -f "$STATE/netns"; fi
  if [ -f "$STATE/tap" ]; then ip link del "$(cat "$STATE/tap")" 2>/dev/null || true; rm -f "$STATE/tap"; fi
  # the cluster's device files and the guest's scratch images are large
  rm -rf "$CL_STATE/devices" "$RUN/cairn.img"
}

# net_up: the host's end of the guest's tap NIC, once qemu has opened it: the
# device moves into the cluster's namespace (10.0.3.1), where connections to
# 10.0.2.100 (the address the MDM's certificate and the target's flags name)
# go to the namespace's loopback; the guest routes 10.0.2.100 through eth1.
net_up() {
  local ns tap; ns=$(cat "$STATE/netns") tap=$(cat "$STATE/tap")
  ip link set "$tap" netns "$ns"
  rm -f "$STATE/tap"   # it goes with the namespace from now on
  ip -n "$ns" addr add 10.0.3.1/24 dev "$tap"
  ip -n "$ns" link set "$tap" up
  ip netns exec "$ns" sysctl -qw net.ipv4.conf.all.route_localnet=1 "net.ipv4.conf.$tap.route_localnet=1"
  ip netns exec "$ns" nft -f - <<EOF
table ip cairnbench {
  chain pre { type nat hook prerouting priority dstnat; iifname "$tap" ip daddr 10.0.2.100 dnat to 127.0.0.1; }
}
EOF
  # the guest's rootfs has no iproute2: the host's static busybox (build-guest.sh's) is on /cairn
  CMD_TIMEOUT=30 "$HERE/run-guest.sh" cmd "busybox ip addr add 10.0.3.15/24 dev eth1 && busybox ip link set eth1 up && busybox ip route add 10.0.2.100/32 via 10.0.3.1 dev eth1 && busybox ip route add $RBD_ADDR/32 via 10.0.3.1 dev eth1" > "$STATE/guest-net.log"
}

# ceph_client_conf: what librbd in the guest reads (/cairn/ceph-client.conf):
# the monitor at RBD_ADDR, no authentication, logging off, no client cache (as
# the ceph-rbd target on the host has).
ceph_client_conf() {
  local d
  printf '[global]\nmon_host = v2:%s:3300\nauth_cluster_required = none\nauth_service_required = none\nauth_client_required = none\nms_bind_ipv6 = false\nlog_file = /tmp/ceph-client.log\n' "$RBD_ADDR"
  for d in ms objecter rados rbd monc auth; do echo "debug_$d = 0/0"; done
  printf '[client]\nrbd_cache = false\n'
}

# ceph_wait: the Ceph peer's start (begun in the background before the guest
# booted) finished well; its output (conf, pid lines) is in STATE/ceph-start.out.
ceph_wait() {
  local pid; pid=$(cat "$STATE/ceph-start.pid")
  while pid_alive "$pid"; do
    [ "$(left)" -gt 1 ] || { log "the Ceph peer was not up in time: see $STATE/ceph-start.err"; return 1; }
    sleep 1
  done
  wait "$pid" || { cat "$STATE/ceph-start.err" >&2; log "the Ceph peer did not start: see $STATE/ceph-start.err and $STATE/ceph/logs"; return 1; }
  rm -f "$STATE/ceph-start.pid"
}

start() {
  local deadline=$(( $(date +%s) + ${LIO_HOOK_TIMEOUT:-$([ "$RBD" = 1 ] && echo 290 || echo 170)} ))
  left() { local l=$(( deadline - $(date +%s) )); echo $(( l > 1 ? l : 1 )); }  # (timeout 0 = no limit)
  # shellcheck disable=SC2154 # rc is assigned inside the trap
  trap 'rc=$?; if [ $rc != 0 ]; then log "start failed (rc=$rc): stopping what it started; logs in $STATE"; stop; fi' EXIT
  if alive "$RUN/qemu.pid"; then
    log "a guest from $STATE still runs: stop it first"; return 1
  fi
  # a previous run's cluster (stopped) is not resumed: a fresh one each time
  stop; rm -rf "$CL_STATE"
  mkdir -p "$STATE/stage"
  log "guest image (cached in $LIO_CACHE/guest) and the static cairn binary"
  timeout "$(left)" bash -c '. "$1/lib.sh"; lio_build_guest "$2"' _ "$HERE" "$STATE/build-guest.log"
  timeout "$(left)" bash -c '. "$1/lib.sh"; lio_build_cairn "$2"' _ "$HERE" "$STATE/stage" \
    > "$STATE/build-cairn.log" 2>&1 || { cat "$STATE/build-cairn.log" >&2; return 1; }
  install -m 755 "$HERE/guest-fileio.sh" "$HERE/guest-export.sh" "$HERE/guest-runner.sh" "$STATE/stage/"
  [ "$NET" != tap ] || install -m 755 "$(command -v busybox)" "$STATE/stage/busybox"
  [ "$RBD" != 1 ] || ceph_client_conf > "$STATE/stage/ceph-client.conf"
  # tcmu-runner's LUN: a qcow2 image (its qcow handler is Debian's only disk handler but rbd)
  # with every cluster allocated: its cluster allocation needs a fallocate mode tmpfs lacks
  qemu-img create -q -f qcow2 -o preallocation=metadata "$STATE/stage/runner0.qcow2" "${MIB}M"

  if [ "$NET" = tap ]; then
    [ "$(id -u)" = 0 ] || { log "BENCH_GUEST_NET=tap needs root (a network namespace, a tap device): run as root or with BENCH_GUEST_NET=slirp"; return 1; }
    command -v nft >/dev/null && command -v ip >/dev/null ||
      { log "BENCH_GUEST_NET=tap needs ip and nft (Debian's iproute2 and nftables: scripts/deps.sh bench installs them), or use BENCH_GUEST_NET=slirp"; return 1; }
    local ns=cairn-bench-$$ tap=cbtap$$
    echo "$ns" > "$STATE/netns"; ip netns add "$ns"; ip -n "$ns" link set lo up
    echo "$tap" > "$STATE/tap"; ip tuntap add dev "$tap" mode tap
    export CLUSTER_NETNS=$ns
    if [ "$RBD" = 1 ]; then
      ip -n "$ns" addr add "$RBD_ADDR/32" dev lo
      log "Ceph peer in namespace $ns at $RBD_ADDR (in the background; $STATE/ceph)"
      CEPH_ADDR=$RBD_ADDR CEPH_NETNS=$ns CEPH_IMAGE_MIB=$MIB \
        "$REPO/tests/lib/ceph.sh" start "$STATE/ceph" > "$STATE/ceph-start.out" 2> "$STATE/ceph-start.err" &
      echo $! > "$STATE/ceph-start.pid"
    fi
  fi
  log "Cairn cluster on the host ($CL_STATE${CLUSTER_NETNS:+, namespace $CLUSTER_NETNS})"
  # cairn-cluster.sh exits the shell on failure: run it in a subshell first
  # would lose its variables, so it is sourced; CL_STATE keeps it in STATEDIR.
  local vol_mib=$(( MIB > 1024 ? MIB : 1024 ))
  CLUSTER_VOLUME_SIZE=${vol_mib}MiB CLUSTER_INITIATORS="$FIO_INI $INI1" CAIRN_STAGE=$STATE/stage
  # shellcheck source=cairn-cluster.sh
  . "$HERE/cairn-cluster.sh"
  local tapdev=""
  if [ "$NET" = tap ]; then
    tapdev=$(cat "$STATE/tap")
    # the tap NIC carries 10.0.2.100: cairn-cluster.sh's forwards move to
    # BENCH_SLIRP_ADDR, or go when it is unset
    GUESTFWD=${BENCH_SLIRP_ADDR:+${GUESTFWD//10.0.2.100:/$BENCH_SLIRP_ADDR:}}
    export GUESTFWD GUESTFWD_NETNS=$CLUSTER_NETNS
    log "booting the guest (${BENCH_GUEST_SMP:-1} vCPU, the cluster through tap $tapdev${BENCH_SLIRP_ADDR:+ and through the user net at $BENCH_SLIRP_ADDR})"
  else
    export GUESTFWD
    log "booting the guest (${BENCH_GUEST_SMP:-1} vCPU, the cluster through qemu's user net, relays: ${GUESTFWD_RELAY:-cairn})"
  fi
  local mem=${BENCH_GUEST_MEM:-$(( 1024 + 2 * MIB ))}   # the fileio file and the qcow2 image live on tmpfs
  CAIRN_DIR=$STATE/stage SMP=${BENCH_GUEST_SMP:-1} MEM=$mem TAP=$tapdev \
    timeout "$(left)" "$HERE/run-guest.sh" start > "$STATE/boot.log" 2>&1 || { cat "$STATE/boot.log" >&2; return 1; }
  [ "$NET" != tap ] || net_up
  local port; port=$(cat "$RUN/port")
  g() { CMD_TIMEOUT=$(left) "$HERE/run-guest.sh" cmd "$@"; }
  g "/cairn/guest-fileio.sh $FILEIO_IQN $MIB" > "$STATE/guest-fileio.log"
  g "/cairn/guest-runner.sh $RUNNER_IQN qcow /cairn/runner0.qcow2" > "$STATE/guest-runner.log"
  g "nohup $CAIRN_TARGET_CMD > /tmp/cairn-target.log 2>&1 &"
  local rbd_url=""
  if [ "$RBD" = 1 ]; then
    ceph_wait
    rbd_url=iscsi://127.0.0.1:$port/$RBD_IQN/0
    g "/cairn/guest-runner.sh $RBD_IQN rbd rbd/bench $MIB /cairn/ceph-client.conf" > "$STATE/guest-rbd.log" ||
      { cat "$STATE/guest-rbd.log" >&2; g "tail -20 /var/log/tcmu-runner.log; tail -20 /tmp/ceph-client.log" >&2 || true; log "tcmu-runner's rbd LUN did not start"; return 1; }
  fi
  local lio_url=iscsi://127.0.0.1:$port/$FILEIO_IQN/0 cairn_url=iscsi://127.0.0.1:$port/$CAIRN_IQN/0
  local runner_url=iscsi://127.0.0.1:$port/$RUNNER_IQN/0 b_url=""
  if [ -n "${BENCH_TARGET_B_FLAGS+x}" ]; then
    b_url=iscsi://127.0.0.1:$port/$CAIRN_IQN-b/0
    g "nohup ${CAIRN_TARGET_CMD/--iqn $CAIRN_IQN/--iqn $CAIRN_IQN-b --port-number 2 --backstore-prefix cairn-b- $BENCH_TARGET_B_FLAGS} > /tmp/cairn-target-b.log 2>&1 &"
  fi
  if ! lio_wait_lun "$FIO_INI" "$cairn_url" "$(left)" "$STATE/cairn-inq.txt"; then
    cat "$STATE/cairn-inq.txt" >&2; g "tail -20 /tmp/cairn-target.log" >&2 || true
    log "the Cairn LUN does not answer at $cairn_url"; return 1
  fi
  lio_wait_lun "$FIO_INI" "$lio_url" 10 "$STATE/lio-inq.txt" ||
    { cat "$STATE/lio-inq.txt" >&2; log "the LIO fileio LUN does not answer at $lio_url"; return 1; }
  if ! lio_wait_lun "$FIO_INI" "$runner_url" 20 "$STATE/runner-inq.txt"; then
    cat "$STATE/runner-inq.txt" "$STATE/guest-runner.log" >&2; g "tail -5 /tmp/tcmu-runner.log; tail -20 /var/log/tcmu-runner.log" >&2 || true
    log "the tcmu-runner LUN does not answer at $runner_url"; return 1
  fi
  if [ -n "$rbd_url" ] && ! lio_wait_lun "$FIO_INI" "$rbd_url" 30 "$STATE/rbd-inq.txt"; then
    cat "$STATE/rbd-inq.txt" >&2; g "tail -20 /var/log/tcmu-runner.log" >&2 || true
    log "the tcmu-runner rbd LUN does not answer at $rbd_url"; return 1
  fi
  if [ -n "$b_url" ] && ! lio_wait_lun "$FIO_INI" "$b_url" "$(left)" "$STATE/cairn-b-inq.txt"; then
    cat "$STATE/cairn-b-inq.txt" >&2; g "tail -20 /tmp/cairn-target-b.log" >&2 || true
    log "the second Cairn LUN (BENCH_TARGET_B_FLAGS) does not answer at $b_url"; return 1
  fi
  log "the LUNs answer ($(tail -1 "$STATE/guest-runner.log" | tr -d '\r')); guest: $(head -1 "$STATE/boot.log")"

  echo "target lio-fileio $lio_url"
  echo "target tcmu-runner $runner_url"
  echo "target cairn-iscsi $cairn_url"
  [ -z "$b_url" ] || echo "target cairn-iscsi-b $b_url"
  [ -z "$rbd_url" ] || echo "target tcmu-rbd $rbd_url"
  local qemu f n p
  qemu=$(cat "$RUN/qemu.pid")
  echo "pid qemu $qemu"
  for f in "$CL_STATE"/pids/*.pid; do
    n=$(basename "$f" .pid)
    case $n in mdm*|sds*) echo "pid $n $(cat "$f") cairn-iscsi" ;; esac
  done
  [ -z "$rbd_url" ] || sed -n 's/^pid \(.*\)/pid \1 tcmu-rbd/p' "$STATE/ceph-start.out"
  # qemu's guestfwd relays (one relay process per guest connection, reparented
  # to init) exist once the target talked to every SDS: a second of random
  # reads opens those connections, then they are found by their command line
  # (the cluster's own ports).
  timeout 20 iscsi-perf -i "$FIO_INI" -m 4 -b 8 -r -t 1 "$cairn_url" > "$STATE/warmup.log" 2>&1 || true
  local fw ports=()
  for fw in $GUESTFWD; do ports+=("${fw#*=}"); done
  n=0
  for p in $(lio_relay_pids "${ports[@]}"); do
    n=$((n + 1)); echo "pid guestfwd-$n $p cairn-iscsi"
  done
  trap - EXIT
}

case $cmd in
  start) start ;;
  stop) stop ;;
  *) echo "unknown command $cmd (start, stop)" >&2; exit 2 ;;
esac
