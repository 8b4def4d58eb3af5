#!/bin/bash
# fake-iscsi.sh start|stop STATEDIR - a stand-in for the LIO guest hook
# (tests/lio/bench-hook.sh) that follows the same contract (README.md) with
# tgt's userspace iSCSI target on 127.0.0.1: three LUNs on files, printed as
# lio-fileio, tcmu-runner and cairn-iscsi, and with FAKE_ISCSI_RBD=1 a fourth
# printed as the optional tcmu-rbd (the Ceph peer's line). It tests the
# harness's iSCSI plumbing (fio's libiscsi engine, URL escaping, hook parsing)
# without qemu. Never used for
# published figures. Needs Debian's tgt package.
set -euo pipefail
trap 'echo "fake-iscsi: line $LINENO: $BASH_COMMAND failed" >&2' ERR
cmd=${1:?usage: fake-iscsi.sh start|stop STATEDIR} state=${2:?statedir}
case $cmd in
  start)
    command -v tgtd >/dev/null || { echo "fake-iscsi: tgtd missing: apt-get install tgt" >&2; exit 1; }
    mkdir -p "$state"
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    ctl=$(( 20000 + RANDOM % 12000 ))   # (tgtadm accepts < 32768) tgtadm's control socket /var/run/tgtd/socket.$ctl
    size=${CAIRN_BENCH_VOLUME_MIB:-256}
    echo "$ctl" > "$state/ctl"
    setsid tgtd -f -C "$ctl" --iscsi "portal=127.0.0.1:$port" >"$state/tgtd.log" 2>&1 </dev/null &
    echo $! > "$state/pid"
    for i in $(seq 40); do tgtadm -C "$ctl" --lld iscsi --op show --mode sys >/dev/null 2>&1 && break; sleep 0.25; done
    tid=0
    luns="lio-fileio tcmu-runner cairn-iscsi"
    [ "${FAKE_ISCSI_RBD:-0}" != 1 ] || luns="$luns tcmu-rbd"
    for t in $luns; do
      tid=$((tid + 1))
      truncate -s "${size}M" "$state/$t.img"
      iqn=iqn.2026-11.test.cairn:$t
      tgtadm -C "$ctl" --lld iscsi --op new --mode target --tid $tid -T "$iqn"
      tgtadm -C "$ctl" --lld iscsi --op new --mode logicalunit --tid $tid --lun 1 -b "$state/$t.img"
      tgtadm -C "$ctl" --lld iscsi --op bind --mode target --tid $tid -I 127.0.0.1
      echo "target $t iscsi://127.0.0.1:$port/$iqn/1"
    done
    echo "pid tgtd $(cat "$state/pid")"
    ;;
  stop)
    [ -f "$state/pid" ] || exit 0
    pid=$(cat "$state/pid")
    tgtadm -C "$(cat "$state/ctl")" --op update --mode sys --name State -v offline >/dev/null 2>&1 || true
    kill "$pid" 2>/dev/null || true
    # (a reaped-by-nobody zombie counts as gone)
    for i in $(seq 20); do grep -q '^State:.*[ZX]' /proc/$pid/status 2>/dev/null && break; kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
    kill -9 "$pid" 2>/dev/null || true
    rm -f "$state/pid" "$state"/*.img
    ;;
  *) echo "unknown command $cmd" >&2; exit 2 ;;
esac
