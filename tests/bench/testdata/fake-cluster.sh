#!/bin/bash
# fake-cluster.sh start|stop STATEDIR [--sds N] [--devices-per-sds M] - a stand-in for tests/lib/cluster.sh
# that follows the same contract (README.md) with nbdkit's memory plugin, so the
# harness's plumbing (hook parsing, pid accounting, cleanup, scaling loop) is
# tested without Cairn. Never used for published figures.
set -euo pipefail
cmd=${1:?usage: fake-cluster.sh start|stop STATEDIR [--sds N] [--devices-per-sds M]} state=${2:?statedir}
shift 2
sds=3 devs=2
while [ $# -gt 0 ]; do
  case $1 in
    --sds) sds=$2; shift 2 ;;
    --devices-per-sds) devs=$2; shift 2 ;;
    *) echo "fake-cluster: unknown option $1" >&2; exit 2 ;;
  esac
done
case $cmd in
  start)
    mkdir -p "$state"
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    size=${CAIRN_BENCH_VOLUME_MIB:-256}
    # Without -f nbdkit daemonizes once listening (a daemon that outlives this
    # script, like the real cluster's) and writes its pid file.
    nbdkit -P "$state/pid" -i 127.0.0.1 -p "$port" memory "${size}M" >"$state/nbdkit.log" 2>&1 </dev/null
    echo "fake cluster with $sds SDS x $devs devices (nbdkit memory ${size}M)"
    echo "nbd://127.0.0.1:$port/"
    echo "pid nbdkit $(cat "$state/pid")"
    ;;
  stop)
    [ -f "$state/pid" ] || exit 0
    kill "$(cat "$state/pid")" 2>/dev/null || true
    rm -f "$state/pid"
    ;;
  *) echo "unknown command $cmd" >&2; exit 2 ;;
esac
