#!/usr/bin/env bash
# A Cairn cluster for chaos tests: like tests/lib/cluster.sh, but every SDS
# runs in its own network namespace with its own address, so a test can
# partition it (nft drop inside its namespace) or kill it alone.
#
#   netcluster.sh start STATEDIR [--sds N] [--fault-sets K] [--devices-per-sds M]
#                                [--device-size SIZE] [--volume-size SIZE]
#   netcluster.sh stop STATEDIR          kill every daemon (by pid), delete the namespaces
#   netcluster.sh status STATEDIR
#   netcluster.sh exec STATEDIR NS CMD...   run CMD in namespace NS (core, hub, sds1...)
#   netcluster.sh ctl STATEDIR ARGS...      cairnctl in the core namespace
#   netcluster.sh kill STATEDIR DAEMON [SIG]  (mdm1..3, sdsN, gateway, nbd; default KILL);
#                                             prints the Unix ms the signal was sent
#   netcluster.sh restart STATEDIR DAEMON     start a killed daemon again (same data)
#   netcluster.sh partition STATEDIR sdsN     drop every packet in and out of sdsN's namespace
#   netcluster.sh heal STATEDIR sdsN          remove that drop
#   netcluster.sh attach STATEDIR NAME IP     a namespace NAME of its own on the cluster's bridge at IP
#                                             (10.231.0.x), nothing in it (the rogue-client test's attacker)
#
# Topology (all of it inside namespaces named <prefix>-<role>, prefix
# "cairnchaos-<pid of start>"; the root namespace gets no address, no route
# and no interface):
#
#   <prefix>-hub    a bridge br0 (no address)
#   <prefix>-core   10.231.0.1/24: 3 MDMs (etcd), gateway (on its 127.0.0.1),
#                   NBD server (on its 127.0.0.1), fio and cairnctl run here
#   <prefix>-sdsN   10.231.0.(10+N)/24: one SDS
#
# Each of core and sdsN has a veth "eth0" whose peer sits in the hub, on the
# bridge. Ports are fixed: every namespace has its own port space.
#
# STATEDIR/env is a sourceable file describing the cluster (PREFIX, CORE,
# NBD_URI, MDM, SDS_COUNT, FAULT_SETS, ...). Daemon logs: STATEDIR/logs/.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# shellcheck source=../lib/common.sh
. "$ROOT/tests/lib/common.sh"
BIN=${CAIRN_BIN:-$ROOT/appliance/bin}
CAIRN=$BIN/cairn
CTL=$BIN/cairnctl
SUBNET=10.231.0
CORE_IP=$SUBNET.1
GW_PORT=8443
NBD_PORT=10809

die() { echo "netcluster.sh: $*" >&2; exit 1; }
say() { echo "[$(date +%H:%M:%S)] $*" >&2; }

cmd=${1:-}; STATE=${2:-}
[ -n "$cmd" ] && [ -n "$STATE" ] || die "usage: netcluster.sh start|stop|status|exec|ctl|kill|restart|partition|heal STATEDIR ..."
shift 2
mkdir -p "$STATE"
STATE=$(cd "$STATE" && pwd)

sds_ip() { echo "$SUBNET.$((10 + $1))"; }
mdm_client_port() { echo $((2279 + 100 * $1)); } # 2379, 2479, 2579
mdm_peer_port() { echo $((2280 + 100 * $1)); }   # 2380, 2480, 2580

load_env() {
	[ -f "$STATE/env" ] || die "no cluster in $STATE (run start first)"
	# shellcheck disable=SC1091
	source "$STATE/env"
}

nsname() { echo "$PREFIX-$1"; }
nsexec() { local ns=$1; shift; ip netns exec "$(nsname "$ns")" "$@"; }

# daemon_cmd NAME prints the namespace and command line of a daemon.
daemon_ns() {
	case $1 in
	sds*) echo "$1" ;;
	*) echo core ;;
	esac
}
daemon_cmd() {
	local n
	case $1 in
	mdm[123])
		n=${1#mdm}
		echo "$CAIRN" mdm --name "$1" --data-dir "$STATE/$1" --pki "$STATE/pki/$1" \
			--client-url "https://$CORE_IP:$(mdm_client_port "$n")" \
			--peer-url "https://$CORE_IP:$(mdm_peer_port "$n")" --initial-cluster "$INITIAL"
		;;
	gateway) echo "$CAIRN" gateway --pki "$STATE/pki/gateway" --mdm "$MDM" --listen "0.0.0.0:$GW_PORT" --state-dir "$STATE/gateway" ;;
	nbd) echo "$CAIRN" nbd --pki "$STATE/pki/nbd-local" --mdm "$MDM" --host local --listen "127.0.0.1:$NBD_PORT" --tls off --allow-plain-loopback ;;
	sds*)
		n=${1#sds}
		# CAIRN_FAULT_INJECTION: a device fails (EIO) while <path>.fail exists.
		echo env CAIRN_FAULT_INJECTION=1 "$CAIRN" sds --mdm "$MDM" --name "$1" --pki "$STATE/pki/$1" --listen "$(sds_ip "$n"):7100" --state-dir "$STATE/$1"
		;;
	*) die "unknown daemon $1" ;;
	esac
}

# spawn_daemon NAME: start a daemon in its namespace (see spawn in common.sh).
spawn_daemon() {
	# shellcheck disable=SC2046
	spawn --netns "$(nsname "$(daemon_ns "$1")")" "$STATE" "$1" $(daemon_cmd "$1")
}

# wait_daemon_port NAME HOST PORT: the daemon listens, seen from the core
# namespace, within 30 s.
wait_daemon_port() {
	wait_port --netns "$(nsname core)" --pidfile "$STATE/pids/$1.pid" --log "$STATE/logs/$1.log" "$2" "$3" 30 "$1"
}

ctl() { nsexec core env CAIRNCTL_CONFIG="$STATE/cairnctl.json" "$CTL" "$@"; }

stop_all() {
	local pid ns
	stop_pidfiles 5 "$STATE"/pids/*.pid
	[ -f "$STATE/namespaces" ] || return 0
	# Anything still running inside our namespaces (fio, a cairnctl) was
	# started by this harness: end it so the namespace can go.
	while read -r ns; do
		[ -n "$ns" ] || continue
		for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null || true; done
	done <"$STATE/namespaces"
	while read -r ns; do
		[ -n "$ns" ] || continue
		ip netns del "$ns" 2>/dev/null || true
	done <"$STATE/namespaces"
	rm -f "$STATE/namespaces"
}

make_net() {
	local ns i
	: >"$STATE/namespaces"
	for ns in hub core $(for ((i = 1; i <= SDS_COUNT; i++)); do echo "sds$i"; done); do
		ip netns add "$(nsname "$ns")" || die "cannot create namespace $(nsname "$ns") (root needed)"
		nsname "$ns" >>"$STATE/namespaces"
		ip -n "$(nsname "$ns")" link set lo up
	done
	ip -n "$(nsname hub)" link add br0 type bridge
	ip -n "$(nsname hub)" link set br0 up
	plug() { # ns ip hub-side-name
		ip -n "$(nsname hub)" link add "$3" type veth peer name eth0 netns "$(nsname "$1")"
		ip -n "$(nsname hub)" link set "$3" master br0 up
		ip -n "$(nsname "$1")" addr add "$2/24" dev eth0
		ip -n "$(nsname "$1")" link set eth0 up
	}
	plug core "$CORE_IP" core
	for ((i = 1; i <= SDS_COUNT; i++)); do plug "sds$i" "$(sds_ip "$i")" "sds$i"; done
}

case $cmd in
stop)
	if [ -f "$STATE/env" ]; then load_env; fi
	stop_all
	say "cluster in $STATE stopped, namespaces deleted"
	exit 0
	;;
status)
	load_env
	pidfile_status "$STATE"
	exit 0
	;;
exec)
	load_env
	ns=${1:?namespace}; shift
	nsexec "$ns" "$@"
	exit
	;;
ctl)
	load_env
	ctl "$@"
	exit
	;;
kill)
	load_env
	d=${1:?daemon}; sig=${2:-KILL}
	alive "$STATE/pids/$d.pid" || die "$d is not running"
	date +%s%3N # when the signal went: the start of a failure measure
	kill -"$sig" "$(cat "$STATE/pids/$d.pid")"
	if [ "$sig" = KILL ] || [ "$sig" = 9 ]; then
		while alive "$STATE/pids/$d.pid"; do sleep 0.05; done
	fi
	exit 0
	;;
restart)
	load_env
	d=${1:?daemon}
	spawn_daemon "$d"
	exit 0
	;;
attach)
	load_env
	n=${1:?name}; ip=${2:?ip}
	case $ip in "$SUBNET".*) ;; *) die "attach: $ip is not in $SUBNET.0/24" ;; esac
	ip netns add "$(nsname "$n")" || die "cannot create namespace $(nsname "$n")"
	nsname "$n" >>"$STATE/namespaces"
	ip -n "$(nsname "$n")" link set lo up
	ip -n "$(nsname hub)" link add "$n" type veth peer name eth0 netns "$(nsname "$n")"
	ip -n "$(nsname hub)" link set "$n" master br0 up
	ip -n "$(nsname "$n")" addr add "$ip/24" dev eth0
	ip -n "$(nsname "$n")" link set eth0 up
	exit 0
	;;
partition | heal)
	load_env
	d=${1:?sdsN}
	[ -f "$STATE/pids/$d.pid" ] || die "no daemon $d"
	if [ "$cmd" = partition ]; then
		date +%s%3N
		# A drop, not a reject: peers see silence, as with a pulled cable.
		nsexec "$d" nft -f - <<-'EOF'
			table inet chaos {
				chain in { type filter hook input priority -100; policy accept; iifname "eth0" drop; }
				chain out { type filter hook output priority -100; policy accept; oifname "eth0" drop; }
			}
		EOF
	else
		nsexec "$d" nft delete table inet chaos
	fi
	exit 0
	;;
start) ;;
*) die "unknown command $cmd" ;;
esac

SDS_COUNT=3 FAULT_SETS=0 DEVS=2 DEV_SIZE=8G VOL_SIZE=8GiB VOL=vol1
while [ $# -gt 0 ]; do
	case $1 in
	--sds) SDS_COUNT=$2; shift 2 ;;
	--fault-sets) FAULT_SETS=$2; shift 2 ;;
	--devices-per-sds) DEVS=$2; shift 2 ;;
	--device-size) DEV_SIZE=$2; shift 2 ;;
	--volume-size) VOL_SIZE=$2; shift 2 ;;
	*) die "unknown option $1" ;;
	esac
done
[ -x "$CAIRN" ] && [ -x "$CTL" ] || die "binaries missing in $BIN: run 'make build' first"
[ "$(id -u)" = 0 ] || die "network namespaces need root"
[ ! -f "$STATE/env" ] || die "$STATE already holds a cluster (stop it first)"
mkdir -p "$STATE/logs" "$STATE/pids" "$STATE/devices"

PREFIX=${CAIRN_CHAOS_PREFIX:-cairnchaos-$$}
MDM=https://$CORE_IP:2379,https://$CORE_IP:2479,https://$CORE_IP:2579
INITIAL=mdm1=https://$CORE_IP:2380,mdm2=https://$CORE_IP:2480,mdm3=https://$CORE_IP:2580
{
	echo "PREFIX=$PREFIX"
	echo "CORE=$PREFIX-core"
	echo "CORE_IP=$CORE_IP"
	echo "MDM=$MDM"
	echo "INITIAL=$INITIAL"
	echo "SDS_COUNT=$SDS_COUNT"
	echo "FAULT_SETS=$FAULT_SETS"
	echo "DEVS=$DEVS"
	echo "VOL=$VOL"
	echo "NBD_URI=nbd://127.0.0.1:$NBD_PORT/$VOL"
	echo "CAIRNCTL_CONFIG=$STATE/cairnctl.json"
} >"$STATE/env"

# A failed start leaves nothing behind.
# shellcheck disable=SC2154 # rc is assigned inside the trap
trap 'rc=$?; if [ $rc -ne 0 ]; then say "start failed; cleaning up"; stop_all; rm -f "$STATE/env"; fi' EXIT

t0=$(date +%s%N)
# Certificates (daemon_cmd names their directories): issued once, in the
# root namespace, before anything starts.
for i in 1 2 3; do pki_dir "$STATE" mdm "mdm$i" "$CORE_IP,127.0.0.1,localhost" >/dev/null; done
pki_dir "$STATE" gateway gateway "$CORE_IP,127.0.0.1,localhost" >/dev/null
pki_dir "$STATE" nbd nbd-local "$CORE_IP,127.0.0.1,localhost" >/dev/null
for ((i = 1; i <= SDS_COUNT; i++)); do pki_dir "$STATE" sds "sds$i" "$(sds_ip "$i")" >/dev/null; done
make_net
say "namespaces $PREFIX-{hub,core,sds1..$SDS_COUNT} up"
for i in 1 2 3; do spawn_daemon "mdm$i"; done
for i in 1 2 3; do wait_daemon_port "mdm$i" "$CORE_IP" "$(mdm_client_port "$i")"; done
spawn_daemon gateway
wait_daemon_port gateway 127.0.0.1 "$GW_PORT"
for ((i = 0; i < 100; i++)); do [ -s "$STATE/gateway/admin-password" ] && break; sleep 0.1; done
[ -s "$STATE/gateway/admin-password" ] || die "the gateway wrote no admin password (see $STATE/logs/gateway.log)"
ctl login --url "https://127.0.0.1:$GW_PORT" --ca-file "$STATE/gateway/cert.pem" --user admin \
	--password-file "$STATE/gateway/admin-password" >/dev/null
for ((i = 1; i <= SDS_COUNT; i++)); do spawn_daemon "sds$i"; done

ctl system bootstrap --name cairn-chaos >/dev/null
ctl pd create pd1 >/dev/null
ctl pool create pool1 --pd pd1 >/dev/null
for ((k = 1; k <= FAULT_SETS; k++)); do ctl faultset create "fs$k" --pd pd1 >/dev/null; done
for ((i = 1; i <= SDS_COUNT; i++)); do
	fs=()
	if [ "$FAULT_SETS" -gt 0 ]; then fs=(--fault-set "fs$(((i - 1) % FAULT_SETS + 1))"); fi
	ctl sds create "sds$i" --pd pd1 --address "$(sds_ip "$i"):7100" "${fs[@]}" >/dev/null
done
for ((i = 1; i <= SDS_COUNT; i++)); do wait_daemon_port "sds$i" "$(sds_ip "$i")" 7100; done
for ((i = 1; i <= SDS_COUNT; i++)); do
	for ((d = 1; d <= DEVS; d++)); do
		f=$STATE/devices/sds$i-dev$d.img
		truncate -s "$DEV_SIZE" "$f"
		ctl device create "sds$i-dev$d" --sds "sds$i" --pool pool1 --path "$f" >/dev/null
	done
done
ctl host create local --type nbd >/dev/null
ctl volume create "$VOL" --pool pool1 --size "$VOL_SIZE" >/dev/null
ctl volume map "$VOL" --host local >/dev/null
spawn_daemon nbd
wait_daemon_port nbd 127.0.0.1 "$NBD_PORT"
# Ready means settled: the map may have been computed before the last
# device arrived and then be rebalanced; tests start from a steady cluster.
# Rebalance steps come and go within milliseconds, so settled means idle
# for 2 s in a row.
idle=0
for ((i = 0; i < 300 && idle < 10; i++)); do
	r=$(ctl --json system info 2>/dev/null | jq -r '.rebuild // {} |
		[.degraded_groups, .rebuilding_groups, .resyncing_groups, .rebalancing_groups, .pending_bytes] | map(. // 0) | add') || r=""
	if [ "$r" = 0 ]; then idle=$((idle + 1)); else idle=0; fi
	sleep 0.2
done
[ $idle -ge 10 ] || die "the cluster did not settle within 60 s (rebuild state sum ${r:-unknown}; see $STATE/logs/)"
say "cluster up in $((($(date +%s%N) - t0) / 1000000)) ms ($SDS_COUNT SDSs x $DEVS devices, $FAULT_SETS fault sets)"
echo "nbd://127.0.0.1:$NBD_PORT/$VOL"
